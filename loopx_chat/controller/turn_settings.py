"""A chat turn's own options: the `chat` command's flags, carried with the turn to whichever
process runs it (this one, or the owner's running service).

Owns the record (`TurnSettings`), the wire form a turn request carries (`options`: the
table `WIRE`, one row per option with its CLI name, field and check) and how a settings
record changes a thread's options and timeouts for one turn. Pure: no I/O, no clock; it
never decides a goal's own policy (`turn_policy` does; a turn's own flag wins over it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from loopx_chat.codex.thread import SANDBOX_POLICIES, ThreadOptions, Timeouts
from loopx_chat.codex.turn_defaults import APPROVAL_POLICIES
from loopx_chat.errors import UsageError


@dataclass(frozen=True)
class TurnSettings:
    """What one turn asked for itself; None: the runner's own setting."""

    sandbox: str | None = None
    approval_policy: str | None = None
    plan: bool | None = None
    decision_timeout: float | None = None
    idle_timeout: float | None = None
    turn_timeout: float | None = None
    first_output_timeout: float | None = None

    def given(self) -> frozenset[str]:
        return frozenset(f.name for f in fields(self) if getattr(self, f.name) is not None)


def _choice(allowed: tuple[str, ...]) -> tuple[Callable[[object], bool], str]:
    return (lambda value: isinstance(value, str) and value in allowed), "/".join(allowed)


def _seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


@dataclass(frozen=True)
class WireOption:
    field: str  # the TurnSettings field
    check: Callable[[object], bool]
    says: str  # what a valid value is, for the refusal


_SECONDS = (_seconds, "seconds above 0")
# The `options` object of a turn request, keyed by the CLI option's name (`--idle-timeout`
# is `idle_timeout`): the one table both ends read.
WIRE: Mapping[str, WireOption] = {
    "sandbox": WireOption("sandbox", *_choice(tuple(SANDBOX_POLICIES))),
    "approval": WireOption("approval_policy", *_choice(APPROVAL_POLICIES)),
    "plan": WireOption("plan", lambda value: isinstance(value, bool), "true or false"),
    "decision_timeout": WireOption("decision_timeout", *_SECONDS),
    "idle_timeout": WireOption("idle_timeout", *_SECONDS),
    "turn_timeout": WireOption("turn_timeout", *_SECONDS),
    "first_output_timeout": WireOption("first_output_timeout", *_SECONDS),
}


def from_wire(options: object) -> TurnSettings | None:
    """A turn request's `options` as settings (None when it gave none); a bad one is refused
    with `usage_error`, naming the option."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise UsageError("options must be an object", error_code="usage_error")
    values: dict[str, Any] = {}
    for name, value in options.items():
        row = WIRE.get(name)
        if row is None:
            raise UsageError(
                f"unknown turn option {name!r}; known: {', '.join(WIRE)}", error_code="usage_error"
            )
        if not row.check(value):
            raise UsageError(f"turn option {name} must be {row.says}", error_code="usage_error")
        values[row.field] = float(value) if row.check is _seconds else value
    return TurnSettings(**values) if values else None


def policy_given(settings: TurnSettings | None) -> frozenset[str]:
    """The ThreadOptions policy fields the turn gave itself (they win over the goal's)."""
    if settings is None:
        return frozenset()
    return frozenset({"approval_policy", "plan"} & settings.given())


def with_policy(options: ThreadOptions, settings: TurnSettings | None) -> ThreadOptions:
    """`options` with the turn's own approval policy and Plan mode."""
    if settings is None:
        return options
    changes = {name: getattr(settings, name) for name in policy_given(settings)}
    return replace(options, **changes) if changes else options


def turn_timeouts(timeouts: Timeouts, settings: TurnSettings | None) -> Timeouts:
    """The idle, turn and first-output limits of this turn."""
    if settings is None:
        return timeouts
    return replace(
        timeouts,
        idle=settings.idle_timeout or timeouts.idle,
        hard=settings.turn_timeout or timeouts.hard,
        first_output=settings.first_output_timeout or timeouts.first_output,
    )

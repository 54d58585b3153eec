"""Options and argument checks shared by several commands, so each reads the same everywhere.

`--actor` is one option with one set of values; `--goal` on a command that reads is checked
against the goals that exist, so a typo is `goal_not_found` rather than an empty answer (and
never a folder). Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from loopx_chat.cli.chat_output import FIRST_OUTPUT_HINT
from loopx_chat.cli.context import CliContext

__all__ = ["FIRST_OUTPUT_HINT", "POSITIVE_SECONDS"]

F = TypeVar("F", bound=Callable[..., Any])

# Seconds a timeout may take: zero or less would end every turn before it starts.
POSITIVE_SECONDS = click.FloatRange(min=0, min_open=True)


def first_output_from_env(cli: CliContext) -> float | None:
    """`LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT` from the command's environment snapshot, for the
    commands without a `--first-output-timeout` of their own (goal run, serve, writeback);
    None when unset. A value that is not a positive number is the owner's typo."""
    from loopx_chat.codex.turn_defaults import FIRST_OUTPUT_ENV

    raw = cli.environ.get(FIRST_OUTPUT_ENV, "")
    if not raw:
        return None
    try:
        seconds: float = POSITIVE_SECONDS.convert(float(raw), None, None)
        return seconds
    except (ValueError, click.BadParameter):  # not a number, or not above 0
        from loopx_chat.errors import UsageError

        raise UsageError(
            f"{FIRST_OUTPUT_ENV} must be a positive number of seconds", error_code="usage_error"
        ) from None


def port_option(default: int, where: str) -> Callable[[F], F]:
    """`--port` of a loopback listener (`serve`, `mock serve`); 0 takes any free port."""
    return click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=default,
        show_default=True,
        help=f"Port to listen on{where} (0: any free port).",
    )


def actor_option(default: str, role: str) -> Callable[[F], F]:
    """`--actor`: the same values on every command; `role` says what it means here."""
    # The goal modules load with the commands that use them, not with every command that
    # shares an option from here (a chat turn needs none of them).
    from loopx_chat.goals.goal_ledger import ACTORS

    return click.option(
        "--actor",
        type=click.Choice(ACTORS),
        default=default,
        help=f"{role}.",
    )


def known_goal(cli: CliContext, goal_id: str) -> str:
    """GOAL_ID when some session or goal record names it; else `goal_not_found` (the one
    refusal the service gives too: `goals.goal_facts.require_goal`)."""
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_facts import require_goal

    return require_goal(cli.store(), GateStore(cli.state_dir), goal_id)

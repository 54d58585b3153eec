"""Which approval policy and Plan mode a goal's thread runs with.

Owns the order: a command's own flag (`--approval`, `--plan`) wins, then the goal's
goal_state (`goal set G --approval … --plan`), then the controller's default (the service's
`serve --approval`, else `never` and no Plan mode). It reads the goal's goal_state and
nothing else; it never writes, never spawns and never talks to Codex.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from loopx_chat.codex.thread import ThreadOptions
from loopx_chat.errors import LoopxChatError

# The ThreadOptions fields a command may give itself (ControllerConfig.policy_given).
POLICY_FIELDS = frozenset({"approval_policy", "plan"})


def resolve(
    options: ThreadOptions,
    given: frozenset[str],
    approval_policy: str | None,
    plan: bool | None,
) -> ThreadOptions:
    """`options` with the goal's own policy and Plan mode where the command gave none."""
    changes: dict[str, object] = {}
    if "approval_policy" not in given and approval_policy is not None:
        changes["approval_policy"] = approval_policy
    if "plan" not in given and plan is not None:
        changes["plan"] = plan
    return replace(options, **changes) if changes else options  # type: ignore[arg-type]


def asks(options: ThreadOptions) -> bool:
    """Whether codex may ask the owner anything on a thread with these options."""
    return options.approval_policy != "never" or options.plan


def goal_options(
    root: Path, goal_id: str, options: ThreadOptions, given: frozenset[str]
) -> ThreadOptions:
    """The options `goal_id`'s thread runs with; an unreadable goal_state keeps `options`
    (status reports it; a turn is not refused for it)."""
    if given >= POLICY_FIELDS:
        return options
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_ledger import GoalLedger

    try:
        state = GoalLedger(GateStore(root)).goal_state(goal_id)
    except LoopxChatError:
        return options
    if state is None:
        return options
    return resolve(options, given, state.approval_policy, state.plan)

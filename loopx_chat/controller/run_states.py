"""The states of one goal run as its supervisor follows it, and the moves between them, as a table.

Owns `MOVES` (state -> {event: next state}), the one rule every move of a run is checked
against, and `RunState`, the run's current state, which refuses a move the table does not
list (`IllegalMove`: a bug in the supervisor, never the owner's input). `TERMINAL` states
have no exits. Docs and tests read the table; nothing else decides whether a move is legal.

It never does I/O and never talks to Codex: the run (`goal_run`) moves its state when its
own code acts or codex says something, and records events itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

AUTHORIZED = "authorized"  # the owner's authority is on record; nothing sent yet
RUNNING = "running"  # the host goal is active and codex runs its loop
BLOCKED = "blocked"  # waiting on the owner: a gate is open
PAUSED = "paused"  # the owner, the guard or loopx-chat paused it: the last turn finishes
BUDGET_SPENT = "budget_spent"  # the run's token budget is spent
USAGE_LIMITED = "usage_limited"  # the account's usage limit stopped codex's loop
COMPLETE = "complete"  # codex says the goal is done
FAILED = "failed"  # codex failed in a way the run could not recover from
RECOVERING = "recovering"  # codex's app-server died: it is started again, the thread resumed

STATES = (
    AUTHORIZED,
    RUNNING,
    BLOCKED,
    PAUSED,
    BUDGET_SPENT,
    USAGE_LIMITED,
    COMPLETE,
    FAILED,
    RECOVERING,
)


def _table(rows: dict[str, dict[str, str]]) -> Mapping[str, Mapping[str, str]]:
    return MappingProxyType({state: MappingProxyType(dict(moves)) for state, moves in rows.items()})


# How a run that is under way (running, or blocked on the owner) moves on.
_UNDER_WAY = {
    "paused": PAUSED,
    "budget_spent": BUDGET_SPENT,
    "usage_limited": USAGE_LIMITED,
    "completed": COMPLETE,
    "codex_died": RECOVERING,
    "failed": FAILED,
}
# What moves a run, from each state. An event a state does not list is illegal there.
MOVES: Mapping[str, Mapping[str, str]] = _table(
    {
        AUTHORIZED: {
            "loop_started": RUNNING,
            "codex_died": RECOVERING,
            "paused": PAUSED,  # Ctrl-C while the thread loads
            "failed": FAILED,
        },
        RUNNING: {"gate_opened": BLOCKED, **_UNDER_WAY},
        BLOCKED: {"gates_cleared": RUNNING, **_UNDER_WAY},
        PAUSED: {
            "paused": PAUSED,  # paused again (Ctrl-C while the last turn finishes): no move
            # The turn that ran when the run was paused finishes, and may end it otherwise.
            "budget_spent": BUDGET_SPENT,
            "usage_limited": USAGE_LIMITED,
            "completed": COMPLETE,
            "failed": FAILED,
        },
        USAGE_LIMITED: {
            "usage_limited": USAGE_LIMITED,  # waits again after codex refused to resume
            "usage_resumed": RUNNING,
            "gate_opened": BLOCKED,
            "paused": PAUSED,
            "completed": COMPLETE,
            "budget_spent": BUDGET_SPENT,
            "codex_died": RECOVERING,
            "failed": FAILED,
        },
        RECOVERING: {
            "loop_started": RUNNING,  # it died before the goal was set: set it now
            "recovered": RUNNING,
            "codex_died": RECOVERING,  # died again: the next try
            "paused": PAUSED,
            "failed": FAILED,
        },
        BUDGET_SPENT: {},
        COMPLETE: {},
        FAILED: {},
    }
)
TERMINAL = frozenset(state for state, moves in MOVES.items() if not moves)
# The state a run ends in, from the host goal's status when it ended.
ENDED_BY_STATUS: Mapping[str, str] = MappingProxyType(
    {
        "complete": "completed",
        "budgetLimited": "budget_spent",
        "usageLimited": "usage_limited",
        "paused": "paused",
        "blocked": "paused",
    }
)


# Why a run was paused when its turn was interrupted: the `reason` code of the run's `ended`
# record (its words: `goals.words.WORDS`, on the card and at the end of `goal run` and `goal
# follow`, with how to go on).
# A turn interrupted by none of this run's own rules (another client of codex's app-server):
# codex keeps the goal `active` and starts no further turn, so the run pauses it.
TURN_INTERRUPTED_OUTSIDE = "turn_interrupted_outside"
# The owner's `chat interrupt` of the run's turn: the run stops it now and pauses the goal.
TURN_INTERRUPTED_BY_OWNER = "turn_interrupted_by_owner"
PAUSE_REASONS = frozenset({TURN_INTERRUPTED_OUTSIDE, TURN_INTERRUPTED_BY_OWNER})


class IllegalMove(RuntimeError):
    """A move the table does not list: a bug in the run's supervisor."""


class RunState:
    """One run's current state; every move is checked against `MOVES`."""

    def __init__(self, state: str = AUTHORIZED) -> None:
        if state not in MOVES:
            raise IllegalMove(f"no state {state!r}")
        self.state = state

    def can(self, event: str) -> bool:
        return event in MOVES[self.state]

    def move(self, event: str) -> str:
        """Take the move `event` from the current state; raise IllegalMove when the table
        has none. A move to the state the run is already in is no move."""
        target = MOVES[self.state].get(event)
        if target is None:
            raise IllegalMove(f"a run that is {self.state} cannot take {event!r}")
        self.state = target
        return target

    def end_as(self, host_status: str | None) -> str:
        """The run ended with the host goal at `host_status`: move where that says when the
        table has that move from here; otherwise the run ends in the state it is in (a run
        the owner paused stays paused when codex reports the goal `paused`)."""
        event = ENDED_BY_STATUS.get(host_status or "")
        return self.move(event) if event is not None and self.can(event) else self.state

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


def reachable(start: str = AUTHORIZED) -> frozenset[str]:
    """Every state a run can reach from `start` through the table."""
    seen, todo = {start}, [start]
    while todo:
        for nxt in MOVES[todo.pop()].values():
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return frozenset(seen)

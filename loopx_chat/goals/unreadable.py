"""Records that cannot be read, shown on their goal so that no goal vanishes.

Owns which goal an unreadable session belongs to (its session.json can no longer say, so the
control-event log's `session_opened` and other events naming both ids do), the words that
tell the owner what to do about it, and the fail-closed owner gate that holds the goal while
the record stays unreadable (the unreadable session may hold a running turn or a decision we
cannot see, so the agent must not go on as if it were not there). It never repairs, moves or
rewrites a record, and its words never carry a local path: the folder is named relative to
the state dir.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import GateStore, is_valid_goal_id
from loopx_chat.goals.goal_facts import GoalFacts
from loopx_chat.state.session_store import SessionStore, StoreProblem

# What the owner can do about each kind of unreadable record, in words (no path).
WHAT_TO_DO: Mapping[str, str] = {
    "state_corrupt": "its session.json is damaged: restore it from a backup or move its "
    "folder out of sessions/ in the state dir",
    "state_schema_unsupported": "a newer loopx-chat wrote it: upgrade, or move its folder "
    "out of sessions/ in the state dir",
    "state_unreadable": "loopx-chat may not read it: give your user read access to its "
    "folder in sessions/",
    "state_unsafe": "it is a link or another user's file: put the real folder back in "
    "sessions/ or move it out",
}
WHAT_TO_DO_DEFAULT = (
    "`loopx-chat sessions list` says why: repair its folder in sessions/ in the state dir or "
    "move it out"
)


@dataclass(frozen=True)
class Unreadable:
    """One record that could not be read, in words the owner can act on (no path)."""

    session_id: str
    error_code: str

    @property
    def gate_id(self) -> str:
        return f"unreadable-{self.session_id}"

    @property
    def what_to_do(self) -> str:
        words = WHAT_TO_DO.get(self.error_code, WHAT_TO_DO_DEFAULT)
        return words

    @property
    def summary(self) -> str:
        return f"session {self.session_id} cannot be read ({self.error_code})"

    def to_dict(self) -> dict[str, str]:
        return {
            "record": f"session {self.session_id}",
            "session_id": self.session_id,
            "error_code": self.error_code,
            "problem": self.summary,
            "what_to_do": self.what_to_do,
        }

    def gate(self, at: str) -> dict[str, Any]:
        """The fail-closed owner gate this record puts on its goal's first screen."""
        return {
            "gate_id": self.gate_id,
            "kind": "gate",
            "status": "blocked",
            "actor": "owner",
            "blocking": True,
            "question": f"{self.summary}: {self.what_to_do}",
            "created_at": at,
        }


@dataclass(frozen=True)
class UnreadableByGoal:
    by_goal: dict[str, tuple[Unreadable, ...]]
    unattributed: tuple[Unreadable, ...]


def _owners(events: Iterable[Mapping[str, Any]], wanted: set[str]) -> dict[str, str]:
    """session id → the goal the control log last named it with."""
    owners: dict[str, str] = {}
    for event in events:
        sid, gid = event.get("session_id"), event.get("goal_id")
        if sid in wanted and isinstance(gid, str) and is_valid_goal_id(gid):
            owners[str(sid)] = gid
    return owners


def attribute(problems: Sequence[StoreProblem], goals: GateStore) -> UnreadableByGoal:
    """Each unreadable session on the goal the control log names it with; the rest (an
    unreadable log, or a session it never named) stay listed as unattributed."""
    if not problems:
        return UnreadableByGoal({}, ())
    records = [Unreadable(p.session_id, p.error_code) for p in problems]
    try:
        owners = _owners(goals.control.events(), {r.session_id for r in records})
    except StateError:
        owners = {}
    by_goal: dict[str, list[Unreadable]] = {}
    unattributed: list[Unreadable] = []
    for record in records:
        goal = owners.get(record.session_id)
        if goal is None:
            unattributed.append(record)
        else:
            by_goal.setdefault(goal, []).append(record)
    return UnreadableByGoal({g: tuple(r) for g, r in by_goal.items()}, tuple(unattributed))


def with_unreadable(facts: GoalFacts, records: Sequence[Unreadable]) -> GoalFacts:
    """The goal's facts with one fail-closed owner gate per unreadable record (after the
    goal's own gates: a person's open gate stays the one the first screen asks about)."""
    if not records:
        return facts
    at = facts.last_recorded_at or ""
    return replace(
        facts,
        gates=[*facts.gates, *(r.gate(at) for r in records)],
        control_gate_ids=facts.control_gate_ids | {r.gate_id for r in records},
        unreadable_records=tuple(r.session_id for r in records),
    )


def goal_records_gate(goal_id: str, error_code: str) -> dict[str, Any]:
    """The fail-closed gate of a goal none of whose records could be read into facts."""
    return {
        "gate_id": f"unreadable-{goal_id}",
        "kind": "gate",
        "status": "blocked",
        "actor": "owner",
        "blocking": True,
        "question": f"the records of goal {goal_id} cannot be read ({error_code}): "
        f"`loopx-chat status --goal {goal_id}` in a terminal names the file to repair",
    }


def unreadable_fields(records: Sequence[Unreadable]) -> dict[str, Any]:
    """What a status row adds for its unreadable records: each in words, and the row's
    severity raised to high (the owner must act). Nothing when every record was read."""
    if not records:
        return {}
    return {"severity": "high", "problems": [r.to_dict() for r in records]}


def require_listed_goal(store: SessionStore, goals: GateStore, goal_id: str) -> str:
    """GOAL_ID when a record names it, readable or not (a goal known only through a session
    that cannot be read is still a goal); else `goal_not_found`, as `require_goal` says."""
    from loopx_chat.goals.goal_facts import require_goal

    problems = store.list().problems
    if problems and goal_id in attribute(problems, goals).by_goal:
        return goal_id
    return require_goal(store, goals, goal_id)

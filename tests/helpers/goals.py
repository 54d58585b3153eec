"""Test helpers: a goal with a session and completed turns, as the session store holds them."""

from __future__ import annotations

from pathlib import Path

from loopx_chat.state.session_records import SessionRecord, TurnRecord
from loopx_chat.state.session_store import SessionStore


def goal_with_turns(root: Path, goal: str, *turn_ids: str) -> None:
    store = SessionStore(root)
    session = f"s-{goal}"
    store.create(SessionRecord(session_id=session, goal_id=goal, created_at="t", updated_at="t"))
    for tid in turn_ids:
        store.save_turn(
            TurnRecord(
                turn_id=tid,
                session_id=session,
                status="completed",
                created_at="t",
                updated_at="t",
                completed_at="t",
            )
        )


def goal_with_policy(root: Path, goal: str, approval_policy: str | None) -> Path:
    """A goal_state for `goal` (with `approval_policy` when given) and a fresh work folder
    beside the state dir; returns the folder."""
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_ledger import GoalLedger

    fields: dict[str, object] = {"objective": "make the file", "acceptance": ["it exists"]}
    if approval_policy is not None:
        fields["approval_policy"] = approval_policy
    GoalLedger(GateStore(root)).set_goal_state(goal, fields)
    work = root.parent / "work"
    work.mkdir()
    return work

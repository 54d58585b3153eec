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

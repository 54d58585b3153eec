"""`goal follow` says a run's events and its turns in the order they happened, also when
one look finds several (a service that took a run up again after codex died finds the
turns that ended just before it and the restart at once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopx_chat.cli.goal_follow import RunFollower
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import GoalRuns, run_objective
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord
from loopx_chat.state.session_store import SessionStore


def _times() -> Iterator[str]:
    second = 0
    while True:
        second += 1
        yield f"2026-12-07T10:00:{second:02d}.000000Z"


def test_one_look_says_turns_and_events_in_the_order_they_happened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = _times()
    now = clock.__next__
    goals = GateStore(tmp_path, clock=now)
    records = GoalLedger(goals)
    records.set_goal_state("g", {"objective": "ship", "acceptance": ["shipped"]})
    store = SessionStore(tmp_path)
    store.create(SessionRecord(session_id="s", goal_id="g", created_at="t", updated_at="t"))
    runs = GoalRuns(goals)
    run = runs.authorize(
        "g", session_id="s", thread_id="t", actor="owner", surface="cli", token_budget=9000,
        objective=run_objective(records, "g", None),
    )  # fmt: skip

    def turn(n: int) -> None:
        at = now()
        store.save_turn(
            TurnRecord(
                turn_id=f"turn-{n}",
                session_id="s",
                status="completed",
                created_at=at,
                updated_at=at,
                completed_at=at,
                tokens=TokenCounts(total_tokens=1000),
                origin="goal_loop",
                run_id=run.run_id,
            )
        )

    runs.note("g", run.run_id, "started", host_tokens_before=0)
    turn(1)
    turn(2)
    runs.note("g", run.run_id, "recovering", reason="app_server_exited", attempt=1, tries=3)
    runs.note("g", run.run_id, "recovered", pid=1)
    turn(3)
    runs.note("g", run.run_id, "ended", by="host", host_status="budgetLimited")

    RunFollower(tmp_path, None, "g", as_json=False, words=False).follow()
    said = [line.removeprefix("[loopx-chat] ") for line in capsys.readouterr().err.splitlines()]
    happened = (
        "Codex is working on goal g",
        "turn 1 completed  1,000 of 9,000 tokens",
        "turn 2 completed  2,000 of 9,000 tokens",
        "Codex stopped (Codex's app-server exited): starting it again (1 of 3)",
        f"run {run.run_id} recovered",
        "turn 3 completed  3,000 of 9,000 tokens",
        f"run {run.run_id} ended",
    )
    where = [next((i for i, line in enumerate(said) if line.startswith(h)), -1) for h in happened]
    assert -1 not in where and where == sorted(where), said

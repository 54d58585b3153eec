"""The pure rules of goal runs: exit codes, the objective sent to the host, the first
screen's words for each host goal status, a finished run's owner gate, the rate-limit reset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.goal_loop import GoalLoopWatch, HostGoalState
from loopx_chat.errors import StateError, UsageError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import (
    EXIT_CODES,
    PHASES,
    GoalRun,
    GoalRuns,
    exit_code_for,
    host_goal_words,
    run_answer_gate,
    run_objective,
)


def test_each_way_a_run_ends_has_its_own_exit_code() -> None:
    assert EXIT_CODES == {
        "complete": 0,
        "budgetLimited": 3,
        "usageLimited": 4,
        "blocked": 5,
        "paused": 6,
    }
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)
    assert exit_code_for(None) == exit_code_for("active") == 1


def test_the_objective_is_the_pending_handoff_else_the_goal_state(tmp_path: Path) -> None:
    goals = GateStore(tmp_path)
    records = GoalLedger(goals)
    with pytest.raises(StateError) as info:
        run_objective(records, "g", None)
    assert info.value.error_code == "objective_required"
    records.set_goal_state("g", {"objective": "ship  it", "acceptance": ["tests pass", "docs"]})
    state = run_objective(records, "g", None)
    assert (state.text, state.source) == ("ship it. Done when: tests pass; docs", "goal_state")
    packet = goals.record_handoff("g", "fix the flake", "it passes 10 times", ())
    handed = run_objective(records, "g", packet)
    assert (handed.text, handed.source, handed.source_id) == (
        "fix the flake. Stop when: it passes 10 times",
        "handoff",
        packet.handoff_id,
    )
    long = goals.record_handoff("g", "x" * 250, "y" * 250, ())
    assert len(run_objective(records, "g", long).text) <= 280  # compact, as every record


def test_a_raw_objective_is_refused_by_the_one_text_filter(tmp_path: Path) -> None:
    records = GoalLedger(GateStore(tmp_path))
    with pytest.raises(UsageError) as info:
        records.set_goal_state(
            "g", {"objective": "read /Users/me/secret.txt", "acceptance": ["ok"]}
        )
    assert info.value.error_code == "unsafe_text"


def _run(tmp_path: Path, *events: tuple[str, dict[str, Any]]) -> GoalRun:
    goals = GateStore(tmp_path)
    records = GoalLedger(goals)
    records.set_goal_state("g", {"objective": "ship", "acceptance": ["shipped"]})
    runs = GoalRuns(goals)
    run = runs.authorize(
        "g",
        session_id="s",
        thread_id="t",
        actor="owner",
        surface="cli",
        token_budget=20000,
        objective=run_objective(records, "g", None),
    )
    for event, fields in events:
        run = runs.note("g", run.run_id, event, **fields)
    return run


def _goal(status: str, used: int = 0) -> dict[str, Any]:
    return {"status": status, "tokens_used": used, "token_budget": 50000, "turns": 3}


def test_the_first_screen_words_for_each_host_goal_status(tmp_path: Path) -> None:
    running = _run(tmp_path, ("started", {"host_tokens_before": 0}))
    assert host_goal_words(_goal("active", 12400), running, []) == (
        "Codex is working on it (turn 3, 12,400 of 50,000 tokens)"
    )
    assert host_goal_words(_goal("active"), None, []) == (
        "Codex is running a goal loopx-chat did not start (no budget set here)"
    )
    assert host_goal_words(None, None, []) == "no Codex goal on this thread"
    assert host_goal_words(_goal("complete"), None, ["tests pass"]).startswith(
        "Codex says it is done: check tests pass"
    )
    spent = {**_goal("budgetLimited", 26247), "run_tokens_used": 26247, "run_token_budget": 20000}
    assert host_goal_words(spent, None, []).startswith("budget spent (26,247 of 20,000 tokens)")
    blocked = _run(tmp_path / "b", ("started", {}), ("blocked", {"gate_id": "gate-1"}))
    assert host_goal_words(_goal("blocked"), blocked, []) == "blocked by owner gate gate-1"
    assert host_goal_words(_goal("blocked"), None, []) == "blocked by the agent"
    paused = _run(tmp_path / "p", ("ended", {"host_status": "paused", "by": "owner (Ctrl-C)"}))
    assert host_goal_words(_goal("paused"), paused, []) == "paused by owner (Ctrl-C)"
    assert host_goal_words(_goal("paused"), None, []) == "paused by someone outside loopx-chat"
    limited = _run(
        tmp_path / "u",
        ("ended", {"host_status": "usageLimited", "usage_resets_at": 1796160000}),
    )
    assert host_goal_words(_goal("usageLimited"), limited, []) == (
        "waiting on the account's usage limit (it resets at 2026-12-01 21:20 UTC)"
    )


def test_a_finished_run_leaves_an_owner_gate_until_it_is_answered(tmp_path: Path) -> None:
    done = _run(tmp_path, ("ended", {"host_status": "complete"}))
    gate = run_answer_gate(done, ["shipped"])
    assert gate is not None and gate["blocking"] and gate["gate_id"] == done.run_id
    assert "check shipped" in gate["question"] and "goal accept g" in gate["question"]
    spent = _run(tmp_path / "s", ("ended", {"host_status": "budgetLimited", "run_tokens": 21000}))
    spent_gate = run_answer_gate(spent, [])
    assert spent_gate is not None and "21,000 of 20,000" in spent_gate["question"]
    accepted = _run(tmp_path / "a", ("ended", {"host_status": "complete"}), ("accepted", {}))
    assert accepted.state == "closed" and run_answer_gate(accepted, []) is None
    paused = _run(tmp_path / "p", ("ended", {"host_status": "paused"}))
    assert run_answer_gate(paused, []) is None
    assert run_answer_gate(None, []) is None


@pytest.mark.parametrize(
    ("events", "phase"),
    [
        ((), "authorized"),
        ((("started", {}),), "running"),
        ((("started", {}), ("blocked", {"gate_id": "gate-1"})), "blocked on owner"),
        ((("started", {}), ("blocked", {}), ("unblocked", {})), "running"),
        ((("started", {}), ("recovering", {"attempt": 1})), "recovering"),
        ((("started", {}), ("recovering", {}), ("recovered", {})), "running"),
        ((("started", {}), ("usage_wait", {"usage_resets_at": 1})), "usage-limited"),
        ((("started", {}), ("usage_wait", {}), ("usage_resumed", {})), "running"),
        ((("started", {}), ("paused", {"reason": "no progress"})), "paused"),
        ((("started", {}), ("ended", {"host_status": "budgetLimited"})), "budget spent"),
        ((("started", {}), ("ended", {"host_status": "usageLimited"})), "usage-limited"),
        ((("started", {}), ("ended", {"host_status": "complete"})), "complete"),
        ((("started", {}), ("ended", {"host_status": "paused"})), "paused"),
        ((("started", {}), ("ended", {"failed": True, "reason": "gone"})), "failed"),
        ((("ended", {"host_status": "complete"}), ("accepted", {})), "complete"),
    ],
)
def test_a_runs_state_follows_the_transition_table(
    tmp_path: Path, events: tuple[tuple[str, dict[str, Any]], ...], phase: str
) -> None:
    run = _run(tmp_path, *events)
    assert run.phase == phase and phase in PHASES


def test_the_usage_limit_reset_comes_from_the_rate_limit_notice() -> None:
    watch = GoalLoopWatch(thread=None)  # type: ignore[arg-type]  # no call reaches codex
    watch._see_rate_limits({"primary": None, "secondary": None})
    assert watch.usage_resets_at is None
    watch._see_rate_limits({"primary": {"resetsAt": 100}, "secondary": {"resetsAt": 250}})
    assert watch.usage_resets_at == 250
    watch._see_rate_limits({"primary": {"resetsAt": True}})  # not a time: ignored
    assert watch.usage_resets_at == 250


def test_a_host_goal_is_read_without_its_text() -> None:
    goal = HostGoalState.from_wire(
        {"objective": "CANARY", "status": "weird", "tokenBudget": True, "tokensUsed": 5}
    )
    assert goal is not None
    assert goal.to_dict() == {
        "status": "unknown",
        "token_budget": None,
        "tokens_used": 5,
        "time_used_seconds": 0,
    }
    assert HostGoalState.from_wire(None) is None

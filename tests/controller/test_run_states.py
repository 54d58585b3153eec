"""`controller.run_states`: a goal run's states and moves are one table, and it is enforced."""

from __future__ import annotations

import pytest

from loopx_chat.controller.run_states import (
    AUTHORIZED,
    BLOCKED,
    ENDED_BY_STATUS,
    MOVES,
    PAUSED,
    RECOVERING,
    RUNNING,
    STATES,
    TERMINAL,
    IllegalMove,
    RunState,
    reachable,
)


def test_every_state_is_in_the_table_and_reachable_from_authorized() -> None:
    assert set(MOVES) == set(STATES)
    assert reachable(AUTHORIZED) == frozenset(STATES)
    for moves in MOVES.values():
        assert set(moves.values()) <= set(STATES)  # no move leads out of the table


def test_terminal_states_have_no_exits_and_every_other_state_can_end() -> None:
    assert {"complete", "budget_spent", "failed"} == TERMINAL
    for state in TERMINAL:
        assert dict(MOVES[state]) == {}
        with pytest.raises(IllegalMove):
            RunState(state).move("loop_started")
    for state in set(STATES) - TERMINAL:
        assert reachable(state) & TERMINAL, state  # nothing non-terminal is a dead end
        assert MOVES[state].get("failed") == "failed"  # any run can fail


def test_an_illegal_move_raises_and_leaves_the_state_as_it_was() -> None:
    run = RunState()
    with pytest.raises(IllegalMove, match="authorized cannot take 'gates_cleared'"):
        run.move("gates_cleared")
    assert run.state == AUTHORIZED
    with pytest.raises(IllegalMove):
        RunState("no such state")
    with pytest.raises(TypeError):  # the table is read-only
        MOVES[RUNNING]["gate_opened"] = PAUSED  # type: ignore[index]


def test_a_run_that_is_blocked_recovers_and_ends_as_the_host_says() -> None:
    run = RunState()
    events = ("loop_started", "gate_opened", "codex_died", "recovered", "gate_opened")
    states = [run.move(event) for event in events]
    assert run.state == BLOCKED
    states.append(run.move("gates_cleared"))
    states.append(run.end_as("complete"))
    assert run.terminal
    assert states == [
        RUNNING,
        BLOCKED,
        RECOVERING,
        RUNNING,
        BLOCKED,
        RUNNING,
        "complete",
    ]


def test_a_paused_run_stays_paused_when_codex_reports_it_paused() -> None:
    run = RunState(RUNNING)
    run.move("paused")
    assert run.move("paused") == PAUSED  # paused again (Ctrl-C meanwhile): no move
    assert run.end_as("paused") == PAUSED and run.end_as("blocked") == PAUSED
    assert run.end_as(None) == PAUSED
    assert set(ENDED_BY_STATUS.values()) <= {e for moves in MOVES.values() for e in moves}


def test_the_architecture_doc_carries_the_table_as_it_is() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    for state, moves in MOVES.items():
        cell = ", ".join(f"`{e}` → {t}" for e, t in moves.items()) or "(terminal: no exits)"
        assert f"| {state} | {cell} |" in doc, state

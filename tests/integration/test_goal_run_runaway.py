"""Runaway loops stop, on the real codex against the mock: continuation turns that repeat
themselves (no tool call, the same answer) or pass the owner's `--max-turns` pause the run
with an owner gate that says why in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.goal_runs import goal_loop_turns, run_events
from tests.helpers.owner_cli import OwnerCli


@pytest.fixture
def cli(tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str) -> OwnerCli:
    return OwnerCli(tmp_path, bound_home, base_env, codex_bin)


def _goal_with_session(cli: OwnerCli) -> str:
    done = cli("goal", "set", "g", "--objective", "count to three", "--acceptance", "3 said")
    assert done.returncode == 0, done.stderr
    code, doc = cli.json("chat", "new", "--goal", "g", "mock:text=ready")
    assert code == 0, doc
    return str(doc["session_id"])


def _open_gates(cli: OwnerCli) -> list[str]:
    return [g.question for g in GateStore(cli.state).gates("g") if g.status == "pending"]


def test_a_loop_that_repeats_itself_is_paused_with_a_gate_after_three_turns(
    cli: OwnerCli, mock: MockResponsesServer
) -> None:
    sid = _goal_with_session(cli)
    # The same answer, no tool call, turn after turn; far more of them than the guard allows.
    mock.script(*["mock:text=still thinking about it"] * 20, default="mock:text=unused")
    done = cli("goal", "run", "g", "--token-budget", "400000")
    assert done.returncode == 6, done.stderr  # paused
    turns = goal_loop_turns(cli.state, sid)
    assert len(turns) == 3 and all(t.status == "completed" for t in turns)
    ended = run_events(cli.state, "g")[-1]
    assert ended["by"] == "loopx-chat (runaway guard)"
    assert ended["host_status"] == "paused"
    assert "no progress in 3 turns in a row" in done.stderr
    [question] = _open_gates(cli)
    assert question.startswith("Goal g is paused: Codex made no progress in 3 turns in a row")
    # The gate holds the goal: a new run is refused until the owner decides it.
    again = cli("goal", "run", "g", "--token-budget", "1000")
    assert again.returncode != 0 and "gate_open" in again.stderr


def test_max_turns_pauses_a_loop_that_gets_somewhere(
    cli: OwnerCli, mock: MockResponsesServer
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:text=one more step")  # numbered: a different answer each turn
    code, doc = cli.json("goal", "run", "g", "--token-budget", "400000", "--max-turns", "2")
    assert code == 6, doc
    assert doc["turns"] == 2 and len(goal_loop_turns(cli.state, sid)) == 2
    assert doc["run"]["ended_by"] == "loopx-chat (runaway guard)"
    [question] = _open_gates(cli)
    assert "reached its limit of 2 turns (--max-turns)" in question

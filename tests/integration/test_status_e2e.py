"""End to end: a session on the real codex + mock, a gate requested and resolved, a failed
turn, and `status --json` reflecting each step without leaking text or paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from loopx_chat.cli import main
from tests.helpers.real_codex import make_controller


def _status(state: Path, home: Path) -> dict[str, Any]:
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(state), "status", "--goal", "goal-e2e", "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(home)},
    )
    assert result.exit_code == 0, result.output
    (goal,) = json.loads(result.stdout)["attention_queue"]
    return goal


def _cli(state: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["--state-dir", str(state), *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_status_follows_the_goal(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    canary = "CANARY-prompt-7f3a"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        record = c.open_session("goal-e2e", tmp_path)
        done = c.submit_turn(record.session_id, f"{canary} please")
    assert done.turn.status == "completed"
    goal = _status(state, bound_home)
    fs = goal["projection"]["first_screen"]
    assert fs["latest_validation"].startswith(f"turn {done.turn.turn_id} completed")
    assert goal["waiting_on"] == "monitor_signal"

    gate = _cli(state, "gate", "request", "--goal", "goal-e2e", "--question", "Merge now?")["gate"]
    goal = _status(state, bound_home)
    assert goal["waiting_on"] == "user_or_controller"
    assert goal["projection"]["first_screen"]["first_user_todo"] == "Merge now?"
    assert goal["projection"]["first_screen"]["agent_can_continue"] is False

    _cli(state, "gate", "resolve", gate["gate_id"], "--goal", "goal-e2e", "--decision", "approve")
    _cli(
        state,
        "handoff",
        "record",
        "--goal",
        "goal-e2e",
        "--next-action",
        "merge it",
        "--stop-condition",
        "merged",
    )
    goal = _status(state, bound_home)
    assert goal["waiting_on"] == "codex"
    assert goal["projection"]["first_screen"]["agent_can_continue"] is True

    with make_controller(state, bound_home, base_env, codex_bin) as c:
        failed = c.submit_turn(record.session_id, "mock:error=500")
    assert failed.turn.status == "failed"
    goal = _status(state, bound_home)
    assert goal["projection"]["first_screen"]["latest_blocker"].startswith(
        f"turn {failed.turn.turn_id} failed"
    )
    text = json.dumps(goal)
    assert canary not in text and "mock reply" not in text
    assert str(tmp_path) not in text and str(bound_home) not in text

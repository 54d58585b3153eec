"""Staleness and reconcile reasons: pure rules, then the host moving on without loopx-chat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.codex.rollouts import ThreadFacts
from loopx_chat.codex.rollouts.records import LastTurn, TurnCounts
from loopx_chat.codex.thread import CodexThread
from loopx_chat.goals.reconcile import Staleness, reconcile_reason, staleness
from tests.helpers.real_codex import make_controller, real_launch


def thread(tid: str, started: int, outcome: str, at: str) -> ThreadFacts:
    return ThreadFacts(
        thread_id=tid,
        latest_event_at=at,
        turns=TurnCounts(started=started, completed=started),
        last_turn=LastTurn(turn_id="t", outcome=outcome),
        tokens=None,
        models=(),
        history_mode="paginated",
        archived=False,
    )


def test_staleness_counts_turns_and_seconds() -> None:
    host = {"a": thread("a", 3, "completed", "2026-01-01T00:01:00Z")}
    behind = staleness(["a"], {"a": 1}, "2026-01-01T00:00:00.000000Z", host)
    assert (behind.stale, behind.behind_turns, behind.behind_seconds) == (True, 2, 60.0)
    level = staleness(["a"], {"a": 3}, "2026-01-01T00:01:00Z", host)
    assert (level.stale, level.behind_turns) == (False, 0)
    assert staleness(["missing"], {}, None, host).stale is False


@pytest.mark.parametrize(
    ("outcome", "stale", "screen", "reason"),
    [
        ("completed", False, {"user_action_required": True}, "human_decision_pending"),
        ("completed", False, {"latest_blocker": "turn x failed"}, "missing_gate"),
        ("completed", True, {}, "missing_validation"),
        ("failed", False, {}, "failed_outcome"),
        ("interrupted", True, {}, "failed_outcome"),
        ("failed", True, {"latest_blocker": "turn x failed"}, "stale_artifact"),
        ("completed", False, {}, None),
        (None, True, {}, "stale_artifact"),
        (None, False, {}, None),
    ],
)
def test_reconcile_reasons(
    outcome: str | None, stale: bool, screen: dict[str, object], reason: str | None
) -> None:
    assert reconcile_reason(Staleness(stale, 1 if stale else 0, None, outcome), screen) == reason


def test_host_moving_on_marks_the_goal_stale(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        record = c.open_session("g-stale", tmp_path)
        c.submit_turn(record.session_id, "through loopx-chat")

    def status() -> dict:  # type: ignore[type-arg]
        result = CliRunner().invoke(
            main,
            ["--state-dir", str(state), "status", "--goal", "g-stale", "--json"],
            env={"LOOPX_CHAT_CODEX_HOME": str(bound_home)},
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["attention_queue"][0]

    fresh = status()
    assert fresh["host"]["stale"] is False and fresh["reconcile_reason"] is None

    # Another client (think Codex Desktop) runs a turn on the same thread, not through us.
    other = CodexThread.open(
        real_launch(codex_bin, bound_home, tmp_path, base_env, tmp_path / "other.log"),
        resume_thread_id=record.upstream_thread_id,
    )
    try:
        turn_id, _ = other.start_turn("from another client")
        assert other.wait_turn(turn_id).status == "completed"
    finally:
        other.close()

    moved = status()
    assert moved["host"]["stale"] is True and moved["host"]["behind_turns"] == 1
    assert moved["reconcile_reason"] == "missing_validation"
    metrics = CliRunner().invoke(
        main, ["--state-dir", str(state), "metrics", "--goal", "g-stale", "--json"]
    )
    detection = json.loads(metrics.stdout)["stale_projection_detection"]
    assert detection["detections"] == 1 and detection["mean_lag_turns"] == 1
    status()  # the same position is not reported twice
    again = CliRunner().invoke(
        main, ["--state-dir", str(state), "metrics", "--goal", "g-stale", "--json"]
    )
    assert json.loads(again.stdout)["stale_projection_detection"]["detections"] == 1

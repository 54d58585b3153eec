"""Goal-control metrics from the control-event log: a scripted scenario through the real
controller (fake codex) and CLI, checked numerator by numerator."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.errors import CodexError, LoopxChatError
from loopx_chat.goals.goal_store import GoalStore
from loopx_chat.goals.metrics import compute_metrics
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.session_store import SessionStore
from tests.conftest import FakeCodex


def _controller(tmp_path: Path, fake: FakeCodex, scenario: str = "ok") -> ChatController:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return ChatController(
        store=SessionStore(tmp_path / "state"),
        environ={
            "PATH": os.environ["PATH"],
            "LOOPX_CHAT_CODEX_HOME": str(home),
            **fake.env(scenario),
        },
        cwd=tmp_path,
        codex_bin=str(fake.bin),
        config=ControllerConfig(timeouts=Timeouts(idle=0.5, request=10, startup=10)),
    )


def _cli(tmp_path: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(tmp_path / "state"), *args, "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_scripted_scenario_gives_every_numerator(tmp_path: Path, fake_codex: FakeCodex) -> None:
    c1 = _controller(tmp_path, fake_codex)
    s1 = c1.open_session("gm", tmp_path)
    assert (
        c1.submit_turn(s1.session_id, "CANARY-one", client_turn_id="c1").turn.status == "completed"
    )
    assert (
        c1.submit_turn(s1.session_id, "CANARY-one", client_turn_id="c1").created is False
    )  # replay
    with _controller(tmp_path, fake_codex, "hang_turn") as c2:
        with pytest.raises(CodexError):  # c1 still holds the thread: refused, nothing ran
            c2.submit_turn(s1.session_id, "two")
        c1.close()
        interrupted = c2.submit_turn(s1.session_id, "two")
    assert (interrupted.turn.status, interrupted.turn.error_code) == ("interrupted", "idle_timeout")
    with _controller(tmp_path, fake_codex) as c3:
        assert c3.submit_turn(s1.session_id, "three").turn.status == "completed"  # recovery
    _cli(tmp_path, "status")  # the owner sees the blocker (the interrupted turn)
    gate = _cli(tmp_path, "gate", "request", "--goal", "gm", "--question", "CANARY-gate?")["gate"]
    with _controller(tmp_path, fake_codex) as c4:
        c4.open_session("gm", tmp_path)  # a restart that does work while the gate is open
    _cli(tmp_path, "status")  # the owner sees the gate
    _cli(tmp_path, "gate", "resolve", gate["gate_id"], "--goal", "gm", "--decision", "approve")
    _cli(
        tmp_path,
        "handoff",
        "record",
        "--goal",
        "gm",
        "--next-action",
        "finish",
        "--stop-condition",
        "done",
    )
    with _controller(tmp_path, fake_codex) as c5:
        s3 = c5.open_session("gm", tmp_path)  # a later session picks up the handoff
        assert c5.submit_turn(s3.session_id, "four").turn.status == "completed"

    doc = _cli(tmp_path, "metrics", "--goal", "gm")
    pick = lambda name: (doc[name]["numerator"], doc[name]["denominator"])  # noqa: E731
    assert pick("interrupted_task_recovery") == (1, 1)
    assert pick("duplicate_compute_avoided") == (2, 6)  # 1 replay + 1 refusal of 6 decisions
    assert doc["duplicate_compute_avoided"]["submit_replays"] == 1
    assert doc["duplicate_compute_avoided"]["thread_busy_refusals"] == 1
    assert pick("owner_gates_preserved") == (1, 1)
    assert pick("cross_session_handoff_success") == (1, 1)
    assert pick("time_to_owner_sees_blocker") == (2, 2)
    assert doc["time_to_owner_sees_blocker"]["max_seconds"] >= 0
    # The log is compact: ids, codes and timestamps only.
    text = (tmp_path / "state" / "events" / "control.jsonl").read_text()
    assert "CANARY" not in text
    _cli(tmp_path, "goal", "set", "other-goal", "--objective", "another goal")
    other = _cli(tmp_path, "metrics", "--goal", "other-goal")
    assert other["interrupted_task_recovery"]["denominator"] == 0


def test_a_gate_lost_across_a_restart_is_not_counted_as_preserved() -> None:
    events = [
        {
            "kind": "gate_requested",
            "goal_id": "g",
            "gate_id": "gate-1",
            "at": "2026-01-01T00:00:00Z",
        },
        {
            "kind": "gate_requested",
            "goal_id": "g",
            "gate_id": "gate-2",
            "at": "2026-01-01T00:00:01Z",
        },
        {
            "kind": "controller_started",
            "open_gate_ids": ["gate-1", "gate-2"],
            "at": "2026-01-01T00:01:00Z",
        },
    ]
    # gate-2 vanished from the gate log (e.g. a rewritten file): not preserved.
    doc = compute_metrics(events, {"gate-1": "pending"}, "g")
    assert (
        doc["owner_gates_preserved"]["numerator"],
        doc["owner_gates_preserved"]["denominator"],
    ) == (1, 2)
    # closed without a recorded decision after the restart: not preserved either
    doc = compute_metrics(events, {"gate-1": "pending", "gate-2": "approved"}, "g")
    assert doc["owner_gates_preserved"]["numerator"] == 1


def test_corrupt_control_log_is_reported(tmp_path: Path) -> None:
    log = ControlLog(tmp_path)
    log.record("handoff_recorded", goal_id="g", handoff_id="h")
    log.path.write_bytes(b"garbage\n" + log.path.read_bytes())
    with pytest.raises(LoopxChatError) as info:
        list(log.events())
    assert info.value.error_code == "state_corrupt"
    with pytest.raises(ValueError):
        log.record("handoff_recorded", goal_id="g", text="never")  # the vocabulary is closed
    assert GoalStore(tmp_path).control.path == log.path


def test_reported_reads_only_what_was_appended_and_refolds_a_replaced_log(tmp_path: Path) -> None:
    log = ControlLog(tmp_path)
    log.record("blocker_displayed", goal_id="g", blocker_ref="gate-1", surface="status")
    log.record("stale_detected", goal_id="g", lag_turns=1, lag_seconds=5, position="g@1:t")
    assert log.reported() == {"blockers": {"gate-1"}, "stale": {"g@1:t"}}

    # Damage bytes already folded, in place: a whole-file read would now fail, the fold does
    # not read them again.
    raw = log.path.read_bytes()
    log.path.write_bytes(b"#" + raw[1:])
    with pytest.raises(LoopxChatError):
        list(ControlLog(tmp_path).events())
    log.record("blocker_displayed", goal_id="g", blocker_ref="gate-2", surface="page")
    assert log.reported()["blockers"] == {"gate-1", "gate-2"}

    # A trailing partial line waits until it is complete.
    with log.path.open("ab") as handle:
        handle.write(b'{"schema_version":"loopx_chat_control_event_v1","kind":"blocker_disp')
    assert log.reported()["blockers"] == {"gate-1", "gate-2"}
    with log.path.open("ab") as handle:
        handle.write(b'layed","blocker_ref":"gate-3","at":"2026-01-01T00:00:00Z"}\n')
    assert log.reported()["blockers"] == {"gate-1", "gate-2", "gate-3"}

    # Replaced by another file (a restore, a rotation): folded again from its start.
    replacement = tmp_path / "other.jsonl"
    replacement.write_bytes(
        b'{"schema_version":"loopx_chat_control_event_v1","kind":"blocker_displayed",'
        b'"blocker_ref":"gate-9","at":"2026-01-01T00:00:00Z"}\n'
    )
    os.replace(replacement, log.path)
    assert log.reported() == {"blockers": {"gate-9"}, "stale": set()}

    # A corrupt appended line is state_corrupt, and the file is left as it was.
    with log.path.open("ab") as handle:
        handle.write(b"garbage\n")
    before = log.path.read_bytes()
    with pytest.raises(LoopxChatError) as info:
        log.reported()
    assert info.value.error_code == "state_corrupt"
    assert log.path.read_bytes() == before


def test_status_still_answers_when_the_control_log_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    _cli(tmp_path, "gate", "request", "--goal", "g", "--question", "Proceed?")
    log = ControlLog(tmp_path / "state")
    log.path.write_bytes(b"garbage\n" + log.path.read_bytes())
    before = log.path.read_bytes()

    doc = _cli(tmp_path, "status")  # a blocking gate: status would record it as displayed
    assert doc["control_log_error"] == "state_corrupt"
    (goal,) = doc["attention_queue"]
    assert goal["goal_id"] == "g"
    assert goal["answers"]["agent_can_continue"].startswith("no: blocked by an open owner gate")
    assert log.path.read_bytes() == before  # nothing recorded on top of a log it cannot read

    result = CliRunner().invoke(
        main,
        ["--state-dir", str(tmp_path / "state"), "metrics", "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code != 0
    assert json.loads(result.stdout)["error_code"] == "state_corrupt"
    assert "Traceback" not in result.output

    # Repaired, status records the blocker as displayed once, and says the log is fine.
    log.path.write_bytes(before.split(b"\n", 1)[1])
    assert _cli(tmp_path, "status")["control_log_error"] is None
    assert _cli(tmp_path, "status")["control_log_error"] is None
    shown = [e for e in log.events() if e["kind"] == "blocker_displayed"]
    assert len(shown) == 1


def test_the_fold_is_shared_between_processes_through_a_private_cache(tmp_path: Path) -> None:
    first = ControlLog(tmp_path)
    first.record("blocker_displayed", goal_id="g", blocker_ref="gate-1", surface="status")
    first.record("stale_detected", goal_id="g", lag_turns=1, lag_seconds=5, position="g@1:t")
    assert first.reported() == {"blockers": {"gate-1"}, "stale": {"g@1:t"}}
    assert stat.S_IMODE(first.cache_path.stat().st_mode) == 0o600
    assert b"gate-1" in first.cache_path.read_bytes()

    # A new process continues from the cache: bytes it folded are not read again (damaged in
    # place here, which a whole read would report as state_corrupt).
    raw = first.path.read_bytes()
    first.path.write_bytes(b"#" + raw[1:])
    first.record("blocker_displayed", goal_id="g", blocker_ref="gate-2", surface="page")
    assert ControlLog(tmp_path).reported()["blockers"] == {"gate-1", "gate-2"}

    # A replaced log does not match the cache's identity: folded from its start.
    replacement = tmp_path / "events" / "new.jsonl"
    replacement.write_bytes(raw[raw.index(b"\n") + 1 :])  # only the stale event
    os.replace(replacement, first.path)
    assert ControlLog(tmp_path).reported() == {"blockers": set(), "stale": {"g@1:t"}}


@pytest.mark.parametrize(
    "cache",
    [b"{not json", b"[]", b'{"schema":"loopx_chat_control_reported_v1","identity":"x"}'],
)
def test_an_unusable_fold_cache_is_ignored_and_replaced(tmp_path: Path, cache: bytes) -> None:
    log = ControlLog(tmp_path)
    log.record("blocker_displayed", goal_id="g", blocker_ref="gate-1", surface="status")
    log.cache_path.write_bytes(cache)
    assert ControlLog(tmp_path).reported()["blockers"] == {"gate-1"}
    assert json.loads(log.cache_path.read_bytes())["blockers"] == ["gate-1"]


def test_a_fold_cache_of_another_schema_is_left_alone(tmp_path: Path) -> None:
    log = ControlLog(tmp_path)
    log.record("blocker_displayed", goal_id="g", blocker_ref="gate-1", surface="status")
    future = json.dumps({"schema": "loopx_chat_control_reported_v9", "keys": []}).encode()
    log.cache_path.write_bytes(future)
    assert ControlLog(tmp_path).reported()["blockers"] == {"gate-1"}
    assert log.cache_path.read_bytes() == future


def test_a_goal_folder_no_writer_accepts_breaks_no_listing(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    _cli(tmp_path, "gate", "request", "--goal", "g", "--question", "Proceed?")
    (tmp_path / "state" / "goals" / "bad goal").mkdir()  # left by an older version
    assert [g["goal_id"] for g in _cli(tmp_path, "gate", "list")["gates"]] == ["g"]
    assert _cli(tmp_path, "metrics")["ok"] is True
    assert [g["goal_id"] for g in _cli(tmp_path, "status")["attention_queue"]] == ["g"]
    assert _cli(tmp_path, "quota")["ok"] is True

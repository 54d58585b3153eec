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
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.metrics import compute_metrics
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.session_store import SessionStore
from tests.helpers.fakes import FakeCodex


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


def _lose_gate(state: Path, goal: str, gate_id: str) -> None:
    """A gate record lost to a hand edit or a bad restore: the log still knows it was open."""
    path = state / "goals" / goal / "gates.jsonl"
    kept = [line for line in path.read_text().splitlines(keepends=True) if gate_id not in line]
    path.write_text("".join(kept))


def test_scripted_scenario_every_metric_can_fall(tmp_path: Path, fake_codex: FakeCodex) -> None:
    """One goal's life through the real controller (fake codex) and CLI, in which each
    ratio metric misses something it should: none of them is 100 % by construction."""
    state = tmp_path / "state"
    c1 = _controller(tmp_path, fake_codex)
    s1 = c1.open_session("gm", tmp_path)
    assert c1.submit_turn(s1.session_id, "CANARY-one", client_turn_id="c1").turn.status == (
        "completed"
    )
    assert c1.submit_turn(s1.session_id, "CANARY-one", client_turn_id="c1").created is False
    with _controller(tmp_path, fake_codex, "hang_turn") as c2:
        with pytest.raises(CodexError):  # c1 holds the thread: different work refused
            c2.submit_turn(s1.session_id, "two")
        c1.close()
        interrupted = c2.submit_turn(s1.session_id, "two")
    assert (interrupted.turn.status, interrupted.turn.error_code) == ("interrupted", "idle_timeout")
    with _controller(tmp_path, fake_codex) as c3:
        assert c3.submit_turn(s1.session_id, "three").turn.status == "completed"  # recovery
    # The timeout was recovered before anyone looked: the owner never saw it (a miss).
    _cli(tmp_path, "status", "--viewer", "owner")

    g1 = _cli(tmp_path, "gate", "request", "--goal", "gm", "--question", "CANARY-gate?")["gate"]
    _cli(tmp_path, "status")  # a script's --json read: not the owner
    with _controller(tmp_path, fake_codex) as c4:
        c4.open_session("gm", tmp_path)  # a new session: g1 open and on its first screen
    _cli(tmp_path, "status", "--viewer", "owner")  # the owner sees g1
    g2 = _cli(tmp_path, "gate", "request", "--goal", "gm", "--question", "second?")["gate"]
    _lose_gate(state, "gm", g2["gate_id"])
    with _controller(tmp_path, fake_codex) as c5:
        s3 = c5.open_session("gm", tmp_path)  # g1 preserved, g2 lost
    _cli(tmp_path, "gate", "resolve", g1["gate_id"], "--goal", "gm", "--decision", "approve")

    handoff = ["handoff", "record", "--goal", "gm", "--stop-condition", "done", "--next-action"]
    _cli(tmp_path, *handoff, "finish in the old session")
    with _controller(tmp_path, fake_codex) as c6:  # consumed by an older session: a miss
        assert c6.submit_turn(s3.session_id, "four").turn.status == "completed"
    _cli(tmp_path, *handoff, "finish in a new session")
    with _controller(tmp_path, fake_codex) as c7:
        s4 = c7.open_session("gm", tmp_path)
        assert c7.submit_turn(s4.session_id, "five").turn.status == "completed"
    with _controller(tmp_path, fake_codex, "hang_turn") as c8:  # never recovered
        assert c8.submit_turn(s4.session_id, "six").turn.error_code == "idle_timeout"

    doc = _cli(tmp_path, "metrics", "--goal", "gm")
    pick = lambda name: (doc[name]["numerator"], doc[name]["denominator"])  # noqa: E731
    assert pick("interrupted_task_recovery") == (1, 2)
    assert doc["interrupted_task_recovery"]["person_interrupts"] == 0
    # 1 replay of 1 + 6 turns that ran; the refusal of *different* work is not counted.
    assert pick("duplicate_compute_avoided") == (1, 7)
    assert doc["duplicate_compute_avoided"]["other_work_refusals"] == 1
    # g1 at sessions 2 and 3 (shown); g2, lost from the gate log, missing at sessions 3 and 4.
    assert pick("owner_gates_preserved") == (2, 4)
    assert pick("cross_session_handoff_success") == (1, 2)
    assert pick("time_to_owner_sees_blocker") == (1, 4)  # of 2 timeouts, g1, g2: only g1
    assert doc["time_to_owner_sees_blocker"]["max_seconds"] >= 0
    for name in (
        "interrupted_task_recovery",
        "duplicate_compute_avoided",
        "owner_gates_preserved",
        "cross_session_handoff_success",
        "time_to_owner_sees_blocker",
    ):
        assert doc[name]["ratio"] < 1, name
    handoffs = _cli(tmp_path, "handoff", "list", "--goal", "gm")["handoffs"]
    assert [h["state"] for h in handoffs] == ["consumed", "consumed"]
    assert handoffs[0]["consumed_in_session"] == s3.session_id
    assert handoffs[1]["consumed_in_session"] == s4.session_id
    # The log is compact: ids, codes and timestamps only.
    text = (state / "events" / "control.jsonl").read_text()
    assert "CANARY" not in text
    _cli(
        tmp_path, "goal", "set", "other-goal", "--objective", "another goal", "--acceptance", "done"
    )
    other = _cli(tmp_path, "metrics", "--goal", "other-goal")
    assert other["interrupted_task_recovery"]["denominator"] == 0


def _ev(kind: str, second: int, **fields: object) -> dict[str, object]:
    return {"kind": kind, "at": f"2026-01-01T00:00:{second:02d}Z", **fields}


def test_a_person_interrupt_is_reported_apart_and_a_failure_counts() -> None:
    events = [
        _ev("turn_finished", 1, goal_id="g", turn_id="t1", status="interrupted"),
        _ev("turn_finished", 2, goal_id="g", turn_id="t2", status="failed", code="turn_failed"),
        _ev("turn_finished", 3, goal_id="g", turn_id="t3", status="completed", started_at="x"),
    ]
    doc = compute_metrics(events, "g")
    assert (doc["interrupted_task_recovery"]["numerator"], doc["interrupted_task_recovery"][
        "denominator"]) == (1, 1)  # fmt: skip
    assert doc["interrupted_task_recovery"]["person_interrupts"] == 1


def test_recovery_must_address_the_pending_handoff() -> None:
    """A completed turn that started before the handoff did not address it."""
    events = [
        _ev("handoff_recorded", 1, goal_id="g", handoff_id="h1"),
        _ev("turn_finished", 3, goal_id="g", turn_id="t1", status="failed", code="turn_failed",
            started_at="2026-01-01T00:00:02Z"),
        _ev("turn_finished", 5, goal_id="g", turn_id="t2", status="completed",
            started_at="2026-01-01T00:00:00Z"),
    ]  # fmt: skip
    assert compute_metrics(events, "g")["interrupted_task_recovery"]["numerator"] == 0
    events.append(
        _ev("turn_finished", 9, goal_id="g", turn_id="t3", status="completed",
            started_at="2026-01-01T00:00:06Z")
    )  # fmt: skip
    assert compute_metrics(events, "g")["interrupted_task_recovery"]["numerator"] == 1


def test_a_gate_lost_before_a_new_session_is_not_counted_as_preserved() -> None:
    events = [
        _ev("gate_requested", 0, goal_id="g", gate_id="gate-1"),
        _ev("gate_requested", 1, goal_id="g", gate_id="gate-2"),
        # A process start is not a session: it is not a denominator.
        _ev("controller_started", 2, open_gate_ids=["gate-1", "gate-2"]),
        _ev("session_opened", 3, goal_id="g", session_id="s", open_gate_ids=["gate-1"],
            shown_gate_ids=["gate-1"]),
    ]  # fmt: skip
    doc = compute_metrics(events, "g")["owner_gates_preserved"]
    assert (doc["numerator"], doc["denominator"]) == (1, 2)


def test_corrupt_control_log_is_reported(tmp_path: Path) -> None:
    log = ControlLog(tmp_path)
    log.record("handoff_recorded", goal_id="g", handoff_id="h")
    log.path.write_bytes(b"garbage\n" + log.path.read_bytes())
    with pytest.raises(LoopxChatError) as info:
        list(log.events())
    assert info.value.error_code == "state_corrupt"
    with pytest.raises(ValueError):
        log.record("handoff_recorded", goal_id="g", text="never")  # the vocabulary is closed
    assert GateStore(tmp_path).control.path == log.path


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

    doc = _cli(tmp_path, "status", "--viewer", "owner")  # would record the gate as displayed
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
    assert _cli(tmp_path, "status", "--viewer", "owner")["control_log_error"] is None
    assert _cli(tmp_path, "status", "--viewer", "owner")["control_log_error"] is None
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


def test_the_metrics_are_named_rules_in_one_table() -> None:
    from loopx_chat.goals.metrics import METRICS, EventLog

    assert list(METRICS) == [
        "interrupted_task_recovery",
        "duplicate_compute_avoided",
        "owner_gates_preserved",
        "cross_session_handoff_success",
        "stale_projection_detection",
        "time_to_owner_sees_blocker",
        # the sixth metric, split by where its clock stops (issue 29)
        "time_to_notice",
        "time_to_decision",
    ]
    assert all(rule.__name__ == name for name, rule in METRICS.items())
    empty = EventLog.of([], None)
    assert compute_metrics([], None) == {
        "goal_id": None,
        **{n: r(empty) for n, r in METRICS.items()},
    }

"""controller/chat_controller.py on the scripted host: the paths between a session and its host.

Each host is an in-process replay of recorded codex transcripts
(tests/helpers/fakes/scripted_host.py); its faults are recorded refusals, unanswered requests
and closed streams. The state files are the oracle: what the controller recorded, released
and let go.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.controller.thread_lock import ThreadWriterLock
from loopx_chat.errors import CodexError, LoopxChatError
from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.fakes import Scripted
from tests.helpers.fakes.replay import NO_ROLLOUT, Answer, recorded_reply
from tests.helpers.fakes.scripted_host import CloseAt, Script
from tests.helpers.waiting import run_in_thread, wait_for

QUICK = ControllerConfig(timeouts=Timeouts(startup=5, request=5, idle=30, hard=60, close_grace=1))
HANG = Script(answers={"turn/start": Answer("steer", "turn/start")})  # active until interrupted


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "bound"
    path.mkdir()
    return path.resolve()


def _controller(
    tmp_path: Path, home: Path, scripted: Scripted, script: Script | None = None
) -> ChatController:
    return scripted.controller(tmp_path, home, script, QUICK)


def _events(tmp_path: Path, kind: str) -> list[dict[str, object]]:
    log = tmp_path / "state" / "events" / "control.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [r for r in rows if r.get("event") == kind or r.get("kind") == kind]


def _lock_free(tmp_path: Path, home: Path, thread_id: str) -> bool:
    return not ThreadWriterLock(tmp_path / "state", home, thread_id).held_elsewhere()


def _running(
    c: ChatController, scripted: Scripted, session_id: str, text: str
) -> tuple[threading.Thread, dict[str, object]]:
    """A turn on a hanging host, run on a thread, once codex was sent it and the controller
    recorded it as running (it writes that record while codex answers `turn/start`)."""
    thread, box = run_in_thread(lambda: c.submit_turn(session_id, text))

    def sent() -> bool:
        return c.store.load(session_id).active_turn_id is not None and any(
            m["params"]["input"][0]["text"] == text for m in scripted.codex.requests("turn/start")
        )

    wait_for(sent)
    return thread, box


def test_opening_records_the_bound_home_and_keeps_the_thread_warm(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
        (host,) = scripted.codex.hosts
        assert c.warm_pids() == {record.session_id: host.pid}
        assert host.launched.codex_home == home and host.launched.work_dir == tmp_path.resolve()
    assert (record.codex_home, record.work_dir) == (str(home), str(tmp_path.resolve()))
    assert record.upstream_thread_id and host.closed_by_client  # closed with the controller
    assert _lock_free(tmp_path, home, record.upstream_thread_id)
    assert list((tmp_path / "state" / "registry" / "app-servers").glob("*.json")) == []


@pytest.mark.parametrize(
    ("mode", "work"), [("sideways", "."), ("new", "missing-folder")], ids=["mode", "work_dir"]
)
def test_a_bad_open_request_is_a_usage_error_that_starts_nothing(
    tmp_path: Path, home: Path, scripted: Scripted, mode: str, work: str
) -> None:
    with _controller(tmp_path, home, scripted) as c, pytest.raises(LoopxChatError) as bad:
        c.open_session("g", tmp_path / work, mode=mode)
    assert bad.value.error_code == "usage_error"
    assert scripted.codex.hosts == []


def test_a_session_record_that_cannot_be_written_closes_its_host_and_frees_its_thread(
    tmp_path: Path, home: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: SessionStore, record: SessionRecord) -> SessionRecord:
        raise OSError("disk full")

    monkeypatch.setattr(SessionStore, "create", refuse)
    with _controller(tmp_path, home, scripted) as c, pytest.raises(OSError):
        c.open_session("g", tmp_path)
    (host,) = scripted.codex.hosts
    assert host.closed_by_client
    (thread_id,) = scripted.codex.thread_ids()
    assert _lock_free(tmp_path, home, thread_id)
    assert SessionStore(tmp_path / "state").list().sessions == ()


def test_history_of_a_held_thread_is_read_through_its_own_host(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
        turns = c.history(record.session_id)
        assert len(scripted.codex.hosts) == 1  # no reader was started
    (read,) = scripted.codex.requests("thread/read")
    assert read["params"] == {"threadId": record.upstream_thread_id, "includeTurns": True}
    assert turns[-1]["messages"][-1] == {"role": "agent", "text": recorded_reply("resume")}


def test_history_of_a_thread_nobody_holds_is_read_by_a_reader_that_loads_nothing(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
    with _controller(tmp_path, home, scripted) as c:
        turns = c.history(record.session_id)
        reader = scripted.codex.hosts[-1]
        assert reader.closed_by_client and c.warm_pids() == {}
    assert [m["method"] for m in reader.received] == ["initialize", "initialized", "thread/read"]
    assert turns[-1]["status"] == "completed"  # not the owner's in-flight turn: left as it is
    assert list((tmp_path / "state" / "registry" / "app-servers").glob("*.json")) == []


def test_thread_metadata_calls_go_through_a_reader_and_name_the_thread(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
    with _controller(tmp_path, home, scripted) as c:
        with c.thread_metadata(record.session_id) as call, pytest.raises(CodexError) as refused:
            call("no/such/method", {"x": 1})
        reader = scripted.codex.hosts[-1]
    assert refused.value.error_code == "app_server_rejected"
    (sent,) = scripted.codex.requests("no/such/method")
    assert sent["params"] == {"threadId": record.upstream_thread_id, "x": 1}
    assert reader.closed_by_client
    assert scripted.codex.requests("thread/resume") == []  # nothing was loaded


def test_sessions_without_a_managed_thread_have_no_metadata_and_no_history(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    store = SessionStore(tmp_path / "state")
    now = store.now()
    for sid, mode in (("a" * 32, "attached_host"), ("b" * 32, "managed_runtime")):
        store.create(
            SessionRecord(
                session_id=sid,
                goal_id="g",
                created_at=now,
                updated_at=now,
                session_mode=mode,
                upstream_thread_id="01a22654-8805-7283-882f-6664d5224a44"
                if mode == "attached_host"
                else None,
            )
        )
    with _controller(tmp_path, home, scripted) as c:
        for sid in ("a" * 32, "b" * 32):
            assert c.history(sid) == []
            with pytest.raises(CodexError) as none:
                with c.thread_metadata(sid):
                    pass
            assert none.value.error_code == "app_server_rejected"
        with pytest.raises(CodexError) as nothing:
            c.resume_session("b" * 32)
        assert nothing.value.error_code == "resume_failed"
    assert scripted.codex.hosts == []


def test_a_held_host_that_ends_during_a_history_read_is_replaced_by_the_next_turn(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted, Script(close_at=CloseAt("thread/read"))) as c:
        record = c.open_session("g", tmp_path)
        with pytest.raises(CodexError) as gone:
            c.history(record.session_id)
        assert gone.value.error_code == "app_server_exited"
        assert str(tmp_path / "state") in gone.value.message  # where its stderr log is
        scripted.codex.script = Script()
        again = c.submit_turn(record.session_id, "hi")
        assert c.warm_pids() == {record.session_id: scripted.codex.hosts[1].pid}
    assert again.turn.status == "completed"
    assert scripted.codex.hosts[0].closed_by_client  # the dead one was let go, not kept
    (resumed,) = scripted.codex.requests("thread/resume")
    assert resumed["params"]["threadId"] == record.upstream_thread_id


def test_a_host_that_ends_before_answering_turn_start_fails_the_turn_and_is_let_go(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted, Script(close_at=CloseAt("turn/start"))) as c:
        record = c.open_session("g", tmp_path)
        with pytest.raises(CodexError) as gone:
            c.submit_turn(record.session_id, "hi")
        assert gone.value.error_code == "app_server_exited"
        assert c.warm_pids() == {}
        (turn,) = c.store.list_turns(record.session_id)
        assert (turn.status, turn.error_code) == ("failed", "app_server_exited")
        # The next turn resumes the same thread on a healthy host.
        scripted.codex.script = Script()
        again = c.submit_turn(record.session_id, "again")
    assert again.turn.status == "completed"
    (resumed,) = scripted.codex.requests("thread/resume")
    assert resumed["params"]["threadId"] == record.upstream_thread_id


def test_a_host_that_ends_mid_turn_leaves_an_interrupted_turn_and_a_ready_session(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    mid_turn = Script(close_at=CloseAt("turn/start", "item/agentMessage/delta"))
    with _controller(tmp_path, home, scripted, mid_turn) as c:
        record = c.open_session("g", tmp_path)
        started: list[str] = []
        result = c.submit_turn(
            record.session_id, "hi", on_started=lambda t: started.append(t.upstream_turn_id or "")
        )
        assert c.warm_pids() == {}
    assert (result.turn.status, result.turn.error_code) == ("interrupted", "app_server_exited")
    assert started == [result.turn.upstream_turn_id] and started[0]
    assert (result.session.status, result.session.active_turn_id) == ("ready", None)


def test_a_resume_codex_cannot_do_marks_the_session_and_a_later_one_clears_it(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
    lost = Script(answers={"thread/resume": NO_ROLLOUT})  # "no rollout found for thread id"
    with _controller(tmp_path, home, scripted, lost) as c, pytest.raises(CodexError) as failed:
        c.resume_session(record.session_id)
    assert failed.value.error_code == "resume_failed"
    store = SessionStore(tmp_path / "state")
    session = store.load(record.session_id)
    assert (session.status, session.last_error_code) == ("resume_failed", "resume_failed")
    assert _lock_free(tmp_path, home, str(record.upstream_thread_id))
    with _controller(tmp_path, home, scripted) as c:
        resumed = c.resume_session(record.session_id)
    assert (resumed.status, resumed.last_error_code) == ("ready", None)


def test_another_failed_resume_is_kept_as_the_sessions_last_error(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
    config_invalid = Script(
        answers={
            "initialize": Answer("config_invalid", "initialize"),
            "thread/resume": Answer("config_invalid", "thread/start"),
        }
    )
    with _controller(tmp_path, home, scripted, config_invalid) as c:
        with pytest.raises(CodexError) as failed:
            c.submit_turn(record.session_id, "hi")
    assert failed.value.error_code == "codex_config_invalid"
    session = SessionStore(tmp_path / "state").load(record.session_id)
    assert (session.status, session.last_error_code) == ("ready", "codex_config_invalid")


def test_a_second_controller_is_refused_the_thread_and_the_same_message_counts_as_saved_work(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted, HANG) as first:
        record = first.open_session("g", tmp_path)
        thread, box = _running(first, scripted, record.session_id, "the same")
        with _controller(tmp_path, home, scripted) as second:
            for text in ("the same", "other"):
                with pytest.raises(CodexError) as busy:
                    second.submit_turn(record.session_id, text)
                assert busy.value.error_code == "thread_busy"
        first.interrupt_turn(record.session_id)
        thread.join(timeout=30)
    refused = _events(tmp_path, "thread_busy_refused")
    assert [(e["same_work"], e.get("same_by")) for e in refused] == [
        (True, "text_digest"),
        (False, None),
    ]
    outcome = box["result"]
    assert outcome.turn.status == "interrupted" and outcome.turn.error_code is None  # type: ignore[attr-defined]


def test_an_interrupt_from_another_controller_reaches_the_turn_through_the_marker(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted, HANG) as owner:
        record = owner.open_session("g", tmp_path)
        thread, box = _running(owner, scripted, record.session_id, "long")
        with _controller(tmp_path, home, scripted) as other:
            asked = other.interrupt_turn(record.session_id)
            assert other.warm_pids() == {}  # it loaded nothing to ask
        thread.join(timeout=30)
    assert asked.status == "running"
    result = box["result"]
    assert result.turn.status == "interrupted"  # type: ignore[attr-defined]
    (interrupt,) = scripted.codex.requests("turn/interrupt")
    assert interrupt["params"]["turnId"] == result.turn.upstream_turn_id  # type: ignore[attr-defined]
    marker = tmp_path / "state" / "sessions" / record.session_id / "interrupt.request"
    assert not marker.exists()


def test_interrupting_with_no_active_turn_or_no_live_owner(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
        with pytest.raises(CodexError) as idle:
            c.interrupt_turn(record.session_id)
        assert idle.value.error_code == "turn_not_active"
        orphan = c.turns.begin(c.turns.draft(record.session_id, None))
    # The controller is gone, its turn is still recorded as running: settled, nothing sent.
    with _controller(tmp_path, home, scripted) as c:
        settled = c.interrupt_turn(record.session_id)
    assert (settled.turn_id, settled.status) == (orphan.turn_id, "interrupted")
    assert scripted.codex.requests("turn/interrupt") == []


def test_a_retry_of_a_finished_turn_is_replayed_even_while_another_turn_runs(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with _controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
        done = c.submit_turn(record.session_id, "one", client_turn_id="turn-1")
        scripted.codex.hosts[0].script = HANG  # from the next turn on
        thread, _ = _running(c, scripted, record.session_id, "two")
        replayed = c.submit_turn(record.session_id, "one", client_turn_id="turn-1")
        c.interrupt_turn(record.session_id)
        thread.join(timeout=30)
    assert (replayed.created, replayed.turn.turn_id) == (False, done.turn.turn_id)
    assert len(scripted.codex.requests("turn/start")) == 2  # the replay sent nothing


def test_a_missing_default_home_is_created_and_a_missing_named_one_is_refused(
    tmp_path: Path, scripted: Scripted
) -> None:
    named = tmp_path / "nowhere"
    with _controller(tmp_path, named, scripted) as c, pytest.raises(CodexError) as missing:
        c.open_session("g", tmp_path)
    assert missing.value.error_code == "codex_home_missing"
    assert scripted.codex.hosts == [] and not named.exists()
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    c = ChatController(
        store=SessionStore(tmp_path / "state"),
        environ={"HOME": str(fake_home), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        codex_bin=str(scripted.bin),
        config=QUICK,
        connect=scripted.codex,
    )
    with c:
        assert c.binding.source == "default"
        c.open_session("g", tmp_path)
    assert (fake_home / ".codex").is_dir()
    assert scripted.codex.hosts[-1].launched.codex_home == (fake_home / ".codex").resolve()


def test_closing_the_controller_interrupts_a_running_turn_and_records_it_first(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    c = _controller(tmp_path, home, scripted, HANG)
    record = c.open_session("g", tmp_path)
    thread, box = _running(c, scripted, record.session_id, "long")
    c.close(grace=10)
    thread.join(timeout=30)
    result = box["result"]
    assert result.turn.status == "interrupted"  # type: ignore[attr-defined]
    (interrupt,) = scripted.codex.requests("turn/interrupt")
    assert interrupt["params"]["turnId"] == result.turn.upstream_turn_id  # type: ignore[attr-defined]
    assert scripted.codex.hosts[0].closed_by_client and c.warm_pids() == {}
    turns = SessionStore(tmp_path / "state").list_turns(record.session_id)
    assert [t.status for t in turns] == ["interrupted"]
    with pytest.raises(CodexError) as stopped:
        c.open_session("g", tmp_path)  # a thread loaded after shutdown is let go at once
    assert stopped.value.error_code == "controller_stopped"
    assert scripted.codex.hosts[-1].closed_by_client

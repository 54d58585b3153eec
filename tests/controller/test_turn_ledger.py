"""The turn ledger's rules, on a real store: what each step writes, which write is durable,
and how a session a dead controller left busy is repaired. No codex: the ledger never talks
to it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.controller.turn_ledger import TurnLedger
from loopx_chat.errors import LoopxChatError
from loopx_chat.state import private_files
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.session_records import SessionRecord, TokenCounts
from loopx_chat.state.session_store import SessionStore

SID = "s1"


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    store = SessionStore(tmp_path / "state")
    now = store.now()
    store.create(
        SessionRecord(
            session_id=SID,
            goal_id="g1",
            created_at=now,
            updated_at=now,
            upstream_thread_id="thread-1",
            codex_home=str(tmp_path / "home"),
        )
    )
    return store


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(private_files.os, "fsync", counting)
    return calls


def _ledger(store: SessionStore) -> TurnLedger:
    return TurnLedger(store, ControlLog(store.root))


def _events(store: SessionStore) -> list[dict[str, object]]:
    return list(ControlLog(store.root).events())


def test_begin_records_the_turn_running_and_the_session_busy_without_an_fsync(
    store: SessionStore, fsyncs: list[int]
) -> None:
    ledger = _ledger(store)
    turn = ledger.begin(ledger.draft(SID, "client-1", "d" * 64))
    assert store.load_turn(SID, turn.turn_id) == turn
    session = store.load(SID)
    assert (session.status, session.active_turn_id) == ("busy", turn.turn_id)
    assert fsyncs == []  # a SIGKILL keeps it; only a power cut may not (performance.md)


def test_finish_records_the_outcome_with_the_one_fsync_and_returns_the_session_written(
    store: SessionStore, fsyncs: list[int]
) -> None:
    ledger = _ledger(store)
    turn = ledger.begin(replace(ledger.draft(SID, None, "d" * 64), upstream_turn_id="up-1"))
    tokens = TokenCounts(input_tokens=3, output_tokens=4, total_tokens=7)
    result = ledger.finish(turn, TurnOutcome("", "failed", "turn_failed", tokens))
    assert len(fsyncs) == 1
    final = store.load_turn(SID, turn.turn_id)
    assert result.turn == final and result.created
    assert (final.status, final.error_code, final.tokens) == ("failed", "turn_failed", tokens)
    assert final.upstream_turn_id == "up-1"  # an outcome without an id keeps the turn's
    assert final.text_digest is None and final.completed_at is not None
    session = store.load(SID)
    assert result.session == session
    assert (session.status, session.active_turn_id, session.turn_count) == ("ready", None, 1)
    assert session.last_error_code == "turn_failed"
    assert session.last_activity_at == final.completed_at
    finished = [e for e in _events(store) if e["kind"] == "turn_finished"]
    assert len(finished) == 1
    assert finished[0]["turn_id"] == turn.turn_id
    assert (finished[0]["status"], finished[0]["code"]) == ("failed", "turn_failed")
    assert finished[0]["thread_id"] == "thread-1" and finished[0]["goal_id"] == "g1"


def test_begin_settles_a_turn_a_dead_controller_left_running(store: SessionStore) -> None:
    ledger = _ledger(store)
    orphan = ledger.begin(ledger.draft(SID, None))
    fresh = ledger.begin(ledger.draft(SID, None))
    left = store.load_turn(SID, orphan.turn_id)
    assert (left.status, left.error_code) == ("interrupted", "app_server_exited")
    session = store.load(SID)
    assert (session.status, session.active_turn_id, session.turn_count) == (
        "busy",
        fresh.turn_id,
        1,
    )


def test_a_turn_recorded_but_never_followed_is_settled_with_the_stoppers_code(
    store: SessionStore,
) -> None:
    # A goal run stopped (Ctrl-C) between the ledger recording a turn codex started and the
    # run following it: the run settles it with its own reason, not as a dead app-server.
    ledger = _ledger(store)
    turn = ledger.begin(ledger.draft(SID, None, origin="goal_loop", run_id="run-1"))
    ledger.settle_orphan(SID, "controller_stopped")
    left = store.load_turn(SID, turn.turn_id)
    assert (left.status, left.error_code) == ("interrupted", "controller_stopped")
    assert store.load(SID).status == "ready"


def test_a_busy_session_whose_turn_record_is_missing_is_set_ready(store: SessionStore) -> None:
    store.update(SID, status="busy", active_turn_id="gone")
    _ledger(store).settle_orphan(SID)
    session = store.load(SID)
    assert (session.status, session.active_turn_id, session.turn_count) == ("ready", None, 0)
    assert store.list_turns(SID) == []


def test_a_busy_session_whose_turn_is_final_is_set_ready_and_not_counted_again(
    store: SessionStore,
) -> None:
    ledger = _ledger(store)
    turn = ledger.begin(ledger.draft(SID, None))
    final = ledger.finish(turn, TurnOutcome("up", "completed", None, TokenCounts())).turn
    # A power cut kept the fsynced outcome and brought back the session that said busy.
    store.update(SID, status="busy", active_turn_id=turn.turn_id)
    ledger.settle_orphan(SID)
    session = store.load(SID)
    assert (session.status, session.active_turn_id, session.turn_count) == ("ready", None, 1)
    assert store.load_turn(SID, turn.turn_id) == final


def test_a_stop_before_begin_wrote_anything_records_nothing(store: SessionStore) -> None:
    ledger = _ledger(store)
    before = store.load(SID)
    ledger.stopped(ledger.draft(SID, None))
    assert store.list_turns(SID) == [] and store.load(SID) == before


def test_a_stop_after_begin_records_the_turn_interrupted_by_the_controller(
    store: SessionStore,
) -> None:
    ledger = _ledger(store)
    turn = ledger.begin(ledger.draft(SID, None))
    ledger.stopped(turn)
    left = store.load_turn(SID, turn.turn_id)
    assert (left.status, left.error_code) == ("interrupted", "controller_stopped")
    assert store.load(SID).status == "ready"


def test_an_outcome_the_full_disk_refused_is_parked_then_recorded_not_relabelled(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC injected at the one write seam (`atomic_write_chunks`) while the outcome is
    written: the outcome waits in the slot, the next turn's settle records it as Codex gave
    it (the e2e on a real full tmpfs is `tests/integration/test_full_disk.py`)."""
    import errno

    from loopx_chat.controller.turn_ledger import TurnNotRecorded
    from loopx_chat.state.session_records import TurnStatus

    ledger = _ledger(store)
    turn = ledger.begin(ledger.draft(SID, None))
    real = private_files.atomic_write_chunks

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(private_files, "atomic_write_chunks", full)
    outcome = TurnOutcome("up-1", TurnStatus.COMPLETED, None, TokenCounts(total_tokens=42))
    with pytest.raises(TurnNotRecorded) as raised:
        ledger.finish(turn, outcome)
    assert raised.value.error_code == "state_unwritable" and raised.value.kept
    assert store.load(SID).active_turn_id == turn.turn_id  # nothing could be written
    with pytest.raises(LoopxChatError):
        ledger.record_parked(SID)  # still full: kept for the next try
    monkeypatch.setattr(private_files, "atomic_write_chunks", real)
    ledger.begin(ledger.draft(SID, None))  # the next turn settles the session first
    recorded = store.load_turn(SID, turn.turn_id)
    assert recorded.status == TurnStatus.COMPLETED and recorded.tokens.total_tokens == 42
    assert store.load(SID).turn_count == 1
    assert ledger.record_parked(SID) is None  # the slot is blank again

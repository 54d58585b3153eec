"""Session and turn statuses are data: the enums hold only what the code writes, the
transition tables are enforced by the records' change methods, and disk keeps the strings."""

from __future__ import annotations

import json
import re
from itertools import product
from pathlib import Path

import pytest

from loopx_chat.errors import StateError
from loopx_chat.state.session_records import (
    SESSION_TRANSITIONS,
    TURN_TRANSITIONS,
    SessionRecord,
    SessionStatus,
    TurnRecord,
    TurnStatus,
)
from loopx_chat.state.session_store import SessionStore

PACKAGE = Path(__file__).resolve().parents[2] / "loopx_chat"


def _session(status: SessionStatus) -> SessionRecord:
    return SessionRecord("s1", "g1", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", status=status)


def _turn(status: TurnStatus) -> TurnRecord:
    return TurnRecord("t1", "s1", status, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")


def test_every_status_is_one_the_code_writes() -> None:
    """Each member is named by some module other than its definition (a write or a check)."""
    source = "\n".join(
        p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "session_records.py"
    )
    for enum in (SessionStatus, TurnStatus):
        used = set(re.findall(rf"\b{enum.__name__}\.([A-Z_]+)\b", source))
        assert used == set(enum.__members__), enum.__name__


def test_the_tables_cover_every_status() -> None:
    assert set(SESSION_TRANSITIONS) == set(SessionStatus)
    assert set(TURN_TRANSITIONS) == set(TurnStatus)


@pytest.mark.parametrize(("old", "new"), list(product(SessionStatus, SessionStatus)))
def test_a_session_changes_status_only_as_the_table_says(
    old: SessionStatus, new: SessionStatus
) -> None:
    if new == old or new in SESSION_TRANSITIONS[old]:
        assert _session(old).with_changes({"status": new}).status is new
    else:
        with pytest.raises(StateError) as info:
            _session(old).with_changes({"status": new})
        assert info.value.error_code == "illegal_status_transition"


@pytest.mark.parametrize(("old", "new"), list(product(TurnStatus, TurnStatus)))
def test_a_turn_changes_status_only_as_the_table_says(old: TurnStatus, new: TurnStatus) -> None:
    if new == old or new in TURN_TRANSITIONS[old]:
        assert _turn(old).with_changes(status=new).status is new
    else:
        with pytest.raises(StateError) as info:
            _turn(old).with_changes(status=new)
        assert info.value.error_code == "illegal_status_transition"


def test_a_finished_turn_cannot_run_again() -> None:
    with pytest.raises(StateError, match="from completed to running"):
        _turn(TurnStatus.COMPLETED).with_changes(status="running")


def test_disk_keeps_the_same_strings_and_refuses_a_status_no_code_writes(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.create(_session(SessionStatus.READY))
    store.update("s1", status=SessionStatus.BUSY)
    path = store.session_path("s1")
    assert json.loads(path.read_text())["status"] == "busy"
    assert store.load("s1").status is SessionStatus.BUSY
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "status": "stale"}))
    before = path.read_bytes()
    with pytest.raises(StateError) as info:
        store.load("s1")
    assert info.value.error_code == "state_corrupt"
    assert path.read_bytes() == before


def test_a_status_no_code_writes_is_refused_by_name() -> None:
    with pytest.raises(StateError) as info:
        _session(SessionStatus.READY).with_changes({"status": "stale"})
    assert info.value.error_code == "illegal_status_transition"
    assert "'stale'" in info.value.message

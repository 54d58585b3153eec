"""The session lock as another process sees it: held for exactly as long as the outermost
holder in this process holds it, whatever is nested inside."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import LOCK_FILE, SessionStore
from tests.helpers.older_lock import filelock_gets_it

SID = "s1"


def _taken_elsewhere(store: SessionStore) -> bool:
    return _taken_elsewhere_for(store, SID)


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    store = SessionStore(tmp_path / "state")
    now = store.now()
    store.create(SessionRecord(session_id=SID, goal_id="g", created_at=now, updated_at=now))
    return store


def test_another_process_cannot_take_it_while_it_is_held(store: SessionStore) -> None:
    with store.lock(SID):
        assert _taken_elsewhere(store)
    assert not _taken_elsewhere(store)


def test_a_nested_hold_neither_releases_it_early_nor_keeps_it_after(store: SessionStore) -> None:
    with store.lock(SID):
        with store.lock(SID):
            store.update(SID, status="busy")  # takes it again inside
        assert _taken_elsewhere(store)  # the outer hold still has it
    assert not _taken_elsewhere(store)
    with store.lock(SID):  # and a later hold takes it for real again
        assert _taken_elsewhere(store)


def test_the_first_lock_of_a_new_session_makes_its_folder_private(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    with store.lock("new-session"):
        pass
    folder = store.session_dir("new-session")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / LOCK_FILE).stat().st_mode) == 0o600


def test_nothing_per_session_stays_forever(tmp_path: Path) -> None:
    """Many sessions opened, turned and closed: the store's lock tables stay bounded, a
    session still in its lock keeps its entries, and a forgotten one locks as before."""
    import threading

    from loopx_chat.state.session_store import IDLE_LOCKS

    store = SessionStore(tmp_path)
    inside = threading.Event()
    leave = threading.Event()

    def hold() -> None:
        with store.lock("held"):
            inside.set()
            leave.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(60)
    for n in range(300):
        sid = f"s{n}"
        store.create(SessionRecord(session_id=sid, goal_id="g", created_at="t", updated_at="t"))
        store.update(sid, status="busy")
        with store.lock(sid), store.lock(sid):  # nested, as a ledger step nests a mutate
            store.update(sid, status="ready")
        assert len(store._locks) <= IDLE_LOCKS + 1, (n, len(store._locks))
    held = store._locks.get("held")
    assert held is not None and held.held is True
    assert _taken_elsewhere_for(store, "held")
    leave.set()
    holder.join(60)
    assert not _taken_elsewhere_for(store, "held")
    store.update("s0", status="busy")  # forgotten long ago: its lock is built again
    assert store.load("s0").status == "busy"
    assert not _taken_elsewhere_for(store, "s0")


def _taken_elsewhere_for(store: SessionStore, sid: str) -> bool:
    return not filelock_gets_it(store.session_dir(sid) / LOCK_FILE)

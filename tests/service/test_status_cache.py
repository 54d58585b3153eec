"""The service's status cache: a read after a write through the service sees that write, even
when a refresh that began before the write is still under way (it failed 1 run in ~15 of
`test_host_gates_service`: the page said "No goals yet" right after a goal was opened)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.status_index import StatusIndex
from loopx_chat.service.status_cache import StatusCache
from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore


class _HeldIndex(StatusIndex):
    """A real index whose refresh, once armed, looks at the disk and then waits to finish:
    a refresh that listed the goals before a write landed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.armed = False
        self.looked = threading.Event()
        self.finish = threading.Event()
        self.fail_next = False

    def refresh(self, only: str | None = None) -> int:
        generation = super().refresh(only)
        if self.fail_next:
            self.fail_next = False
            raise OSError("a torn read")
        if self.armed:
            self.armed = False
            self.looked.set()
            self.finish.wait()
        return generation


def _cache(tmp_path: Path) -> tuple[SessionStore, _HeldIndex, StatusCache]:
    store, goals = SessionStore(tmp_path), GateStore(tmp_path)
    index = _HeldIndex(store, goals, "home")
    # Windows far longer than any test: only a write makes a read look at the disk again.
    return store, index, StatusCache(index, lambda: None, sweep_sec=3600, host_refresh_sec=3600)


def _write(store: SessionStore, cache: StatusCache) -> None:
    store.create(SessionRecord(session_id="a", goal_id="g", created_at="t", updated_at="t"))
    cache.invalidate()


def _refresh_held(index: _HeldIndex, cache: StatusCache) -> threading.Thread:
    """Another reader (the notices' watch) refreshing: returns once it has looked at the disk
    and waits to finish."""
    index.armed = True
    background = threading.Thread(target=cache.get)
    background.start()
    assert index.looked.wait(60)
    return background


def test_a_read_after_a_write_waits_for_the_refresh_under_way(tmp_path: Path) -> None:
    store, index, cache = _cache(tmp_path)
    assert cache.get()[0]["goal_count"] == 0
    _write(store, cache)
    # Another reader takes the write's refresh; the owner's read arrives while it runs and
    # must not get the document from before the write.
    background = _refresh_held(index, cache)
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(cache.get()[0]["goal_count"]))
    reader.start()
    index.finish.set()
    reader.join(60)
    background.join(60)
    assert seen == [1]


def test_a_write_during_a_refresh_is_looked_at_again(tmp_path: Path) -> None:
    store, index, cache = _cache(tmp_path)
    assert cache.get()[0]["goal_count"] == 0
    cache.invalidate()
    background = _refresh_held(index, cache)
    _write(store, cache)  # after that refresh listed the goals
    index.finish.set()
    background.join(60)
    assert cache.get()[0]["goal_count"] == 1


def test_a_refresh_that_failed_leaves_the_write_to_be_looked_at_again(tmp_path: Path) -> None:
    store, index, cache = _cache(tmp_path)
    assert cache.get()[0]["goal_count"] == 0
    _write(store, cache)
    index.fail_next = True
    try:
        cache.get()
    except OSError:
        pass
    else:
        raise AssertionError("the failing refresh was not reached")
    assert cache.get()[0]["goal_count"] == 1

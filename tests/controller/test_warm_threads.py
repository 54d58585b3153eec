"""Idle deadlines of warm threads, checked by the one watcher thread.

The threads and locks here are stand-ins that record what happened to them: what is under
test is when `WarmThreads` lets a thread go, not codex (the real app-server's idle close is
covered in test_chat_agent.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, cast

from loopx_chat.controller.warm_threads import WarmThreads
from tests.helpers.waiting import wait_for


@dataclass
class _Proc:
    pid: int


@dataclass
class _Thread:
    pid: int
    closed: threading.Event = field(default_factory=threading.Event)

    @property
    def proc(self) -> _Proc:
        return _Proc(self.pid)

    @property
    def alive(self) -> bool:
        return not self.closed.is_set()

    def close(self) -> None:
        self.closed.set()


class _Lock:
    released = False

    def release(self) -> None:
        self.released = True


class _Registry:
    def __init__(self) -> None:
        self.unregistered: list[int] = []

    def unregister(self, pid: int) -> None:
        self.unregistered.append(pid)


def _warm(idle: float) -> tuple[WarmThreads, _Registry]:
    registry = _Registry()
    warm = WarmThreads(
        idle_close_sec=idle, registry=cast(Any, registry), quiesce_requested=lambda: False
    )
    return warm, registry


def test_an_idle_thread_is_let_go_after_its_deadline_and_a_busy_one_is_not() -> None:
    warm, registry = _warm(idle=0.2)
    idle, busy = _Thread(101), _Thread(102)
    idle_lock, busy_lock = _Lock(), _Lock()
    warm.add("idle", cast(Any, idle), cast(Any, idle_lock))
    entry = warm.add("busy", cast(Any, busy), cast(Any, busy_lock))
    warm.idle_soon("idle")
    entry.running_turn_id = "turn-1"  # in a turn: idle_soon leaves it alone
    warm.idle_soon("busy")
    assert entry.idle_deadline is None
    started = time.monotonic()
    assert idle.closed.wait(10)
    assert time.monotonic() - started >= 0.2  # not before its deadline
    assert idle_lock.released and registry.unregistered == [101]
    assert warm.get("idle") is None and warm.get("busy") is entry and busy.alive
    warm.close(grace=0)


def test_a_thread_in_use_is_never_closed_and_the_watcher_keeps_serving_others() -> None:
    warm, registry = _warm(idle=0.1)
    held, other = _Thread(201), _Thread(202)
    warm.add("held", cast(Any, held), cast(Any, _Lock()))
    warm.add("other", cast(Any, other), cast(Any, _Lock()))
    with warm.session_lock("held"):  # someone is using "held" past its deadline
        warm.idle_soon("held")
        warm.idle_soon("other")
        assert other.closed.wait(10)  # the watcher did not wait for the held session
        assert held.alive and warm.get("held") is not None
        warm.cancel_idle_close(warm.get("held"))  # type: ignore[arg-type]  # the user's work
    time.sleep(0.3)  # past the old deadline: cancelled, so still warm
    assert held.alive
    warm.idle_soon("held")  # the user is done: the deadline starts again
    wait_for(lambda: not held.alive)
    assert registry.unregistered == [202, 201]
    warm.close(grace=0)


def test_a_renewed_deadline_wins_over_the_old_one() -> None:
    warm, _ = _warm(idle=0.3)
    thread = _Thread(301)
    entry = warm.add("s", cast(Any, thread), cast(Any, _Lock()))
    warm.idle_soon("s")
    first = entry.idle_deadline
    time.sleep(0.2)
    warm.idle_soon("s")  # a turn ended: the thread has another full idle period
    assert entry.idle_deadline is not None and first is not None
    assert entry.idle_deadline > first
    assert not thread.closed.wait(0.15)  # the first deadline passed; it is still warm
    assert thread.closed.wait(10)
    warm.close(grace=0)

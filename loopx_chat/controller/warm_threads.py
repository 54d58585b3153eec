"""The threads a controller keeps loaded between turns, and when it lets them go.

Owns `Warm` (a loaded thread with its writer lock, running turn, interrupt flag, idle
deadline and the goal codex answered right after its resume, `ResumedGoal`), the per-session
in-process locks that serialize work on one session, closing a warm thread after
`idle_close_sec` without a turn, closing idle ones when an exclusive operation asks for the
home (both done by one watcher thread), the cap on how many may be loaded at once
(`max_warm`: a spawn beyond it first lets the least recently used idle thread go, and is
refused as `busy` when every one is in use), and closing everything on shutdown. Letting a
thread go closes its app-server, releases its writer lock, unregisters the process and tells
the owner (`on_let_go`), so nothing kept for the thread outlives it. The per-session locks
are kept while used and for the most recently used idle sessions only (`state/used_table`).

It never spawns anything (the controller does, through the codex adapter) and never writes
session state.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loopx_chat.codex.thread import CodexThread
from loopx_chat.controller.home_ownership import AppServerRegistry
from loopx_chat.controller.thread_lock import ThreadWriterLock
from loopx_chat.errors import CodexError, Remedy
from loopx_chat.state.session_store import IDLE_LOCKS
from loopx_chat.state.used_table import UsedTable

if TYPE_CHECKING:
    from loopx_chat.codex.goal_loop import HostGoalState

BUSY_REMEDY = Remedy(
    summary="Every Codex thread this service may keep loaded is running a turn.",
    next_action="Wait for a turn to finish (or interrupt one), then try again; "
    "`loopx-chat serve --max-warm N` allows more.",
)
QUIESCE_POLL_SEC = 0.25


@dataclass(frozen=True)
class ResumedGoal:
    """The thread goal codex answered right after a resume (`goal` None: the thread has
    none); its numbers and status, never its objective."""

    goal: HostGoalState | None


@dataclass
class Warm:
    """A thread this controller has loaded, and the writer lock that goes with it."""

    thread: CodexThread
    lock: ThreadWriterLock
    running_turn_id: str | None = None
    interrupt: threading.Event = field(default_factory=threading.Event)
    # When the thread is let go if no work comes (time.monotonic()); None while in use.
    idle_deadline: float | None = None
    # Steering reads and the turn loop changes `running_turn_id` under this lock, so a steer
    # never lands between the end of a turn and its bookkeeping unseen.
    steer_lock: threading.Lock = field(default_factory=threading.Lock)
    steered_client_ids: set[str] = field(default_factory=set)  # of the running turn
    last_used: float = field(default_factory=time.monotonic)  # for least-recently-used
    pinned: bool = False  # held by a goal run: never idle-closed, evicted or counted in the cap
    # Codex's answer to `thread/goal/get` right after the resume (`_notice_host_loop`), for a
    # goal run that resumed the thread itself to start from (None: not asked, or taken).
    resumed_goal: ResumedGoal | None = None


class WarmThreads:
    """The loaded threads of one controller, by session id."""

    def __init__(
        self,
        *,
        idle_close_sec: float,
        registry: AppServerRegistry,
        quiesce_requested: Callable[[], bool],
        max_warm: int | None = None,
        on_let_go: Callable[[CodexThread], None] | None = None,
    ) -> None:
        self._idle_close_sec = idle_close_sec
        # Told of each thread let go, so what its owner kept for it goes too.
        self._on_let_go = on_let_go
        self._max_warm = max_warm
        # Sessions between "may spawn" and `add`: counted against the cap, so concurrent
        # opens cannot all pass the check before any of them is loaded.
        self._reserved: set[str] = set()
        self._registry = registry
        self._quiesce_requested = quiesce_requested
        self._warm: dict[str, Warm] = {}
        # The per-session locks, dropped once a session has been idle among more than
        # IDLE_LOCKS others (the session store's rule, `used_table`).
        self._locks: UsedTable[threading.RLock] = UsedTable(threading.RLock, IDLE_LOCKS)
        self._guard = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._wake = threading.Event()
        self.closed = False

    @contextlib.contextmanager
    def session_lock(self, session_id: str) -> Iterator[None]:
        """Hold the session's in-process lock (re-entrant: one worker may nest it)."""
        with self._locks.using(session_id) as lock, lock:
            yield

    @contextlib.contextmanager
    def session_lock_if_free(self, session_id: str) -> Iterator[bool]:
        """Take the session's lock only if nobody holds it: True inside when taken."""
        with self._locks.using(session_id) as lock:
            taken = lock.acquire(blocking=False)
            try:
                yield taken
            finally:
                if taken:
                    lock.release()

    def get(self, session_id: str) -> Warm | None:
        return self._warm.get(session_id)

    def alive(self, session_id: str) -> Warm | None:
        """The session's warm thread if its process still runs (kept from closing while
        the caller uses it); a dead one is let go."""
        warm = self._warm.get(session_id)
        if warm is not None and warm.thread.alive:
            self.cancel_idle_close(warm)
            return warm
        if warm is not None:
            self.drop(session_id)
        return None

    def add(self, session_id: str, thread: CodexThread, lock: ThreadWriterLock) -> Warm:
        if self.closed:
            # A spawn that finished after shutdown began: let it go at once, never keep it.
            self.unreserve(session_id)
            try:
                thread.close()
            finally:
                lock.release()
                self._registry.unregister(thread.proc.pid)
            raise CodexError("loopx-chat is shutting down", error_code="controller_stopped")
        warm = Warm(thread=thread, lock=lock)
        with self._guard:
            self._reserved.discard(session_id)
            self._warm[session_id] = warm
        self._start_watcher()
        return warm

    # -- the cap ---------------------------------------------------------------------------

    def reserve(self, session_id: str) -> None:
        """Hold a place for `session_id`'s app-server before it is spawned: free when under
        the cap, else by letting the least recently used idle thread go; `busy` when every
        loaded thread is in use. `add` or `unreserve` ends the reservation."""
        if self._max_warm is None:
            return
        while True:
            with self._guard:
                if session_id in self._reserved or session_id in self._warm:
                    return
                # A thread a goal run holds is outside the cap: it stays loaded while codex
                # runs its loop, and must not make every chat session `busy`.
                counted = sum(1 for w in self._warm.values() if not w.pinned)
                if counted + len(self._reserved) < self._max_warm:
                    self._reserved.add(session_id)
                    return
                idle = sorted(
                    (w.last_used, sid)
                    for sid, w in self._warm.items()
                    if w.running_turn_id is None and w.idle_deadline is not None
                )
            if not any(self._let_go_if_idle(sid) for _, sid in idle):
                raise CodexError(
                    f"all {self._max_warm} Codex threads this service may keep loaded are "
                    "running turns; try again when one finishes",
                    error_code="busy",
                    remedy=BUSY_REMEDY,
                )

    def unreserve(self, session_id: str) -> None:
        with self._guard:
            self._reserved.discard(session_id)

    def _let_go_if_idle(self, session_id: str) -> bool:
        with self.session_lock_if_free(session_id) as taken:
            if not taken:
                return False  # someone is about to use it
            warm = self._warm.get(session_id)
            if warm is None or warm.running_turn_id is not None or warm.idle_deadline is None:
                return False
            self.drop(session_id)
            return True

    def idle_soon(self, session_id: str) -> None:
        """Start the idle timer of the session's thread, if it is loaded and not in a turn."""
        warm = self._warm.get(session_id)
        if warm is not None and warm.running_turn_id is None:
            self.schedule_idle_close(warm)

    def pids(self) -> dict[str, int]:
        return {sid: w.thread.proc.pid for sid, w in self._warm.items()}

    # -- letting go --------------------------------------------------------------------------

    def schedule_idle_close(self, warm: Warm) -> None:
        # A deadline the watcher checks, not a timer thread per turn: starting a thread
        # costs a few ms of every turn (it waits for the GIL), a float costs nothing.
        if self.closed:
            return
        warm.last_used = time.monotonic()
        warm.idle_deadline = warm.last_used + self._idle_close_sec
        self._start_watcher()
        self._wake.set()  # a deadline sooner than the watcher's next look

    @staticmethod
    def cancel_idle_close(warm: Warm) -> None:
        warm.last_used = time.monotonic()
        warm.idle_deadline = None

    def _close_if_idle(self, session_id: str, now: float) -> None:
        # Never wait for it: whoever holds the session is using the thread, and renews or
        # cancels its deadline when done; the watcher must stay free for the other sessions.
        with self.session_lock_if_free(session_id) as taken:
            if not taken:
                return
            warm = self._warm.get(session_id)
            if warm is None or warm.running_turn_id is not None:
                return
            # Looked at again under the lock: a turn may have taken or renewed it meanwhile.
            if warm.idle_deadline is not None and warm.idle_deadline <= now:
                self.drop(session_id)

    def drop(self, session_id: str) -> None:
        with self._guard:
            warm = self._warm.pop(session_id, None)
        if warm is None:
            return
        self.cancel_idle_close(warm)
        try:
            warm.thread.close()
        finally:
            warm.lock.release()
            self._registry.unregister(warm.thread.proc.pid)
            if self._on_let_go is not None:
                self._on_let_go(warm.thread)

    def close(self, grace: float) -> None:
        """Interrupt running turns, then close every app-server and release thread locks.

        Turns running on other threads (the service's workers) get `grace` seconds to be
        interrupted upstream and recorded as `interrupted` before their processes close.
        """
        self.closed = True
        self._wake.set()
        running = [w for w in self._warm.values() if w.running_turn_id is not None]
        for warm in running:
            warm.interrupt.set()
        deadline = time.monotonic() + grace
        while any(w.running_turn_id is not None for w in running) and time.monotonic() < deadline:
            time.sleep(0.05)
        for session_id in list(self._warm):
            with contextlib.suppress(Exception):
                self.drop(session_id)

    # -- the watcher: idle deadlines and quiesce requests ----------------------------------

    def _start_watcher(self) -> None:
        with self._guard:
            if self._watcher is not None:
                return
            self._watcher = threading.Thread(
                target=self._watch_quiesce, name="loopx-quiesce", daemon=True
            )
        self._watcher.start()

    def _watch_quiesce(self) -> None:
        """Close warm threads idle past their deadline, and every idle one when an exclusive
        operation asks for the home."""
        while not self.closed:
            self._wake.clear()
            if self._quiesce_requested():
                for session_id, warm in list(self._warm.items()):
                    if warm.running_turn_id is None:
                        with self.session_lock(session_id):
                            if warm.running_turn_id is None and self._warm.get(session_id) is warm:
                                self.drop(session_id)
            now = time.monotonic()
            wait = QUIESCE_POLL_SEC
            for session_id, warm in list(self._warm.items()):
                deadline = warm.idle_deadline
                if deadline is None:
                    continue
                if deadline <= now:
                    self._close_if_idle(session_id, now)
                else:
                    wait = min(wait, deadline - now)
            self._wake.wait(wait)

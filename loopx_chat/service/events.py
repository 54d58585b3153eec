"""Fan a session's turn progress out to Server-Sent-Events listeners.

Owns per-session subscriber queues and the last status per session, so a listener that
connects mid-turn first learns where the turn is. A watcher's queue is bounded: a listener
too slow to keep up loses deltas, never blocks the turn. The one unbounded queue is the
requester's own (a turn `POST` that streams), which must see every delta of its reply.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import OrderedDict
from typing import Any

QUEUE_LIMIT = 1000
LAST_STATUS_KEPT = 256


class EventHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, list[queue.Queue[dict[str, Any] | None]]] = {}
        # The latest status event of the most recently active sessions (a new listener's
        # first event); older sessions' are dropped, so nothing per session stays forever.
        self._last_status: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def subscribe(
        self, session_id: str, limit: int = QUEUE_LIMIT
    ) -> queue.Queue[dict[str, Any] | None]:
        """A listener's queue; `limit=0` is unbounded (the requester of a turn, who must get
        every delta of its own reply)."""
        q: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=limit)
        with self._lock:
            self._listeners.setdefault(session_id, []).append(q)
        return q

    def unsubscribe(self, session_id: str, q: queue.Queue[dict[str, Any] | None]) -> None:
        with self._lock:
            listeners = self._listeners.get(session_id, [])
            if q in listeners:
                listeners.remove(q)
            if not listeners:
                self._listeners.pop(session_id, None)

    def last_status(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._last_status.get(session_id)

    def publish(self, session_id: str, event: dict[str, Any]) -> None:
        with self._lock:
            if event.get("type") == "status":
                self._last_status[session_id] = event
                self._last_status.move_to_end(session_id)
                while len(self._last_status) > LAST_STATUS_KEPT:
                    self._last_status.popitem(last=False)
            listeners = list(self._listeners.get(session_id, []))
        for q in listeners:
            with contextlib.suppress(queue.Full):
                q.put_nowait(event)

    def end(self, session_id: str) -> None:
        """The turn is over: tell every listener to close its stream."""
        with self._lock:
            listeners = list(self._listeners.get(session_id, []))
        for q in listeners:
            with contextlib.suppress(queue.Full):
                q.put_nowait(None)

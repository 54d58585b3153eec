"""Serve the status document from memory, computed again only for what changed.

Owns the service's `StatusIndex` (each goal's row, folded again only when one of the goal's
files changed: see goals/status_index.py) and the document and bytes built from it. A request
with nothing changed is answered with the bytes in memory. The index is brought up to date
(a `stat` per file of each goal, no fold unless a signature moved) at once after a write
through this service (`invalidate`), and otherwise at most every `sweep_sec` for another
process's writes; the host's rollouts are scanned at most every `host_refresh_sec`. The
document is rebuilt only when an entry, the host's facts for the goals' threads, or the
archive's minute moved. One request refreshes at a time; while it does, requests after
no write get the previous document, and a request after a write waits for a refresh that
began after that write, so a client always reads its own writes.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from loopx_chat.goals.status import assemble_status
from loopx_chat.goals.status_index import StatusIndex

if TYPE_CHECKING:
    from loopx_chat.codex.rollouts import ThreadFacts

SWEEP_SEC = 0.5  # another process's write shows within this (plus the page's poll)
HOST_REFRESH_SEC = 2.0  # the host's rollouts are not stat-ed on every request
ARCHIVE_TICK_SEC = 60  # finished goals step aside with time alone: look once a minute


class StatusCache:
    def __init__(
        self,
        index: StatusIndex,
        scan_host: Callable[[], Mapping[str, ThreadFacts] | None],
        finish: Callable[[dict[str, Any]], dict[str, Any]] = lambda doc: doc,
        *,
        sweep_sec: float = SWEEP_SEC,
        host_refresh_sec: float = HOST_REFRESH_SEC,
    ) -> None:
        self.index = index
        self._scan_host = scan_host
        self._finish = finish
        self._sweep = sweep_sec
        self._host_refresh = host_refresh_sec
        self._lock = threading.Lock()
        # Writes are counted, not flagged: a flag cleared by a refresh already under way let
        # a read after a write take the document from before it (the refresh had listed the
        # goals before the write landed). A read is due until a refresh that *began* after the
        # last write has finished; `next` on a count is atomic, so no lock is taken to count.
        self._counter = itertools.count(1)
        self._writes = 0  # the number of the latest write through this service
        self._covered = -1  # the latest write a finished refresh began after
        self._swept_at = float("-inf")
        self._host_at = float("-inf")
        self._host: Mapping[str, ThreadFacts] | None = None
        self._host_view: dict[str, ThreadFacts] | None = None
        self._host_generation = 0
        self._key: tuple[int, int, int] | None = None
        self._doc: dict[str, Any] = {}
        self._body = b""

    def invalidate(self) -> None:
        """Look at the disk again on the next read (after a write through the service)."""
        self._writes = next(self._counter)

    def _due(self, now: float) -> bool:
        return (
            self._writes != self._covered
            or self._key is None
            or now - self._swept_at >= self._sweep
            or now - self._host_at >= self._host_refresh
        )

    def get(self) -> tuple[dict[str, Any], bytes]:
        if not self._due(time.monotonic()):
            return self._doc, self._body
        # Another request may be refreshing: wait for it, then look again if it began before
        # the latest write.
        self._lock.acquire()
        try:
            now = time.monotonic()
            writes = self._writes
            if writes != self._covered or self._key is None or now - self._swept_at >= self._sweep:
                self._swept_at = now
                self.index.refresh()
                # Only once it finished: a refresh that failed leaves the write uncovered.
                self._covered = writes
            if now - self._host_at >= self._host_refresh:
                self._host_at = now
                self._refresh_host()
            key = (
                self.index.generation,
                self._host_generation,
                int(time.time() // ARCHIVE_TICK_SEC),
            )
            if key != self._key:
                doc = assemble_status(
                    self.index.entries.values(),
                    self._host,
                    archive_now_ns=time.time_ns(),
                    include_archived=True,
                )
                doc["control_log_error"] = None
                # Sessions that cannot be read and that no event names with a goal.
                doc["unreadable_records"] = self.index.unreadable_records()
                self._doc = self._finish(doc)
                self._body = (json.dumps(self._doc, sort_keys=True) + "\n").encode()
                self._key = key
            return self._doc, self._body
        finally:
            self._lock.release()

    def _refresh_host(self) -> None:
        """Scan the host; the document moves only when a goal's thread's facts moved."""
        host = self._scan_host()
        if host is None:
            view = None
        else:
            view = {
                t: host[t]
                for e in self.index.entries.values()
                if e.stale is not None
                for t in e.stale[0]
                if t in host
            }
        if (host is None) != (self._host is None) or view != self._host_view:
            self._host_generation += 1
        self._host, self._host_view = host, view

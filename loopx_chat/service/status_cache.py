"""Serve the status document from memory until owner-local state changes.

Owns a fingerprint of everything the status is computed from (each `session.json`, each
session's `turns/` folder, each goal's `*.jsonl`: inode, size, mtime) and one cached answer
per fingerprint. Any write by any process (a rename changes the inode and the folder mtime;
an append changes the size) gives a new fingerprint, so the feed is at most 0.1 s behind; a
poll that finds nothing changed costs a few hundred `stat` calls instead of re-reading and
re-projecting every goal. The sweep itself is shared by requests within 0.1 s, and the host's
rollouts are re-read at most every 2 s. Recomputation is single-flight; while it runs for a
host refresh alone, other requests get the previous document.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Fingerprint = tuple[tuple[str, int, int, int], ...]


def _stat(path: str, out: list[tuple[str, int, int, int]]) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    out.append((path, st.st_ino, st.st_size, st.st_mtime_ns))


def state_fingerprint(root: Path) -> Fingerprint:
    out: list[tuple[str, int, int, int]] = []
    for top in ("sessions", "goals"):
        folder = str(root / top)
        _stat(folder, out)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if top == "sessions":
                _stat(os.path.join(entry.path, "session.json"), out)
                _stat(os.path.join(entry.path, "turns"), out)
            else:
                # Every record of a goal shows on the first screen (gates, handoffs, goal
                # state, rewards, proposals, quota, writeback results): all of its files.
                try:
                    files = [f.path for f in os.scandir(entry.path) if f.name.endswith(".jsonl")]
                except OSError:
                    continue
                for path in files:
                    _stat(path, out)
    out.sort()
    return tuple(out)


# The host's rollouts are not in the fingerprint (stat-ing thousands of them per request would
# cost more than the cache saves): host movement is picked up within this many seconds.
HOST_REFRESH_SEC = 2.0
FINGERPRINT_TTL_SEC = 0.1


class StatusCache:
    def __init__(
        self,
        root: Path,
        compute: Callable[[], dict[str, Any]],
        host_refresh_sec: float | None = HOST_REFRESH_SEC,
        fingerprint_ttl_sec: float = FINGERPRINT_TTL_SEC,
    ) -> None:
        self._host_refresh = host_refresh_sec
        self._fingerprint_ttl = fingerprint_ttl_sec
        self._fingerprint_at = float("-inf")
        self._fingerprint: Fingerprint = ()
        self._root = root
        self._compute = compute
        self._lock = threading.Lock()
        self._key: Fingerprint | None = None
        self._doc: dict[str, Any] = {}
        self._body = b""

    def invalidate(self) -> None:
        """Look at the disk again on the next read (after a write through the service)."""
        self._fingerprint_at = float("-inf")

    def _current_fingerprint(self) -> Fingerprint:
        # Under load, many requests arrive within a few milliseconds; one stat sweep serves
        # them all. A write is still seen within FINGERPRINT_TTL_SEC.
        now = time.monotonic()
        if now - self._fingerprint_at >= self._fingerprint_ttl:
            self._fingerprint = state_fingerprint(self._root)
            self._fingerprint_at = now
        return self._fingerprint

    def get(self) -> tuple[dict[str, Any], bytes]:
        state_key = self._current_fingerprint()
        key = state_key
        if self._host_refresh:
            key += (("host-window", int(time.monotonic() / self._host_refresh), 0, 0),)
        if not self._lock.acquire(blocking=False):
            # Another request is recomputing. If owner-local state is unchanged (only the host
            # refresh window moved), answer from the previous document instead of queueing;
            # a changed state waits, so a client always reads its own writes.
            if self._key is not None and self._key[: len(state_key)] == state_key:
                return self._doc, self._body
            self._lock.acquire()
        try:
            if key != self._key:
                doc = self._compute()
                # Fingerprint taken before computing: a write during the computation makes
                # the next request recompute rather than serve a document that missed it.
                self._key, self._doc = key, doc
                self._body = (json.dumps(doc, sort_keys=True) + "\n").encode()
            return self._doc, self._body
        finally:
            self._lock.release()

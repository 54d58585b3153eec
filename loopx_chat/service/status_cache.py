"""Serve the status document from memory until owner-local state changes.

Owns a fingerprint of everything the status is computed from (each `session.json`, each
session's `turns/` folder, each goal's `*.jsonl`: inode, size, mtime) and one cached answer
per fingerprint. Any write by any process (a rename changes the inode and the folder mtime;
an append changes the size) gives a new fingerprint, so the feed is never stale; a poll that
finds nothing changed costs a few hundred `stat` calls instead of re-reading and re-projecting
every goal. Recomputation is single-flight.
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
                _stat(os.path.join(entry.path, "gates.jsonl"), out)
                _stat(os.path.join(entry.path, "handoffs.jsonl"), out)
    out.sort()
    return tuple(out)


# The host's rollouts are not in the fingerprint (stat-ing thousands of them per request would
# cost more than the cache saves): host movement is picked up within this many seconds.
HOST_REFRESH_SEC = 2.0


class StatusCache:
    def __init__(
        self,
        root: Path,
        compute: Callable[[], dict[str, Any]],
        host_refresh_sec: float | None = HOST_REFRESH_SEC,
    ) -> None:
        self._host_refresh = host_refresh_sec
        self._root = root
        self._compute = compute
        self._lock = threading.Lock()
        self._key: Fingerprint | None = None
        self._doc: dict[str, Any] = {}
        self._body = b""

    def get(self) -> tuple[dict[str, Any], bytes]:
        key = state_fingerprint(self._root)
        if self._host_refresh:
            key += (("host-window", int(time.monotonic() / self._host_refresh), 0, 0),)
        with self._lock:
            if key != self._key:
                doc = self._compute()
                # Fingerprint taken before computing: a write during the computation makes
                # the next request recompute rather than serve a document that missed it.
                self._key, self._doc = key, doc
                self._body = (json.dumps(doc, sort_keys=True) + "\n").encode()
            return self._doc, self._body

"""The service's log: one bounded line per event on stderr, rate-limited, size-capped.

Owns the line format (`loopx-chat serve: ...`, cut to `LINE_LIMIT` characters), the rate
limit on lines anyone can cause (`log_refusal`: unauthenticated requests, failed or late
connections; a token bucket, with one line saying how many were dropped), and rotation:
when stderr is a regular file (launchd's `StandardErrorPath`, a shell's `2>>file`) and it
grows past `LOG_CAP_BYTES`, it is renamed to `<name>.1` (the one before is dropped) and a
new 0600 file takes its place on fd 2.

It never writes a body, a query, a token or the path of a request nobody authenticated.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
import time

LINE_LIMIT = 400
LOG_CAP_BYTES = 8 << 20
# Lines anyone can cause: at most this many a second on average, in bursts of BURST.
REFUSALS_PER_SEC = 5.0
BURST = 50
_F_GETPATH = 50  # macOS fcntl: the path of an open file

_lock = threading.Lock()
_tokens = float(BURST)
_last = time.monotonic()
_dropped = 0
_cap = LOG_CAP_BYTES


def set_cap(cap_bytes: int) -> None:
    global _cap
    _cap = max(cap_bytes, 4096)


def _stderr_path() -> str | None:
    """The file fd 2 writes to, when it is a regular file we can name."""
    try:
        if not stat.S_ISREG(os.fstat(2).st_mode):
            return None
        if sys.platform.startswith("linux"):
            path = os.readlink("/proc/self/fd/2")
        else:
            import fcntl

            raw = fcntl.fcntl(2, _F_GETPATH, b"\0" * 1024)
            path = raw.split(b"\0", 1)[0].decode()
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return path if path.startswith("/") and not path.endswith(" (deleted)") else None


def _rotate_if_full() -> None:
    try:
        size = os.fstat(2).st_size
    except OSError:
        return
    if size < _cap:
        return
    path = _stderr_path()
    if path is None:
        return
    with contextlib.suppress(OSError):
        os.replace(path, path + ".1")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        sys.stderr.flush()
        os.dup2(fd, 2)
        os.close(fd)


def _write(message: str) -> None:
    line = f"loopx-chat serve: {message}"
    if len(line) > LINE_LIMIT:
        line = line[: LINE_LIMIT - 1] + "…"
    print(line, file=sys.stderr, flush=True)
    _rotate_if_full()


def log(message: str) -> None:
    """A line about the owner's own requests or the service's life."""
    with _lock:
        _write(message)


def log_refusal(message: str) -> None:
    """A line anyone on the machine can cause: dropped past the rate limit, and counted."""
    global _tokens, _last, _dropped
    with _lock:
        now = time.monotonic()
        _tokens = min(float(BURST), _tokens + (now - _last) * REFUSALS_PER_SEC)
        _last = now
        if _tokens < 1.0:
            _dropped += 1
            return
        _tokens -= 1.0
        if _dropped:
            _write(f"{_dropped} similar line(s) dropped (rate limit)")
            _dropped = 0
        _write(message)

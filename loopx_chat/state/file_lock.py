"""One lock file held with flock(2): the writers' exclusion across processes.

Owns opening a lock file the way every private file is opened (`open_private_append`: never
through a symlink, a regular file of this user, 0600) and taking or giving up `flock` on it:
waiting, trying once, or trying until a deadline. An instance counts its holds, so whoever
holds it may take it again (and the thread that lets it go need not be the one that took it).

It never unlinks a lock file: a process waiting on the old inode would then hold a lock that
no one else sees. Its locks are the same `flock` locks filelock takes on the same files, so a
process of an older release and this one still exclude each other.

Why not filelock: importing filelock 4 loads about 40 modules (logging, inspect, secrets,
decimal among them) before the first write of every command, and one acquire and release
cost about 240 µs of CPU against 9 µs for the calls themselves (docs/performance.md).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from pathlib import Path
from types import TracebackType

from loopx_chat.state.private_files import open_private_append

POLL_SEC = 0.05  # between tries while waiting with a deadline (filelock's default)
_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})


class LockTimeout(TimeoutError):
    """The lock was held by someone else for the whole wait."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is locked")
        self.path = path


class FileLock:
    def __init__(self, path: Path | str) -> None:
        # Kept as text: a Path's parts are interned strings, and a session's lock outlives
        # the call (its id would stay in the interpreter's interned-string table).
        self.path = os.fspath(path)
        self._fd: int | None = None
        self._holds = 0
        self._guard = threading.Lock()

    @property
    def is_locked(self) -> bool:
        return self._holds > 0

    def acquire(self, timeout: float | None = None) -> None:
        """Hold the lock: wait for it (`None`), try once (`0`), or try until `timeout` s pass
        (`LockTimeout`). An OSError opening the file is the caller's to map."""
        with self._guard:
            if self._holds:
                self._holds += 1
                return
            fd = open_private_append(self.path, readable=True)
            try:
                _flock(fd, self.path, timeout)
            except BaseException:
                os.close(fd)
                raise
            self._fd, self._holds = fd, 1

    def release(self, force: bool = False) -> None:
        """Give up one hold (every hold with `force`); the last one unlocks the file."""
        with self._guard:
            if not self._holds:
                return
            self._holds = 0 if force else self._holds - 1
            if self._holds or self._fd is None:
                return
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)  # closing alone would unlock too; the unlock says so first

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _flock(fd: int, path: str, timeout: float | None) -> None:
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the kernel wakes us when it is free: no polling
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in _BUSY:
                raise
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockTimeout(path)
        time.sleep(min(POLL_SEC, left))

"""Atomic, permission-explicit file writes shared by the state store and the plist writer.

Owns: same-folder temp file, fsync, chmod, `os.replace`. It never
follows a symlink at the destination and never writes in place, so a reader (or a crash)
sees either the old bytes or the new bytes, nothing in between. The folder is not fsynced:
after a power loss the rename may be lost, which still leaves the old bytes, and skipping it
halves the cost of every state write on the turn path.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from loopx_chat.errors import StateError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


@contextlib.contextmanager
def state_write(path: Path) -> Iterator[None]:
    """Owner-local state writes: a failure is `state_unwritable` naming the path, never a
    bare OSError (the CLI then prints one line, not a traceback)."""
    try:
        yield
    except OSError as exc:
        raise StateError(
            f"cannot write {path}: {exc.strerror or exc}", error_code="state_unwritable"
        ) from None


def ensure_private_dir(path: Path) -> None:
    """Create `path` (and parents we create) as 0700; tighten it if it already exists."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask; state must be owner-only whatever the umask.
    if (path.stat().st_mode & 0o777) != PRIVATE_DIR_MODE:
        os.chmod(path, PRIVATE_DIR_MODE)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int, durable: bool = True) -> None:
    """Replace `path` with `data` atomically; the file ends with exactly `mode`.

    `durable=False` skips the fsync, for caches whose loss after a power cut costs only
    recomputation (the rename still makes a reader see old or new bytes, never a mix).
    """
    atomic_write_chunks(path, (data,), mode=mode, durable=durable)


def atomic_write_chunks(
    path: Path, chunks: Iterable[bytes], *, mode: int, durable: bool = True
) -> None:
    """`atomic_write_bytes` for a document produced piece by piece, never whole in memory."""
    if path.is_symlink():
        raise IsADirectoryError(f"refusing to write through a symlink: {path}")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise

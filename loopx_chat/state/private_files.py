"""Owner-local file primitives: private folders, atomic writes, OS errors as state errors.

Owns: creating state folders 0700 (whatever the umask) without following a symlink inside
the state dir, same-folder temp file + fsync + chmod + `os.replace` writes, opening a file
for appending without following a symlink, and turning an `OSError` into the documented
`state_unwritable` / `state_unreadable` / `state_unsafe` code with the path and errno name.
It never follows a symlink at a destination and never writes in place, so a reader (or a
crash) sees either the old bytes or the new bytes. The folder is not fsynced: after a power
loss the rename may be lost, which still leaves the old bytes, and skipping it halves the
cost of every state write on the turn path. A looser mode it finds is tightened once and
said (`notice`), never silently. Every folder it would use or tighten, and every file it
opens, must belong to the user running loopx-chat: one of another user (a state dir someone
pre-created 0777, a `gates.jsonl` they planted) is `foreign_owner`, and nothing in it is read,
written or tightened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from loopx_chat.errors import StateError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO}


def notice(message: str) -> None:
    """A note for the owner (a repaired torn line, a tightened mode), as `note: ...` on
    stderr: the terminal for the CLI, the log for the service (launchd sends its stderr
    there). Written directly rather than through `logging`, whose import every command would
    pay (issue 18); a stderr that cannot take it never fails the write it is about."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"note: {message}\n")
        sys.stderr.flush()


def state_os_error(exc: OSError, path: Path | str, *, writing: bool) -> StateError:
    """The documented code for an OS error on owner-local state, naming path and errno."""
    name = errno.errorcode.get(exc.errno or 0, "") if exc.errno else ""
    reason = f"{exc.strerror or exc}" + (f" ({name})" if name else "")
    if exc.errno == errno.ELOOP:
        return StateError(
            f"{path} is a symlink; loopx-chat never follows symlinks inside its state dir and "
            "wrote nothing. Replace it with a real folder or file",
            error_code="state_unsafe",
        )
    if writing or exc.errno in _NO_SPACE:
        return StateError(
            f"cannot write {path}: {reason}; nothing was recorded",
            error_code="state_unwritable",
        )
    return StateError(f"cannot read {path}: {reason}", error_code="state_unreadable")


@contextlib.contextmanager
def state_write(path: Path | str) -> Iterator[None]:
    """Owner-local state writes: a failure is `state_unwritable` (or `state_unsafe` for a
    symlink) naming the path, never a bare OSError."""
    try:
        yield
    except OSError as exc:
        raise state_os_error(exc, getattr(exc, "filename", None) or path, writing=True) from None


@contextlib.contextmanager
def state_read(path: Path | str) -> Iterator[None]:
    """Owner-local state reads: a failure is `state_unreadable` naming the path."""
    try:
        yield
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise state_os_error(exc, getattr(exc, "filename", None) or path, writing=False) from None


def unsafe(path: Path | str, what: str) -> StateError:
    return StateError(
        f"{path} {what}; loopx-chat wrote nothing. Replace it with a real file or folder",
        error_code="state_unsafe",
    )


def foreign_owner(path: Path | str, uid: int) -> StateError:
    """The refusal for a folder or file of another user where only ours may be."""
    from loopx_chat.errors import Remedy

    return StateError(
        f"{path} belongs to another user (uid {uid}), not to you (uid {os.getuid()}); "
        "loopx-chat read, wrote and changed nothing there",
        error_code="foreign_owner",
        remedy=Remedy(
            summary="Another local user could read or change what loopx-chat keeps there.",
            next_action="Use a state dir of your own (--state-dir or LOOPX_CHAT_STATE_DIR), "
            "or have that user remove it; then run the command again.",
        ),
    )


def check_owner(st: os.stat_result, path: Path | str) -> None:
    """`foreign_owner` unless `st` (of `path`) belongs to the current user."""
    if st.st_uid != os.getuid():
        raise foreign_owner(path, st.st_uid)


def check_own_root(path: Path | str) -> None:
    """A state root that exists must be a folder of ours (never followed if a symlink)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise state_os_error(exc, path, writing=False) from None
    check_owner(st, path)


def tighten(fd: int, path: Path | str, mode: int) -> None:
    """Give an open file or folder exactly `mode`; say so when it was looser."""
    st = os.fstat(fd)
    if st.st_mode & 0o777 != mode:
        os.fchmod(fd, mode)
        if st.st_mode & 0o777 & ~mode:
            notice(f"{path} had mode {st.st_mode & 0o777:04o}; tightened to {mode:04o}")


def ensure_private_dir(path: Path | str, *, within: Path | str | None = None) -> None:
    """Create `path` (and the parents we create) 0700; tighten a looser existing leaf.

    No component of `path` may be a symlink (`state_unsafe`): state roots are resolved at
    startup, so a symlink on the way is one someone put inside the state dir. With
    `within` (the state root), every folder from it down to `path` is also 0700, and when
    the root is an existing folder the walk starts at it: the folders above a root were
    resolved when it was chosen, and are not ours to police on every write. Without one,
    or before the root exists, every component from `/` is walked.
    """
    # Plain strings, not pathlib: this runs before every state write (several a turn), and
    # building a Path per component cost more than the lstat calls themselves.
    target = os.path.abspath(path)
    start = os.path.abspath(within) if within is not None else target
    start_prefix = start.rstrip(os.sep) + os.sep
    base = os.sep
    if within is not None and target.startswith(start_prefix) and _is_real_dir(start):
        base = os.path.dirname(start.rstrip(os.sep))  # the root itself is still checked
    current = base
    for part in target[len(base) :].split(os.sep):
        if not part:
            continue
        current = f"{current.rstrip(os.sep)}{os.sep}{part}"
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            try:
                os.mkdir(current, PRIVATE_DIR_MODE)
            except FileExistsError:
                pass  # a concurrent creator: checked below like any existing folder
            else:
                # mkdir's mode is filtered by the umask: chmod, never trust it.
                os.chmod(current, PRIVATE_DIR_MODE, follow_symlinks=False)
                continue
            st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode):
            raise unsafe(current, "is a symlink inside the state dir")
        if not stat.S_ISDIR(st.st_mode):
            raise StateError(
                f"cannot use {current} as a folder: it is a file; nothing was written",
                error_code="state_unwritable",
            )
        inside = current in (target, start) or current.startswith(start_prefix)
        if inside:
            check_owner(st, current)  # before anything is tightened or written in it
        if inside and st.st_mode & 0o777 != PRIVATE_DIR_MODE:
            os.chmod(current, PRIVATE_DIR_MODE, follow_symlinks=False)
            if st.st_mode & 0o077:
                notice(f"{current} had mode {st.st_mode & 0o777:04o}; tightened to 0700")


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def open_private_append(path: Path | str, *, readable: bool = False) -> int:
    """An fd appending to `path` (created 0600): never through a symlink, regular files only
    (O_NONBLOCK, so a FIFO is refused rather than waited on)."""
    access = os.O_RDWR if readable else os.O_WRONLY
    fd = os.open(
        path,
        access | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        PRIVATE_FILE_MODE,
    )
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise unsafe(path, "is not a regular file")
        check_owner(st, path)
        os.set_blocking(fd, True)
        tighten(fd, path, PRIVATE_FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private(path: Path, data: bytes) -> bool:
    """Make `path` 0600 holding `data`, durably and whole: a reader sees no file or all of
    it, never an empty one (it is written aside and linked into place, which fails if the
    name is taken). False when it is already there (another writer won the race: the
    caller reads theirs). Never through a symlink."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE_MODE
    )
    try:
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte or raise: a short write is retried for the rest, never ignored."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - POSIX write returns >0 or raises
            raise OSError(errno.EIO, "short write")
        view = view[written:]


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
        raise OSError(errno.ELOOP, "refusing to write through a symlink", str(path))
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        try:
            for chunk in chunks:
                write_all(fd, chunk)
            if durable:
                os.fsync(fd)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise

"""Append-only JSON-lines files: the one way loopx-chat keeps audit trails.

Owns appending one record durably and reading records back, whole or (`read_appended`) only
what was appended after a known offset. An append writes the whole line or nothing: under
an exclusive `flock` on the file it loops on short writes, fsyncs, and on any error
(ENOSPC, EIO, EDQUOT) truncates the file back to its size before the append and raises
`state_unwritable`; only a returned append is committed. A trailing partial line (a crash
mid-append) is not a record: readers skip it, and the next append moves it to
`<file>.torn` (kept for the owner, noted once) and truncates the file to its last newline,
so a torn tail never glues onto the next record. Any other line that is not a JSON object
is `state_corrupt`, naming the file and line. Files are 0600, never opened through a
symlink, regular files only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.state.private_files import (
    check_owner,
    ensure_private_dir,
    notice,
    open_private_append,
    state_read,
    state_write,
    write_all,
)
from loopx_chat.state.safe_read import JOURNAL_LIMIT, JsonRefused, parse_json, read_regular

_TAIL_CHUNK = 64 * 1024


def append_record(
    path: Path, record: Mapping[str, Any], *, durable: bool = True, within: Path | None = None
) -> None:
    """Append one record, all of it or nothing; `durable=False` skips the fsync (for
    best-effort metrics events and caches). Raises `state_unwritable` when it did not land."""
    line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
    with state_write(path):
        ensure_private_dir(path.parent, within=within)
        fd = open_private_append(path, readable=True)  # read: the torn-tail repair
        try:
            # Every appender takes this lock, so a partial tail seen under it is a crashed
            # append, never one in progress, and truncating back cannot cut another's record.
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = _repair_torn_tail(fd, path, os.fstat(fd).st_size)
            try:
                write_all(fd, line)
                if durable:
                    os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                    os.fsync(fd)
                raise
        finally:
            os.close(fd)  # releases the flock


def _repair_torn_tail(fd: int, path: Path, size: int) -> int:
    """Move a trailing partial line to `<file>.torn`; the size the file has afterwards."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    keep = 0
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            keep = start + at + 1
            break
        end = start
    tail = os.pread(fd, size - keep, keep)
    torn = path.with_name(path.name + ".torn")
    tfd = open_private_append(torn)
    try:
        before = os.fstat(tfd).st_size
        try:
            write_all(tfd, tail + b"\n")
            os.fsync(tfd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(tfd, before)
            raise
    finally:
        os.close(tfd)
    os.ftruncate(fd, keep)
    os.fsync(fd)
    notice(
        f"{path} ended in a partial line (an append that did not finish): moved its "
        f"{len(tail)} bytes to {torn} and removed them from the log"
    )
    return keep


def _checked(item: object, path: Path, where: str, schema: str | None) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise StateError(
            f"{path} {where} is not a JSON record; the file was left untouched",
            error_code="state_corrupt",
        )
    if schema is not None and item.get("schema_version") != schema:
        raise StateError(
            f"{path} {where} has schema {item.get('schema_version')!r}; this "
            f"loopx-chat reads {schema!r}. The file was left untouched",
            error_code="state_schema_unsupported",
        )
    return item


def _parsed(line: bytes, path: Path, where: str) -> object:
    try:
        return parse_json(line, repair=True)
    except JsonRefused as exc:
        if "nested" in exc.reason or "number" in exc.reason:
            raise StateError(
                f"{path} {where} is not readable JSON ({exc.reason}); the file was left untouched",
                error_code="state_corrupt",
            ) from None
        return None


@dataclass(frozen=True)
class Appended:
    """The records appended to a file since `offset`, and where the next read starts."""

    records: list[dict[str, Any]]
    identity: tuple[int, int]  # (device, inode) of the file read
    offset: int  # just past the last complete line read
    restarted: bool  # the file was replaced or truncated: records are read from its start


def read_appended(
    path: Path,
    identity: tuple[int, int] | None,
    offset: int,
    schema: str | None = None,
) -> Appended:
    """The complete records after `offset` of the file with `identity`; the whole file when it
    is another file (replaced) or shorter than `offset` (truncated). Blank lines are skipped,
    a trailing partial line waits, and a bad line is `state_corrupt` as in `read_records`."""
    try:
        with state_read(path):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Appended([], (0, 0), 0, identity is not None and offset > 0)
    try:
        with state_read(path):
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StateError(
                    f"{path} is not a regular file; it was left untouched",
                    error_code="state_corrupt",
                )
            check_owner(st, path)
            found = (st.st_dev, st.st_ino)
            restarted = found != identity or st.st_size < offset
            start = 0 if restarted else offset
            if st.st_size - start > JOURNAL_LIMIT:
                raise StateError(
                    f"{path} is larger than {JOURNAL_LIMIT >> 20} MiB; it was left untouched",
                    error_code="state_corrupt",
                )
            chunks = []
            position = start
            while position < st.st_size:
                chunk = os.pread(fd, st.st_size - position, position)
                if not chunk:
                    break
                chunks.append(chunk)
                position += len(chunk)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    out: list[dict[str, Any]] = []
    at = 0
    end = raw.rfind(b"\n") + 1  # a trailing partial line is not a record yet
    while at < end:
        stop = raw.index(b"\n", at)
        line = raw[at:stop]
        if line.strip():
            where = f"at byte {start + at}"
            out.append(_checked(_parsed(line, path, where), path, where, schema))
        at = stop + 1
    return Appended(out, found, start + end, restarted and identity is not None)


def read_records(path: Path, schema: str | None = None) -> list[dict[str, Any]]:
    """Every complete record; with `schema`, refuse records of any other schema_version."""
    try:
        raw = read_regular(path, limit=JOURNAL_LIMIT)
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for number, line in enumerate(raw.split(b"\n")[:-1], start=1):
        if line.strip():
            where = f"line {number}"
            out.append(_checked(_parsed(line, path, where), path, where, schema))
    return out

"""Append-only JSON-lines files: the one way loopx-chat keeps audit trails.

Owns appending one record (O_APPEND, O_NOFOLLOW, fsync, 0600 in a 0700 folder) and reading
records back, whole or (`read_appended`) only what was appended after a known offset. A
trailing partial line is an append that did not finish (a crash): it is not a record yet and
is ignored. Any other line that is not a JSON object is `state_corrupt`, naming the file and
line; nothing is ever rewritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.state.private_files import ensure_private_dir, state_write


def append_record(path: Path, record: Mapping[str, Any], *, durable: bool = True) -> None:
    """Append one record; `durable=False` skips the fsync (for best-effort metrics events)."""
    line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
    with state_write(path):
        ensure_private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)


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


def _parsed(line: bytes) -> object:
    try:
        return json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
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
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return Appended([], (0, 0), 0, identity is not None and offset > 0)
    try:
        st = os.fstat(fd)
        found = (st.st_dev, st.st_ino)
        restarted = found != identity or st.st_size < offset
        start = 0 if restarted else offset
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
            out.append(_checked(_parsed(line), path, f"at byte {start + at}", schema))
        at = stop + 1
    return Appended(out, found, start + end, restarted and identity is not None)


def read_records(path: Path, schema: str | None = None) -> list[dict[str, Any]]:
    """Every complete record; with `schema`, refuse records of any other schema_version."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for number, line in enumerate(raw.split(b"\n")[:-1], start=1):
        if line.strip():
            out.append(_checked(_parsed(line), path, f"line {number}", schema))
    return out

"""Append-only JSON-lines files: the one way loopx-chat keeps audit trails.

Owns appending one record (O_APPEND, O_NOFOLLOW, fsync, 0600 in a 0700 folder) and reading
records back. A trailing partial line is an append that did not finish (a crash): it is not a
record yet and is ignored. Any other line that is not a JSON object is `state_corrupt`, naming
the file and line; nothing is ever rewritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.fsutil import ensure_private_dir


def append_record(path: Path, record: Mapping[str, Any], *, durable: bool = True) -> None:
    """Append one record; `durable=False` skips the fsync (for best-effort metrics events)."""
    line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
    ensure_private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, line)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_records(path: Path, schema: str | None = None) -> list[dict[str, Any]]:
    """Every complete record; with `schema`, refuse records of any other schema_version."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for number, line in enumerate(raw.split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            item = None
        if not isinstance(item, dict):
            raise StateError(
                f"{path} line {number} is not a JSON record; the file was left untouched",
                error_code="state_corrupt",
            )
        if schema is not None and item.get("schema_version") != schema:
            raise StateError(
                f"{path} line {number} has schema {item.get('schema_version')!r}; this "
                f"loopx-chat reads {schema!r}. The file was left untouched",
                error_code="state_schema_unsupported",
            )
        out.append(item)
    return out

"""A turn's outcome kept aside when the disk is full: one file of fixed size per session.

Owns `<state>/sessions/<id>/outcome.slot`: made at its full size (`SLOT_BYTES` of spaces)
before a session's first turn begins, so that writing an outcome into it later needs no
new space on the disk; `park` overwrites it in place with a turn record's JSON (padded,
then fsynced), `parked` reads it back, `clear` blanks it. A slot torn by a crash reads as
empty. It never decides what an outcome means (the turn ledger does), and never renames,
truncates or grows the slot: each of those could need the space that is missing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from loopx_chat.state.private_files import PRIVATE_FILE_MODE, atomic_write_bytes, state_write

SLOT_FILE = "outcome.slot"
SLOT_BYTES = 4096  # a compact turn record is well under 1 KiB
_BLANK = b" " * SLOT_BYTES


def ensure(folder: Path) -> None:
    """Make the session's slot at its full size, once (a stat on every later call)."""
    path = folder / SLOT_FILE
    if not os.path.exists(path):
        with state_write(path):
            atomic_write_bytes(path, _BLANK, mode=PRIVATE_FILE_MODE, durable=False)


def _overwrite(path: Path, data: bytes) -> None:
    with state_write(path):
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)


def park(folder: Path, record: dict[str, Any]) -> bool:
    """Write `record` into the slot, in place; False when there is no slot or it does not
    fit (nothing is kept then, as before slots existed)."""
    data = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    path = folder / SLOT_FILE
    if len(data) > SLOT_BYTES or not os.path.isfile(path) or os.path.islink(path):
        return False
    _overwrite(path, data + b" " * (SLOT_BYTES - len(data)))
    return True


def parked(folder: Path) -> dict[str, Any] | None:
    """The record kept in the slot, or None (no slot, blank, or torn)."""
    try:
        fd = os.open(folder / SLOT_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, SLOT_BYTES + 1).strip()
    finally:
        os.close(fd)
    if not data:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def clear(folder: Path) -> None:
    """Blank the slot (in place) once its record is written where it belongs."""
    path = folder / SLOT_FILE
    if os.path.isfile(path) and not os.path.islink(path):
        _overwrite(path, _BLANK)

"""The outcome slot: written in place (no new space), read back, blanked; torn reads as empty."""

from __future__ import annotations

import os
from pathlib import Path

from loopx_chat.state import outcome_slot


def test_a_record_parks_in_place_and_comes_back(tmp_path: Path) -> None:
    assert outcome_slot.park(tmp_path, {"turn_id": "t"}) is False  # no slot yet: nothing kept
    outcome_slot.ensure(tmp_path)
    slot = tmp_path / outcome_slot.SLOT_FILE
    inode, size = slot.stat().st_ino, slot.stat().st_size
    assert size == outcome_slot.SLOT_BYTES and outcome_slot.parked(tmp_path) is None
    assert outcome_slot.park(tmp_path, {"turn_id": "t", "status": "completed"})
    assert outcome_slot.parked(tmp_path) == {"turn_id": "t", "status": "completed"}
    # In place: the same file at the same size (a rename or growth could need space).
    assert (slot.stat().st_ino, slot.stat().st_size) == (inode, size)
    outcome_slot.clear(tmp_path)
    assert outcome_slot.parked(tmp_path) is None
    assert (slot.stat().st_ino, slot.stat().st_size) == (inode, size)
    assert oct(slot.stat().st_mode & 0o777) == oct(0o600)


def test_a_torn_or_oversized_record_is_not_kept(tmp_path: Path) -> None:
    outcome_slot.ensure(tmp_path)
    assert outcome_slot.park(tmp_path, {"x": "y" * outcome_slot.SLOT_BYTES}) is False
    fd = os.open(tmp_path / outcome_slot.SLOT_FILE, os.O_WRONLY)
    os.pwrite(fd, b'{"turn_id": "t", "sta', 0)
    os.close(fd)
    assert outcome_slot.parked(tmp_path) is None

"""A handoff payload as the reference writes it (`loopx-behaviour.md` §5), shared by the
writeback plan and document-validator tests."""

from __future__ import annotations

HANDOFF = {
    "handoff_id": "handoff-42",
    "next_action": "continue",
    "stop_condition": "the smoke prints ok",
    "evidence_pointer_count": 2,
}

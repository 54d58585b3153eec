"""The append-only log of compact control events the goal-control metrics are computed from.

Owns `<state>/events/control.jsonl`: one JSON object per line, appended (O_APPEND, fsync)
by the controller, the gate and handoff commands and the service. Events carry ids, codes,
counts and timestamps only, never text. Logging is best effort by design: a metrics event
that cannot be written never fails the user's action (the failure is counted in memory).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.fsutil import ensure_private_dir
from loopx_chat.store import utc_now

CONTROL_EVENT_SCHEMA = "loopx_chat_control_event_v1"

# Kinds, and the only fields each may carry besides schema_version/kind/at.
EVENT_FIELDS: dict[str, frozenset[str]] = {
    "controller_started": frozenset({"open_gate_ids", "pid"}),
    "turn_finished": frozenset(
        {"goal_id", "session_id", "thread_id", "turn_id", "status", "code", "session_created_at"}
    ),
    "submit_replayed": frozenset({"goal_id", "session_id", "turn_id"}),
    "thread_busy_refused": frozenset({"goal_id", "session_id", "thread_id"}),
    "gate_requested": frozenset({"goal_id", "gate_id", "blocking"}),
    "gate_resolved": frozenset({"goal_id", "gate_id", "decision"}),
    "handoff_recorded": frozenset({"goal_id", "handoff_id"}),
    "blocker_displayed": frozenset({"goal_id", "blocker_ref", "surface"}),
    "stale_detected": frozenset({"goal_id", "lag_turns", "lag_seconds"}),
}


class ControlLog:
    def __init__(self, root: Path, *, clock: Callable[[], str] = utc_now) -> None:
        self.path = root / "events" / "control.jsonl"
        self._clock = clock
        self.write_failures = 0

    def record(self, kind: str, **fields: Any) -> None:
        allowed = EVENT_FIELDS[kind]
        unknown = set(fields) - allowed
        if unknown:  # a programming error: the log's vocabulary is closed
            raise ValueError(f"{kind} does not carry {sorted(unknown)}")
        event = {"schema_version": CONTROL_EVENT_SCHEMA, "kind": kind, "at": self._clock()}
        event.update({k: v for k, v in fields.items() if v is not None})
        line = (json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n").encode()
        try:
            ensure_private_dir(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            self.write_failures += 1

    def events(self) -> Iterator[dict[str, Any]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        lines = raw.split(b"\n")[:-1]  # a partial last line is an unfinished append
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError):
                event = None
            if not isinstance(event, dict):
                raise StateError(
                    f"{self.path} line {number} is not a JSON record; it was left untouched",
                    error_code="state_corrupt",
                )
            if event.get("schema_version") != CONTROL_EVENT_SCHEMA:
                raise StateError(
                    f"{self.path} line {number} has schema {event.get('schema_version')!r}",
                    error_code="state_schema_unsupported",
                )
            yield event

"""The append-only log of compact control events the goal-control metrics are computed from.

Owns `<state>/events/control.jsonl`: one JSON object per line, appended (O_APPEND, fsync)
by the controller, the gate and handoff commands and the service. Events carry ids, codes,
counts and timestamps only, never text. Also owns `reported()`, what `status` has already
recorded as shown (blocker refs, stale positions), which a long-lived log object keeps up to
date by reading only the bytes appended since its last call. Logging is best effort by
design: a metrics event that cannot be written never fails the user's action (the failure is
counted in memory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loopx_chat.jsonl import append_record, read_appended, read_records
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
    "stale_detected": frozenset({"goal_id", "lag_turns", "lag_seconds", "position"}),
}


class ControlLog:
    def __init__(self, root: Path, *, clock: Callable[[], str] = utc_now) -> None:
        self.path = root / "events" / "control.jsonl"
        self._clock = clock
        self.write_failures = 0
        # The fold behind `reported()`: the file it came from and how far it has read.
        self._identity: tuple[int, int] | None = None
        self._offset = 0
        self._reported: dict[str, set[str]] | None = None

    def record(self, kind: str, **fields: Any) -> None:
        allowed = EVENT_FIELDS[kind]
        unknown = set(fields) - allowed
        if unknown:  # a programming error: the log's vocabulary is closed
            raise ValueError(f"{kind} does not carry {sorted(unknown)}")
        event = {"schema_version": CONTROL_EVENT_SCHEMA, "kind": kind, "at": self._clock()}
        event.update({k: v for k, v in fields.items() if v is not None})
        try:
            append_record(self.path, event, durable=False)  # metrics, not decisions
        except OSError:
            self.write_failures += 1

    def events(self) -> Iterator[dict[str, Any]]:
        yield from read_records(self.path, CONTROL_EVENT_SCHEMA)

    def reported(self) -> dict[str, set[str]]:
        """{"blockers": refs already displayed, "stale": positions already reported}.

        The sets are this object's own, kept across calls: a caller that records a new event
        adds its key to them too. A replaced or truncated log is folded again from its start.
        """
        got = read_appended(self.path, self._identity, self._offset, CONTROL_EVENT_SCHEMA)
        if got.restarted or self._reported is None:
            self._reported = {"blockers": set(), "stale": set()}
        for event in got.records:
            kind = event.get("kind")
            if kind == "blocker_displayed":
                self._reported["blockers"].add(str(event.get("blocker_ref")))
            elif kind == "stale_detected":
                self._reported["stale"].add(str(event.get("position")))
        self._identity, self._offset = got.identity, got.offset
        return self._reported

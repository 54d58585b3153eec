"""The append-only log of compact control events the goal-control metrics are computed from.

Owns `<state>/events/control.jsonl`: one JSON object per line, appended (O_APPEND, fsync)
by the controller, the gate and handoff commands and the service. Events carry ids, codes,
counts and timestamps only, never text. Also owns `reported()`, what `status` has already
recorded as shown (blocker refs, stale positions), folded from the log by reading only the
bytes appended since the last fold: a long-lived log object keeps its fold in memory, and
every process shares it through `events/control.reported.json` (a cache: 0600, rewritten
atomically, ignored when unreadable). Logging is best effort by design: a metrics event that
cannot be written never fails the user's action.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.state.jsonl import append_record, read_appended, read_records
from loopx_chat.state.private_files import PRIVATE_FILE_MODE, atomic_write_bytes, ensure_private_dir
from loopx_chat.state.safe_read import parse_json, read_regular
from loopx_chat.state.session_store import utc_now

CONTROL_EVENT_SCHEMA = "loopx_chat_control_event_v1"
REPORTED_CACHE_SCHEMA = "loopx_chat_control_reported_v1"
# The shared fold is rewritten once this many new log bytes were folded since it was read,
# so a status that finds nothing new writes nothing.
_CACHE_EVERY = 64 * 1024
_CACHE_LIMIT = 16 << 20

# Kinds, and the only fields each may carry besides schema_version/kind/at.
EVENT_FIELDS: dict[str, frozenset[str]] = {
    "controller_started": frozenset({"open_gate_ids", "pid"}),
    # A new session of a goal: the goal's open gates, and those its first screen showed.
    "session_opened": frozenset({"goal_id", "session_id", "open_gate_ids", "shown_gate_ids"}),
    "turn_finished": frozenset(
        {
            "goal_id",
            "session_id",
            "thread_id",
            "turn_id",
            "status",
            "code",
            "session_created_at",
            "started_at",
            "origin",  # chat (a message sent through loopx-chat) or goal_loop
        }
    ),
    "submit_replayed": frozenset({"goal_id", "session_id", "turn_id"}),
    # same_work: the refused request asked for the running turn; same_by says how it matched
    # (`client_turn_id`, or `text_digest`: the same message text while that turn runs).
    "thread_busy_refused": frozenset(
        {"goal_id", "session_id", "thread_id", "same_work", "same_by"}
    ),
    "gate_requested": frozenset({"goal_id", "gate_id", "blocking"}),
    "gate_resolved": frozenset({"goal_id", "gate_id", "decision", "actor"}),
    "handoff_recorded": frozenset({"goal_id", "handoff_id"}),
    "blocker_displayed": frozenset({"goal_id", "blocker_ref", "surface"}),
    # A notice about a blocker (a gate id, or a failed run's outcome id) reached a channel:
    # `osascript`/`notify-send` exited 0, or the webhook answered 2xx.
    "blocker_notified": frozenset({"goal_id", "blocker_ref", "channel"}),
    "stale_detected": frozenset({"goal_id", "lag_turns", "lag_seconds", "position"}),
    # Goal runs: the owner's authority for Codex's own loop, and how each run ended.
    "run_authorized": frozenset({"goal_id", "run_id", "session_id"}),
    "run_ended": frozenset({"goal_id", "run_id"}),
    "run_accepted": frozenset({"goal_id", "run_id"}),
    "run_reopened": frozenset({"goal_id", "run_id"}),
    # codex ran a goal loop on a thread loopx-chat loaded without a run of its own
    "host_loop_detected": frozenset({"goal_id", "session_id", "thread_id"}),
    # ... and the owner paused it (its actor: who)
    "host_loop_paused": frozenset({"goal_id", "session_id", "thread_id", "actor"}),
}


class ControlLog:
    def __init__(self, root: Path, *, clock: Callable[[], str] = utc_now) -> None:
        self._root = root
        self.path = root / "events" / "control.jsonl"
        self._clock = clock
        self.cache_path = root / "events" / "control.reported.json"
        # The fold behind `reported()`: the file it came from and how far it has read.
        self._identity: tuple[int, int] | None = None
        self._offset = 0
        self._reported: dict[str, set[str]] | None = None
        self._cached_offset: int | None = None  # the offset the shared fold file holds
        self._foreign_cache = False  # written by a loopx-chat with another schema: left alone

    def record(self, kind: str, **fields: Any) -> None:
        allowed = EVENT_FIELDS[kind]
        unknown = set(fields) - allowed
        if unknown:  # a programming error: the log's vocabulary is closed
            raise ValueError(f"{kind} does not carry {sorted(unknown)}")
        event = {"schema_version": CONTROL_EVENT_SCHEMA, "kind": kind, "at": self._clock()}
        event.update({k: v for k, v in fields.items() if v is not None})
        # Metrics, not decisions: a lost event never fails the user's action.
        with contextlib.suppress(StateError):
            append_record(self.path, event, durable=False, within=self._root)

    def events(self) -> Iterator[dict[str, Any]]:
        yield from read_records(self.path, CONTROL_EVENT_SCHEMA)

    def reported(self) -> dict[str, set[str]]:
        """{"blockers": refs already displayed, "stale": positions already reported}.

        The sets are this object's own, kept across calls: a caller that records a new event
        adds its key to them too. A replaced or truncated log is folded again from its start.
        """
        if self._reported is None:
            self._load_shared_fold()
        got = read_appended(self.path, self._identity, self._offset, CONTROL_EVENT_SCHEMA)
        if got.restarted or self._reported is None:
            self._reported = {"blockers": set(), "stale": set()}
            self._cached_offset = None if got.restarted else self._cached_offset
        for event in got.records:
            kind = event.get("kind")
            if kind == "blocker_displayed":
                self._reported["blockers"].add(str(event.get("blocker_ref")))
            elif kind == "stale_detected":
                self._reported["stale"].add(str(event.get("position")))
        self._identity, self._offset = got.identity, got.offset
        if got.offset and (
            self._cached_offset is None or got.offset - self._cached_offset >= _CACHE_EVERY
        ):
            self._save_shared_fold()
        return self._reported

    def _load_shared_fold(self) -> None:
        try:
            doc = parse_json(read_regular(self.cache_path, limit=_CACHE_LIMIT))
            if not isinstance(doc, dict):
                raise StateError("the reported cache is not a JSON object")
            schema = doc["schema"]
            if schema != REPORTED_CACHE_SCHEMA:
                # A newer loopx-chat's cache: used by neither of us, never written over.
                self._foreign_cache = isinstance(schema, str)
                return
            identity = (int(doc["identity"][0]), int(doc["identity"][1]))
            offset = int(doc["offset"])
            blockers = {str(key) for key in doc["blockers"]}
            stale = {str(key) for key in doc["stale"]}
            if offset < 0:
                raise ValueError("offset")
        except (OSError, StateError, ValueError, TypeError, KeyError, IndexError):
            return  # no usable cache: the fold starts from the log's first byte
        self._identity, self._offset, self._cached_offset = identity, offset, offset
        self._reported = {"blockers": blockers, "stale": stale}

    def _save_shared_fold(self) -> None:
        if self._foreign_cache or self._reported is None or self._identity is None:
            return
        doc = {
            "schema": REPORTED_CACHE_SCHEMA,
            "identity": list(self._identity),
            "offset": self._offset,
            "blockers": sorted(self._reported["blockers"]),
            "stale": sorted(self._reported["stale"]),
        }
        try:
            ensure_private_dir(self.cache_path.parent, within=self._root)
            # A cache: losing it to a power cut costs one fold of the log, never a wrong key.
            atomic_write_bytes(
                self.cache_path, json.dumps(doc).encode(), mode=PRIVATE_FILE_MODE, durable=False
            )
        except (OSError, StateError):
            return  # best effort, like the log itself; the next fold tries again
        self._cached_offset = self._offset

"""Goal-level control records: owner gates and handoff packets, append-only with an audit trail.

Owns `<state>/goals/<goal_id>/gates.jsonl` and `handoffs.jsonl`: one JSON event per line,
appended under a per-goal lock, files 0600 in 0700 folders. Current state is a fold over the
events, so every request and decision stays on record and survives restarts. Records are
compact: ids, codes, short public-safe text a person typed, timestamps. A trailing partial
line (a crash mid-append) is ignored; any other unreadable line is `state_corrupt`, naming
the file and line, and nothing is rewritten.
"""

from __future__ import annotations

import os
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from loopx_chat.errors import StateError, UsageError
from loopx_chat.session_runtime import unsafe_text_class
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.file_lock import FileLock
from loopx_chat.state.jsonl import append_record, read_records
from loopx_chat.state.private_files import (
    check_own_root,
    ensure_private_dir,
    state_read,
    state_write,
)
from loopx_chat.state.session_records import validate_session_id
from loopx_chat.state.session_store import utc_now
from loopx_chat.valid_text import checked_text

GATE_EVENT_SCHEMA = "loopx_chat_gate_event_v1"
GATES_FILE = "gates.jsonl"
HANDOFFS_FILE = "handoffs.jsonl"
HANDOFF_SCHEMA = "loopx_chat_handoff_packet_v1"
GATE_ACTORS = ("operator", "owner", "user", "controller", "human")
DECISIONS = ("approve", "reject")
# Text a person or agent types into a goal record (a gate's question, a reason, a handoff's
# next action) is cut to this many characters; the first screen's input says the same.
TYPED_TEXT_LIMIT = 280
# Who decided a gate, by the owner's surface: the page, a program with the owner's secret,
# or the owner's terminal; or the owner's signed-in device by name (`owner-device:NAME`).
# Records written before this say nothing (None).
DECIDERS = ("owner-page", "owner-api", "owner-cli", "owner-terminal")
_DEVICE_DECIDER = re.compile(r"owner-device:[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


def surface_of(decided_by: str) -> str:
    """Through which of the owner's surfaces a decision came: a device decides on the page."""
    if _DEVICE_DECIDER.fullmatch(decided_by):
        return "page"
    return decided_by.removeprefix("owner-")


def is_decider(actor: object) -> bool:
    return isinstance(actor, str) and (
        actor in DECIDERS or _DEVICE_DECIDER.fullmatch(actor) is not None
    )


# A host gate (what codex asked: an approval or a question) has this id prefix and a compact
# `host` mapping (kind, ids, a public-safe summary; see controller/host_requests.py).
HOST_GATE_PREFIX = "host-"
# Whitespace controls collapse into one space; every other control character (an escape
# sequence, a NUL, a bidi override that reorders what a reader sees) is refused.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def validate_goal_id(goal_id: object) -> str:
    try:
        return validate_session_id(goal_id)
    except StateError:
        raise UsageError(
            "invalid goal id: use 1-160 characters from A-Z a-z 0-9 . _ -",
            error_code="invalid_goal_id",
        ) from None


def is_valid_goal_id(goal_id: str) -> bool:
    try:
        validate_goal_id(goal_id)
    except UsageError:
        return False
    return True


def has_control_characters(text: str) -> bool:
    return any(
        (unicodedata.category(ch) == "Cc" and not ch.isspace()) or ch in _BIDI_CONTROLS
        for ch in text
    )


def public_text(value: object, what: str) -> str:
    """The one filter for text a person or agent writes into a record: collapse whitespace,
    refuse control characters and anything the projection's compact filter would drop
    (secrets, tokens, private paths), naming the pattern class; cap the length."""
    if not isinstance(value, str):
        # JSON input (`goal set --from-json`, the HTTP API) can carry any type here.
        raise UsageError(f"{what} must be text", error_code="input_invalid")
    checked_text(value, what)  # whichever surface it came through: never a lone surrogate
    if has_control_characters(value):
        raise UsageError(
            f"{what} refused (control_character): it contains a control character; type plain text",
            error_code="unsafe_text",
        )
    text = " ".join(value.split())
    if not text:
        raise UsageError(f"{what} must not be empty", error_code="usage_error")
    found = unsafe_text_class(text)
    if found is not None:
        raise UsageError(
            f"{what} refused ({found}): it looks like it contains a "
            f"{'credential or token' if found == 'secret' else 'local path'}; goal records "
            "keep short public-safe text only, and the first screen would drop it",
            error_code="unsafe_text",
        )
    return text if len(text) <= TYPED_TEXT_LIMIT else text[: TYPED_TEXT_LIMIT - 3].rstrip() + "..."


@dataclass(frozen=True)
class Gate:
    gate_id: str
    goal_id: str
    question: str
    actor: str
    blocking: bool
    status: str  # pending | approved | rejected
    created_at: str
    updated_at: str
    decision: str | None = None
    reason: str | None = None
    decided_by: str | None = None  # one of DECIDERS
    history: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    # Host gates only: compact facts about codex's request, merged over its events.
    host: dict[str, Any] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["history"] = list(self.history)
        return data


@dataclass(frozen=True)
class Handoff:
    handoff_id: str
    goal_id: str
    next_action: str
    stop_condition: str
    evidence_refs: tuple[str, ...]
    created_at: str
    schema_version: str = HANDOFF_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["evidence_refs"] = list(self.evidence_refs)
        return data


def fold_gates(goal_id: str, events: Iterable[dict[str, Any]]) -> list[Gate]:
    """The gates of a goal, folded from its `gates.jsonl` events (pure)."""
    folded: dict[str, Gate] = {}
    for event in events:
        gate_id = str(event.get("gate_id"))
        if event.get("event") == "requested":
            folded[gate_id] = Gate(
                gate_id=gate_id,
                goal_id=goal_id,
                question=str(event.get("question")),
                actor=str(event.get("actor")),
                blocking=bool(event.get("blocking", True)),
                status="pending",
                created_at=str(event.get("at")),
                updated_at=str(event.get("at")),
                history=(event,),
                host=dict(event["host"]) if isinstance(event.get("host"), dict) else None,
            )
        elif event.get("event") == "host_noted" and gate_id in folded:
            gate = folded[gate_id]
            update = event.get("host")
            if isinstance(update, dict):
                folded[gate_id] = replace(gate, host={**(gate.host or {}), **update})
        elif event.get("event") == "resolved" and gate_id in folded:
            gate = folded[gate_id]
            decision = str(event.get("decision"))
            folded[gate_id] = replace(
                gate,
                status="approved" if decision == "approve" else "rejected",
                decision=decision,
                reason=event.get("reason"),
                decided_by=event["actor"] if is_decider(event.get("actor")) else None,
                updated_at=str(event.get("at")),
                history=(*gate.history, event),
            )
            if gate.host is not None and isinstance(event.get("host"), dict):
                folded[gate_id] = replace(folded[gate_id], host={**gate.host, **event["host"]})
    return list(folded.values())


def handoffs_from(goal_id: str, items: Iterable[Mapping[str, Any]]) -> list[Handoff]:
    """The handoff packets of a goal, from its `handoffs.jsonl` records (pure)."""
    return [
        Handoff(
            handoff_id=str(item.get("handoff_id")),
            goal_id=goal_id,
            next_action=str(item.get("next_action")),
            stop_condition=str(item.get("stop_condition")),
            evidence_refs=tuple(str(r) for r in item.get("evidence_refs") or ()),
            created_at=str(item.get("created_at")),
        )
        for item in items
    ]


def check_decision(decision: str, reason: str | None, decided_by: str) -> None:
    """What `resolve_gate` refuses before it writes, for a caller that must know first (a
    host gate's decision is answered to codex before it is recorded)."""
    if decision not in DECISIONS:
        raise UsageError("decision must be approve or reject", error_code="usage_error")
    if not is_decider(decided_by):
        raise UsageError(f"a gate is decided by {', '.join(DECIDERS)}", error_code="usage_error")
    if reason:
        public_text(reason, "reason")


class GateStore:
    """Owner gates and handoff packets, append-only beside the session store, under the same
    state root; it also owns each goal's folder and lock, which `GoalLedger` writes under."""

    def __init__(self, root: Path, *, clock: Callable[[], str] = utc_now) -> None:
        check_own_root(root)  # a state dir of another user: refused before any read
        self.root = root
        self.goals_dir = root / "goals"
        self._clock = clock
        self.control = ControlLog(root, clock=clock)

    def now(self) -> str:
        return self._clock()

    def goal_dir(self, goal_id: str) -> Path:
        return self.goals_dir / validate_goal_id(goal_id)

    @contextmanager
    def locked(self, goal_id: str) -> Iterator[Path]:
        """The per-goal writer lock (readers never need it: records are only appended)."""
        with self._locked(goal_id) as folder:
            yield folder

    @contextmanager
    def _locked(self, goal_id: str) -> Iterator[Path]:
        folder = self.goal_dir(goal_id)
        lock = FileLock(folder / ".lock")
        with state_write(folder / ".lock"):
            ensure_private_dir(folder, within=self.root)
            lock.acquire()
        try:
            yield folder
        finally:
            lock.release()

    # -- gates ---------------------------------------------------------------------------
    def request_gate(
        self,
        goal_id: str,
        question: str,
        *,
        actor: str = "operator",
        blocking: bool = True,
        host: Mapping[str, Any] | None = None,
    ) -> Gate:
        if actor not in GATE_ACTORS:
            raise UsageError(
                f"a gate waits on a person: actor must be one of {', '.join(GATE_ACTORS)}",
                error_code="usage_error",
            )
        text = public_text(question, "question")
        gate_id = ("gate-" if host is None else HOST_GATE_PREFIX) + uuid.uuid4().hex[:12]
        event: dict[str, Any] = {
            "schema_version": GATE_EVENT_SCHEMA,
            "event": "requested",
            "gate_id": gate_id,
            "goal_id": goal_id,
            "question": text,
            "actor": actor,
            "blocking": blocking,
            "at": self._clock(),
        }
        if host is not None:
            event["host"] = dict(host)
        with self._locked(goal_id) as folder:
            # Read first: a log that cannot be read takes no new record (and an error is
            # never printed for a record that was committed).
            self.gates(goal_id)
            append_record(folder / "gates.jsonl", event)
        self.control.record("gate_requested", goal_id=goal_id, gate_id=gate_id, blocking=blocking)
        return self.gate(goal_id, gate_id)

    def resolve_gate(
        self,
        goal_id: str,
        gate_id: str,
        decision: str,
        reason: str | None,
        *,
        decided_by: str = "owner-cli",
        host: Mapping[str, Any] | None = None,
    ) -> Gate:
        check_decision(decision, reason, decided_by)
        # Look before taking the lock: the lock makes the goal's folder, and a mistyped goal
        # or gate must leave nothing behind. Checked again under the lock.
        self.gate(goal_id, gate_id)
        with self._locked(goal_id) as folder:
            current = self.gate(goal_id, gate_id)
            if current.status != "pending":
                raise StateError(
                    f"gate {gate_id} was already {current.status}",
                    error_code="gate_already_resolved",
                )
            append_record(
                folder / "gates.jsonl",
                {
                    "schema_version": GATE_EVENT_SCHEMA,
                    "event": "resolved",
                    "gate_id": gate_id,
                    "goal_id": goal_id,
                    "decision": decision,
                    "reason": public_text(reason, "reason") if reason else None,
                    "actor": decided_by,
                    "surface": surface_of(decided_by),
                    "at": self._clock(),
                    **({"host": dict(host)} if host is not None else {}),
                },
            )
        self.control.record(
            "gate_resolved",
            goal_id=goal_id,
            gate_id=gate_id,
            decision=decision,
            actor=decided_by,
        )
        return self.gate(goal_id, gate_id)

    def note_host(self, goal_id: str, gate_id: str, update: Mapping[str, Any]) -> Gate:
        """Merge compact facts into a host gate (expired, carried, notified, seen...)."""
        self.gate(goal_id, gate_id)
        with self._locked(goal_id) as folder:
            append_record(
                folder / "gates.jsonl",
                {
                    "schema_version": GATE_EVENT_SCHEMA,
                    "event": "host_noted",
                    "gate_id": gate_id,
                    "goal_id": goal_id,
                    "host": dict(update),
                    "at": self._clock(),
                },
            )
        return self.gate(goal_id, gate_id)

    def gates(self, goal_id: str) -> list[Gate]:
        return fold_gates(
            goal_id, read_records(self.goal_dir(goal_id) / GATES_FILE, GATE_EVENT_SCHEMA)
        )

    def gate(self, goal_id: str, gate_id: str) -> Gate:
        for gate in self.gates(goal_id):
            if gate.gate_id == gate_id:
                return gate
        raise StateError(f"no gate {gate_id} for goal {goal_id}", error_code="gate_not_found")

    # -- handoffs ------------------------------------------------------------------------
    def record_handoff(
        self, goal_id: str, next_action: str, stop_condition: str, evidence_refs: tuple[str, ...]
    ) -> Handoff:
        handoff = self.new_handoff(goal_id, next_action, stop_condition, evidence_refs)
        with self._locked(goal_id) as folder:
            self.append_handoff(folder, handoff)
        self.control.record("handoff_recorded", goal_id=goal_id, handoff_id=handoff.handoff_id)
        return handoff

    def new_handoff(
        self, goal_id: str, next_action: str, stop_condition: str, evidence_refs: tuple[str, ...]
    ) -> Handoff:
        """A checked packet, not yet written (`append_handoff` writes it under the lock)."""
        return Handoff(
            handoff_id="handoff-" + uuid.uuid4().hex[:12],
            goal_id=goal_id,
            next_action=public_text(next_action, "next action"),
            stop_condition=public_text(stop_condition, "stop condition"),
            evidence_refs=tuple(validate_session_id(ref) for ref in evidence_refs),
            created_at=self._clock(),
        )

    @staticmethod
    def append_handoff(folder: Path, handoff: Handoff) -> None:
        """Write a packet; the caller holds the goal's lock (`locked`)."""
        append_record(folder / "handoffs.jsonl", handoff.to_dict())

    def handoffs(self, goal_id: str) -> list[Handoff]:
        return handoffs_from(
            goal_id, read_records(self.goal_dir(goal_id) / HANDOFFS_FILE, HANDOFF_SCHEMA)
        )

    def has_records(self, goal_id: str) -> bool:
        """Whether the goal's folder holds any record (an empty folder or file, left by a
        write that failed, names no goal)."""
        try:
            with state_read(self.goal_dir(goal_id)):
                return any(
                    e.name.endswith(".jsonl") and e.stat(follow_symlinks=False).st_size > 0
                    for e in os.scandir(self.goal_dir(goal_id))
                )
        except FileNotFoundError:
            return False

    def goal_ids(self) -> list[str]:
        """Every goal with a folder. A folder whose name no writer accepts (an older
        version's) is skipped here, once, so no listing fails on it."""
        try:
            with state_read(self.goals_dir):
                return sorted(
                    e.name
                    for e in os.scandir(self.goals_dir)
                    if e.is_dir(follow_symlinks=False) and is_valid_goal_id(e.name)
                )
        except FileNotFoundError:
            return []

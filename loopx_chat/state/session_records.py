"""Owner-local records: the session and the compact turn, as frozen dataclasses.

Owns the on-disk shape (`loopx_chat_session_state_v1`, `loopx_chat_turn_state_v1`), the
field rules that do not need the disk (id syntax, the Codex-home shape rule) and the
conversion to and from JSON-ready dicts. It never does I/O and never stores transcript
text: a turn is ids, a status, timestamps, token counts and an error code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, TypeVar, get_args

from loopx_chat.errors import StateError

SESSION_SCHEMA_VERSION = "loopx_chat_session_state_v1"
TURN_SCHEMA_VERSION = "loopx_chat_turn_state_v1"

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,160}$")
SessionMode = Literal["managed_runtime", "attached_host"]
SESSION_MODES: frozenset[str] = frozenset(get_args(SessionMode))


class SessionStatus(StrEnum):
    """The statuses the code writes on a session (the same strings on disk)."""

    READY = "ready"
    BUSY = "busy"  # a turn is running (`active_turn_id` names it)
    RESUME_FAILED = "resume_failed"  # stays until a resume succeeds


class TurnStatus(StrEnum):
    """The statuses the code writes on a turn (the same strings on disk)."""

    QUEUED = "queued"  # an attached host's turn, waiting for that host
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


# Every status change a record may make; `with_changes` refuses any other
# (`illegal_status_transition`). Writing the status a record already has is no change.
SESSION_TRANSITIONS: Mapping[SessionStatus, frozenset[SessionStatus]] = {
    SessionStatus.READY: frozenset({SessionStatus.BUSY, SessionStatus.RESUME_FAILED}),
    SessionStatus.BUSY: frozenset({SessionStatus.READY, SessionStatus.RESUME_FAILED}),
    # A resume that works clears it; a turn may also begin on a thread already warm in this
    # process while another process recorded its failed resume.
    SessionStatus.RESUME_FAILED: frozenset({SessionStatus.READY, SessionStatus.BUSY}),
}
TERMINAL_TURN_STATUSES: frozenset[TurnStatus] = frozenset(
    {TurnStatus.COMPLETED, TurnStatus.INTERRUPTED, TurnStatus.FAILED}
)
TURN_TRANSITIONS: Mapping[TurnStatus, frozenset[TurnStatus]] = {
    TurnStatus.QUEUED: frozenset(),  # nothing of ours moves an attached host's turn
    TurnStatus.RUNNING: TERMINAL_TURN_STATUSES,
    **{status: frozenset() for status in TERMINAL_TURN_STATUSES},
}


S = TypeVar("S", SessionStatus, TurnStatus)


def checked_transition(
    kind: type[S], transitions: Mapping[S, frozenset[S]], old: S, new: object
) -> S:
    """`new` as a `kind`, if the table lets a record go there from `old` (the same status is
    no change); else `illegal_status_transition`, a bug in the writer."""
    what = kind.__name__.removesuffix("Status").lower()
    try:
        if not isinstance(new, str):
            raise ValueError(new)  # only a str can name a status; refused like any other
        status = kind(new)
    except ValueError:
        raise StateError(
            f"a {what} has no status {new!r}", error_code="illegal_status_transition"
        ) from None
    if status != old and status not in transitions.get(old, frozenset()):
        raise StateError(
            f"a {what} cannot go from {old} to {status}", error_code="illegal_status_transition"
        )
    return status


# Fields a caller may change after creation; identity fields never change.
IMMUTABLE_SESSION_FIELDS: frozenset[str] = frozenset({"schema_version", "session_id", "created_at"})


def validate_session_id(session_id: object) -> str:
    """Return the id if it is a safe opaque id, else raise `invalid_session_id`."""
    if (
        not isinstance(session_id, str)
        or not SESSION_ID_RE.match(session_id)
        or session_id in {".", ".."}
    ):
        shown = session_id if isinstance(session_id, str) and len(session_id) <= 60 else "…"
        raise StateError(
            f"invalid session id {shown!r}: use 1-160 characters from A-Z a-z 0-9 . _ -",
            error_code="invalid_session_id",
        )
    return session_id


@dataclass(frozen=True)
class SessionRecord:
    """One chat session as owner-local state; `codex_home` is its pinned host identity."""

    session_id: str
    goal_id: str
    created_at: str
    updated_at: str
    agent_id: str = "codex"
    adapter_kind: str = "codex_app_server"
    upstream_thread_id: str | None = None
    codex_home: str | None = None
    session_mode: SessionMode = "managed_runtime"
    host_surface: str | None = None
    status: SessionStatus = SessionStatus.READY
    active_turn_id: str | None = None
    last_error_code: str | None = None
    last_activity_at: str | None = None
    work_dir: str | None = None
    turn_count: int = 0
    schema_version: str = SESSION_SCHEMA_VERSION
    # Keys written by a newer v1 writer that this version does not know; kept so a
    # rewrite never drops them.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**dict(self.extra), **data}

    def public_dict(self) -> dict[str, Any]:
        """What status output shows: no local paths (the home and work dir stay internal)."""
        data = self.to_dict()
        for key in ("codex_home", "work_dir", *self.extra.keys()):
            data.pop(key, None)
        data["codex_home_bound"] = self.codex_home is not None
        return data

    def with_changes(self, changes: Mapping[str, Any]) -> SessionRecord:
        unknown = sorted(set(changes) - _SESSION_FIELD_NAMES)
        if unknown:
            raise StateError(
                f"unsupported chat session fields: {unknown}",
                error_code="unsupported_session_fields",
            )
        frozen = sorted(set(changes) & IMMUTABLE_SESSION_FIELDS)
        if frozen:
            raise StateError(
                f"session fields cannot change after creation: {frozen}",
                error_code="unsupported_session_fields",
            )
        new_home = changes.get("codex_home", self.codex_home)
        if "codex_home" in changes and self.codex_home is not None and new_home != self.codex_home:
            raise StateError(
                "cannot rebind a managed Codex home: this session belongs to "
                f"{self.codex_home}; restart loopx-chat with that home instead",
                error_code="codex_home_rebind_refused",
            )
        if "status" in changes:
            status = checked_transition(
                SessionStatus, SESSION_TRANSITIONS, self.status, changes["status"]
            )
            changes = {**changes, "status": status}
        updated = replace(self, **dict(changes))
        updated.check_invariants()
        return updated

    def check_invariants(self) -> None:
        validate_session_id(self.session_id)
        if self.session_mode not in SESSION_MODES:
            raise StateError(
                f"unknown session_mode {self.session_mode!r}", error_code="state_corrupt"
            )
        if self.codex_home is not None and not (
            isinstance(self.codex_home, str)
            and os.path.isabs(self.codex_home)
            and self.agent_id == "codex"
            and self.session_mode == "managed_runtime"
        ):
            raise StateError(
                "codex_home must be an absolute managed Codex home",
                error_code="codex_home_invalid",
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionRecord:
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            (known if key in _SESSION_FIELD_NAMES else extra)[key] = value
        missing = [
            k for k in ("session_id", "goal_id", "created_at", "updated_at") if k not in known
        ]
        if missing:
            raise ValueError(f"missing fields {missing}")
        for key in ("session_id", "goal_id", "created_at", "updated_at", "status", "agent_id"):
            if key in known and not isinstance(known[key], str):
                raise ValueError(f"field {key} is not a string")
        if not isinstance(known.get("turn_count", 0), int):
            raise ValueError("field turn_count is not an integer")
        if "status" in known:
            known["status"] = SessionStatus(known["status"])  # ValueError: not ours
        record = cls(**known, extra=extra)
        record.check_invariants()
        return record


_SESSION_FIELD_NAMES: frozenset[str] = frozenset(
    f.name for f in fields(SessionRecord) if f.name != "extra"
)


@dataclass(frozen=True)
class TokenCounts:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True)
class TurnRecord:
    """A compact turn: ids, status, timestamps, token counts, error code. Never text."""

    turn_id: str
    session_id: str
    status: TurnStatus
    created_at: str
    updated_at: str
    client_turn_id: str | None = None
    upstream_turn_id: str | None = None
    completed_at: str | None = None
    error_code: str | None = None
    tokens: TokenCounts = field(default_factory=TokenCounts)
    steered: bool = False
    # sha256 of the message text (never the text), kept only while the turn runs: a busy
    # refusal of the same text is the same work (a metric), whatever its client_turn_id.
    text_digest: str | None = None
    # Who started the turn: None for a message sent through loopx-chat, `goal_loop` for a
    # continuation turn codex's own goal loop started (`run_id` names the owner's run, or is
    # None for a loop loopx-chat did not start).
    origin: str | None = None
    run_id: str | None = None
    schema_version: str = TURN_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        # What `asdict` gives, without its deep-copying walk (every turn writes this twice).
        data = dict(self.__dict__)
        data["tokens"] = dict(self.tokens.__dict__)
        return data

    def with_changes(self, **changes: Any) -> TurnRecord:
        """The turn with `changes`; a status change must be one `TURN_TRANSITIONS` lists."""
        if "status" in changes:
            changes["status"] = checked_transition(
                TurnStatus, TURN_TRANSITIONS, self.status, changes["status"]
            )
        return replace(self, **changes)

    def public_dict(self) -> dict[str, Any]:
        """The shape the CLI's --json and the HTTP API show for a turn."""
        return {
            "id": self.turn_id,
            "upstream_turn_id": self.upstream_turn_id,
            "client_turn_id": self.client_turn_id,
            "status": self.status,
            "error_code": self.error_code,
            "steered": self.steered,
            "input_tokens": self.tokens.input_tokens,
            "output_tokens": self.tokens.output_tokens,
            "total_tokens": self.tokens.total_tokens,
            "created_at": self.created_at,
            "completed_at": self.completed_at,
            "origin": self.origin or "chat",
            "run_id": self.run_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnRecord:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        tokens = values.get("tokens") or {}
        if not isinstance(tokens, Mapping):
            raise ValueError("tokens is not an object")
        values["tokens"] = TokenCounts(
            **{k: int(v) for k, v in tokens.items() if k in TokenCounts.__dataclass_fields__}
        )
        if "status" in values:
            values["status"] = TurnStatus(values["status"])  # ValueError: not ours
        return cls(**values)


def turn_is_blocker(status: object, error_code: object) -> bool:
    """A turn that needs someone: it failed, or it was interrupted by an error (a timeout, a
    crash), not by a person asking it to stop. One rule for facts, status and metrics."""
    return status == "failed" or (status == "interrupted" and bool(error_code))


def epoch_seconds(value: object) -> float | None:
    """Seconds since the epoch of an ISO timestamp (`Z` accepted), or None if it is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None

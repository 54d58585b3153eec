"""The public frozen records a scan returns: per-thread facts, scan result, host position.

What this module owns:
  * `TurnCounts`, `LastTurn`, `TokenTotals`, `ThreadFacts`, `HostPosition`, `ScanResult` and
    their `to_dict()` forms, `HostPosition.from_dict()` (a position a consumer stored), and
    `OUTCOMES`, the outcomes a turn can have.

What it must never do:
  * carry message text, tool output or any path: facts hold ids, kinds, counts and times only;
  * read files or know the index or the rollout layout: it is plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from loopx_chat.codex.rollouts.fields import (
    _need,
    _need_int,
    _opt,
    _pick_id,
    _pick_time,
)
from loopx_chat.errors import StateError

OUTCOMES = ("completed", "failed", "interrupted", "unfinished")


def _flat(record: Any) -> dict[str, Any]:
    """A record of plain fields as a dict, in field order (`__slots__` of a slots dataclass)."""
    return {key: getattr(record, key) for key in record.__slots__}


@dataclass(frozen=True, slots=True)
class TurnCounts:
    """Turns by outcome; `unfinished` were started with neither a completion nor an abort."""

    started: int = 0
    completed: int = 0
    failed: int = 0
    interrupted: int = 0
    unfinished: int = 0

    def to_dict(self) -> dict[str, int]:
        return _flat(self)


@dataclass(frozen=True, slots=True)
class LastTurn:
    """The most recently started turn; `error_code` is codex's compact kind, never a message."""

    turn_id: str
    outcome: str
    error_code: str | None = None
    completed_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _flat(self)


@dataclass(frozen=True, slots=True)
class TokenTotals:
    """The thread's running token totals as codex last reported them."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return _flat(self)


@dataclass(frozen=True, slots=True)
class ThreadFacts:
    """Compact facts about one Codex thread: ids, counts, kinds, times. No text, no path."""

    thread_id: str
    latest_event_at: str | None
    turns: TurnCounts
    last_turn: LastTurn | None
    tokens: TokenTotals | None
    models: tuple[str, ...]
    history_mode: str | None
    archived: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "latest_event_at": self.latest_event_at,
            "turns": self.turns.to_dict(),
            "last_turn": self.last_turn.to_dict() if self.last_turn else None,
            "tokens": self.tokens.to_dict() if self.tokens else None,
            "models": list(self.models),
            "history_mode": self.history_mode,
            "archived": self.archived,
        }


@dataclass(frozen=True, slots=True)
class HostPosition:
    """How far the host has got: a consumer keeps one and compares it with a later one."""

    files: int
    total_offset: int
    latest_event_at: str | None
    turns_started: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "total_offset": self.total_offset,
            "latest_event_at": self.latest_event_at,
            "turns_started": dict(sorted(self.turns_started.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostPosition:
        """Rebuild a position a consumer stored from `to_dict()`."""
        try:
            turns = data["turns_started"]
            position = cls(
                files=_need_int(data["files"]),
                total_offset=_need_int(data["total_offset"]),
                latest_event_at=_opt(data["latest_event_at"], _pick_time),
                turns_started=MappingProxyType(
                    {_need(_pick_id(k)): _need_int(v) for k, v in turns.items()}
                ),
            )
        except (KeyError, AttributeError, TypeError, ValueError) as exc:
            raise StateError(
                "a stored host position is not one HostPosition.to_dict() wrote",
                error_code="state_corrupt",
            ) from exc
        return position


@dataclass(frozen=True, slots=True)
class ScanResult:
    """One scan: the facts per thread plus what the scan cost and where the host stands."""

    threads: dict[str, ThreadFacts]
    files: int
    bytes_read: int
    files_reread: int
    corrupt_lines: int
    position: HostPosition
    # Why the index was not simply continued ("index_unparsable", "index_home_changed", ...).
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "threads": {tid: self.threads[tid].to_dict() for tid in sorted(self.threads)},
            "files": self.files,
            "bytes_read": self.bytes_read,
            "files_reread": self.files_reread,
            "corrupt_lines": self.corrupt_lines,
            "position": self.position.to_dict(),
            "notes": list(self.notes),
        }

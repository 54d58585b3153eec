"""Compact host facts from Codex rollout files, read incrementally.

What this module owns:
  * Finding `<home>/sessions/**/rollout-*.jsonl` and `<home>/archived_sessions/**/rollout-*.jsonl`
    (no symlinks followed) and reducing them to per-thread `ThreadFacts`: turn counts by outcome,
    the last turn, token totals, models, history mode, archived, and the latest event time.
  * The rollout index (`loopx_chat_rollout_index_v1`, owner-local JSON, 0600 in a 0700 folder),
    so a rescan reads only the bytes appended since the last one:
        {"schema": ..., "codex_home": "<resolved home>", "files": {
        "<path relative to the home>": {"dev", "ino", "size", "mtime", "off" (bytes consumed,
            always at a line end), "tail" (hash of the 64 bytes before "off"), "arch",
            "acc": {"mode", "meta", "tid", "hm", "n": [started, completed, failed,
            interrupted], "open": [turn ids without an ending], "last": [turn id, outcome,
            error kind, completed_at], "tok": [5 totals], "models", "ts"}},
        ... one file per line ...}}
    A file whose device or inode changed, that shrank, or whose bytes before "off" changed is
    read again from the start; files that disappeared are dropped.
  * `HostPosition`: how far the host has got, so a consumer can compare what it saw with now.

What it must never do:
  * keep message text, tool output, `cwd`, `base_instructions`, `last_agent_message` or any
    path in facts (or in the index's per-file state): only ids, enum-like kinds, numbers and
    timestamps are picked, each checked against a narrow pattern, and the rest of a line is
    dropped at once. Rollout paths live only in the index, relative to the home;
  * consume a trailing partial line (a turn still being written): the offset stops before it;
  * fail on a corrupt line (it is counted), hold a whole file in memory, or write to the home.

How the scan stays fast. Iterating lines in Python costs more than reading them, so in a file
written in codex's compact serde layout (checked on its first line) lines are not visited one
by one: `bytes.find` jumps between `"type":"event_msg"` and `"type":"turn_context"` (two passes
per 1 MiB read), and the few other records needed are found the same way (the file's first
`session_meta`, and walking back from the end for the newest token totals). Each hit counts
only if everything between its line start and it is a header prefix, so a record named inside
another record (or inside text, where quotes are escaped) never counts; an odd line is parsed
in full. Turn events are read in place when unambiguous (one plain turn id, one `error`, one
`completed_at`) and parsed as JSON otherwise; big text records are never parsed at all.
Two consequences, both exact in a well-formed rollout: `latest_event_at` is the newest time
among the records read and the last line of each read (codex appends in time order), and
`corrupt_lines` counts the bad lines the scan reads (a torn turn event, the last line of a
read); a file not in the compact layout is read line by line and every line is checked.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.fsutil import PRIVATE_FILE_MODE, atomic_write_bytes, ensure_private_dir

__all__ = [
    "INDEX_SCHEMA",
    "HostPosition",
    "LastTurn",
    "RolloutScanner",
    "ScanResult",
    "ThreadFacts",
    "TokenTotals",
    "TurnCounts",
    "scan_home_facts",
    "thread_facts_for",
]

INDEX_SCHEMA = "loopx_chat_rollout_index_v1"

# 1 MiB reads: large enough that syscalls and Python overhead vanish, small enough that peak
# memory stays flat whatever the size of the home.
_CHUNK = 1 << 20
# A partial line longer than this whose header says "never counted" is dropped as it streams
# in, so one enormous tool output never has to sit in memory.
_LONG_LINE = _CHUNK

# How many bytes before the consumed offset `_Entry.tail` hashes.
_TAIL_BYTES = 64
_HEX = re.compile(r"[0-9a-f]{0,64}")

_ROOTS: tuple[tuple[str, bool], ...] = (("sessions", False), ("archived_sessions", True))

# The compact header codex (serde_json) writes on every line. Anchored at the line's `{`, so
# the type it captures is the top-level one: a nested object can never match it.
_HEADER = re.compile(
    rb'\{"timestamp":"([0-9T:.Z+\-]{1,40})",(?:"ordinal":\d{1,20},)?"type":"([a-z_]{1,40})"'
    rb'(?:,"payload":\{"type":"([a-z_]{1,40})")?'
)
# A file whose first line is not exactly this is read line by line (exact mode) forever.
_FIRST_LINE = re.compile(
    rb'\{"timestamp":"[0-9T:.Z+\-]{1,40}",(?:"ordinal":\d{1,20},)?"type":"session_meta",'
    rb'"payload":\{'
)
# What precedes a line's type: fully matched between the line start and a needle hit, it
# proves the hit is that line's own top-level type and not something nested further in.
_HEADER_PREFIX = re.compile(rb'\{"timestamp":"([0-9T:.Z+\-]{1,40})",(?:"ordinal":\d{1,20},)?')
_EVENT_TYPE = b'"type":"event_msg"'
_EVENT_SUB = b',"payload":{"type":"'
_CONTEXT_TYPE = b'"type":"turn_context"'
_NEEDLE_USAGE = b'"type":"token_usage_record"'
_NEEDLE_META = b'"type":"session_meta"'
_SUB_AT = len(_EVENT_TYPE) + len(_EVENT_SUB)  # where an event's subtype starts, from the hit
_T = ord("t")  # every counted event subtype starts with it
_SUB_STARTED = b'task_started"'
_SUB_COMPLETE = b'task_complete"'
_SUB_ABORTED = b'turn_aborted"'
_SUB_TOKENS = b'token_count"'
_STARTED, _COMPLETE, _ABORTED = 1, 2, 3

# Field extraction from a turn event without building its dict. Each is used only when the
# line is unambiguous (see `_FileReader._turn_event`); anything else is parsed for real.
# Inside a JSON string every `"` is escaped, so `"turn_id":"` cannot come from text.
_TURN_ID = re.compile(rb'"turn_id":"([A-Za-z0-9][A-Za-z0-9._:\-]{0,127})"')
_TURN_ID_KEY = b'"turn_id":'
_COMPLETED_AT = re.compile(rb'"completed_at":(\d{1,20})[,}]')
_COMPLETED_AT_KEY = b'"completed_at":'
_ERROR_KEY = b'"error":'
_ERROR_INFO = re.compile(rb'"codex_error_info":(?:"([^"\\]{0,200})"|\{"([^"\\]{0,200})":|null)')
_ERROR_INFO_KEY = b'"codex_error_info":'
# `{"type":"token_count","info":{"total_token_usage":{...}` has its totals at a fixed place: the
# first key of `info`, itself the key right after `type`, so nothing nested can be mistaken
# for it. A flat object of counts is all we read there.
_TOTALS_AT = b'token_count","info":{"total_token_usage":'
_FLAT_COUNTS = re.compile(rb'\{"[a-z_]{1,40}":\d{1,20}(?:,"[a-z_]{1,40}":\d{1,20}){0,31}\}')
_PAYLOAD_OPEN = b',"payload":{'
_META_ID = re.compile(rb'"id":"([A-Za-z0-9][A-Za-z0-9._:\-]{0,127})"')
_META_ID_KEY = b'"id":'
_HISTORY_MODE = re.compile(rb'"history_mode":(?:"([A-Za-z][A-Za-z0-9_.\-]{0,63})"|null)')
_HISTORY_MODE_KEY = b'"history_mode":'

_COUNTED_OUTER = frozenset({b"session_meta", b"turn_context", b"token_usage_record"})
_COUNTED_EVENTS = frozenset({b"task_started", b"task_complete", b"turn_aborted", b"token_count"})

_MODEL_VALUE = re.compile(rb'"model":"([^"\\]{1,200})"')
_MODEL_KEY = b'"model":"'

# What we are willing to keep from a rollout: ids, enum-like kinds and timestamps, each checked
# against a narrow pattern so that no free text (or path) can ride along in a fact.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")
_TIMESTAMP = re.compile(r"[0-9T:.Z+\-]{1,40}")
_MODEL = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
_NAME_UUID = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$"
)

_TOKEN_KEYS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)

OUTCOMES = ("completed", "failed", "interrupted", "unfinished")

_MODE_FAST = "fast"
_MODE_EXACT = "exact"


# ---------------------------------------------------------------------------------------------
# Public records
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnCounts:
    """Turns by outcome; `unfinished` were started with neither a completion nor an abort."""

    started: int = 0
    completed: int = 0
    failed: int = 0
    interrupted: int = 0
    unfinished: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "started": self.started,
            "completed": self.completed,
            "failed": self.failed,
            "interrupted": self.interrupted,
            "unfinished": self.unfinished,
        }


@dataclass(frozen=True)
class LastTurn:
    """The most recently started turn; `error_code` is codex's compact kind, never a message."""

    turn_id: str
    outcome: str
    error_code: str | None = None
    completed_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "outcome": self.outcome,
            "error_code": self.error_code,
            "completed_at": self.completed_at,
        }


@dataclass(frozen=True)
class TokenTotals:
    """The thread's running token totals as codex last reported them."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {key: getattr(self, key) for key in _TOKEN_KEYS}


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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

    def advanced_since(self, earlier: HostPosition) -> tuple[str, ...]:
        """Thread ids that started turns (or appeared) since `earlier`, sorted."""
        return tuple(
            sorted(
                thread_id
                for thread_id, started in self.turns_started.items()
                if started > earlier.turns_started.get(thread_id, -1)
            )
        )


@dataclass(frozen=True)
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


# ---------------------------------------------------------------------------------------------
# Field pickers: each takes an untrusted value and returns only what may be kept
# ---------------------------------------------------------------------------------------------


def _pick_id(value: object) -> str | None:
    return value if isinstance(value, str) and _ID.fullmatch(value) else None


def _pick_kind(value: object) -> str | None:
    return value if isinstance(value, str) and _KIND.fullmatch(value) else None


def _pick_time(value: object) -> str | None:
    return value if isinstance(value, str) and _TIMESTAMP.fullmatch(value) else None


def _pick_int(value: object) -> int | None:
    # bool is an int in Python; a JSON true is not a count.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pick_model(value: object) -> str | None:
    if not isinstance(value, str) or not _MODEL.fullmatch(value):
        return None
    # A local provider may name its model by file path; facts never carry a path.
    if value.startswith(("/", "~", "\\", "./", "../")) or _DRIVE.match(value):
        return "path-redacted"
    return value


def _pick_error_code(error: object) -> str | None:
    """The compact kind of a turn error: `codex_error_info` or its first key. Never the message."""
    if not isinstance(error, dict):
        return None
    info = error.get("codex_error_info")
    if isinstance(info, dict):
        info = next(iter(info), None)
    if info is None:
        return None
    return _pick_kind(info) or "unrecognized"


def _pick_tokens(usage: object) -> tuple[int, ...] | None:
    if not isinstance(usage, dict):
        return None
    return tuple(_pick_int(usage.get(key)) or 0 for key in _TOKEN_KEYS)


# ---------------------------------------------------------------------------------------------
# Per-file accumulator: everything needed to continue a file from its consumed offset
# ---------------------------------------------------------------------------------------------


class _Acc:
    """Mutable per-file state while reading; serialized into the index between scans."""

    __slots__ = (
        "completed",
        "failed",
        "history_mode",
        "interrupted",
        "last_completed_at",
        "last_error",
        "last_id",
        "last_outcome",
        "latest",
        "meta_seen",
        "mode",
        "models",
        "open_turns",
        "started",
        "thread_id",
        "tokens",
    )

    def __init__(self) -> None:
        self.mode: str | None = None
        self.meta_seen = False
        self.thread_id: str | None = None
        self.history_mode: str | None = None
        self.started = 0
        self.completed = 0
        self.failed = 0
        self.interrupted = 0
        # Started turns with no ending yet, in start order. Only SIGKILLed or still-running
        # turns stay here, so the list stays short.
        self.open_turns: list[str] = []
        self.last_id: str | None = None
        self.last_outcome: str | None = None
        self.last_error: str | None = None
        self.last_completed_at: int | None = None
        self.tokens: tuple[int, ...] | None = None
        self.models: set[str] = set()
        self.latest: str | None = None

    # -- events ------------------------------------------------------------------------------

    def see_time(self, value: str | None) -> None:
        if value is not None and (self.latest is None or value > self.latest):
            self.latest = value

    def turn_started(self, turn_id: str | None) -> None:
        # A repeated start of the open or last turn (a replay) is the same turn, not a new one.
        if turn_id is None or turn_id in self.open_turns or turn_id == self.last_id:
            return
        self.started += 1
        self.open_turns.append(turn_id)
        self.last_id = turn_id
        self.last_outcome = "unfinished"
        self.last_error = None
        self.last_completed_at = None

    def turn_ended(
        self, turn_id: str | None, outcome: str, error: str | None, completed_at: int | None
    ) -> None:
        # The first ending of an open turn decides it; an ending for a turn we never saw start
        # (or saw end already) changes nothing.
        if turn_id is None or turn_id not in self.open_turns:
            return
        self.open_turns.remove(turn_id)
        if outcome == "completed":
            self.completed += 1
        elif outcome == "failed":
            self.failed += 1
        else:
            self.interrupted += 1
        if turn_id == self.last_id:
            self.last_outcome = outcome
            self.last_error = error
            self.last_completed_at = completed_at

    def apply(self, record: object) -> bool:
        """Take the counted fields of one parsed line; returns whether it set tokens."""
        if not isinstance(record, dict):
            return False
        self.see_time(_pick_time(record.get("timestamp")))
        kind = record.get("type")
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return False
        if kind == "event_msg":
            sub = payload.get("type")
            if sub == "task_started":
                self.turn_started(_pick_id(payload.get("turn_id")))
            elif sub == "task_complete":
                # Any non-null `error` is a failed turn, even one we cannot name.
                error = payload.get("error")
                self.turn_ended(
                    _pick_id(payload.get("turn_id")),
                    "completed" if error is None else "failed",
                    _pick_error_code(error),
                    _pick_int(payload.get("completed_at")),
                )
            elif sub == "turn_aborted":
                self.turn_ended(
                    _pick_id(payload.get("turn_id")),
                    "interrupted",
                    None,
                    _pick_int(payload.get("completed_at")),
                )
            elif sub == "token_count":
                info = payload.get("info")
                tokens = (
                    _pick_tokens(info.get("total_token_usage")) if isinstance(info, dict) else None
                )
                if tokens is not None:
                    self.tokens = tokens
                    return True
        elif kind == "turn_context":
            model = _pick_model(payload.get("model"))
            if model is not None:
                self.models.add(model)
        elif kind == "token_usage_record":
            tokens = _pick_tokens(payload.get("thread_token_usage"))
            if tokens is not None:
                self.tokens = tokens
                return True
        elif kind == "session_meta" and not self.meta_seen:
            # Only the file's first session_meta names its thread (a fork may carry others).
            self.meta_seen = True
            self.thread_id = _pick_id(payload.get("id"))
            self.history_mode = _pick_kind(payload.get("history_mode"))
        return False

    # -- index form ----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "meta": self.meta_seen,
            "tid": self.thread_id,
            "hm": self.history_mode,
            "n": [self.started, self.completed, self.failed, self.interrupted],
            "open": list(self.open_turns),
            "last": (
                [self.last_id, self.last_outcome, self.last_error, self.last_completed_at]
                if self.last_id is not None
                else None
            ),
            "tok": list(self.tokens) if self.tokens is not None else None,
            "models": sorted(self.models),
            "ts": self.latest,
        }

    @classmethod
    def from_json(cls, data: Any) -> _Acc:
        """Rebuild from the index; any shape we did not write raises ValueError."""
        if not isinstance(data, dict):
            raise ValueError("accumulator is not an object")
        acc = cls()
        mode = data.get("mode")
        if mode not in (None, _MODE_FAST, _MODE_EXACT):
            raise ValueError("mode")
        acc.mode = mode
        acc.meta_seen = bool(data.get("meta"))
        acc.thread_id = _opt(data.get("tid"), _pick_id)
        acc.history_mode = _opt(data.get("hm"), _pick_kind)
        counts = data.get("n")
        if not (isinstance(counts, list) and len(counts) == 4):
            raise ValueError("counts")
        acc.started, acc.completed, acc.failed, acc.interrupted = (_need_int(c) for c in counts)
        acc.open_turns = [_need(_pick_id(t)) for t in _need_list(data.get("open"))]
        last = data.get("last")
        if last is not None:
            if not (isinstance(last, list) and len(last) == 4) or last[1] not in OUTCOMES:
                raise ValueError("last")
            acc.last_id = _need(_pick_id(last[0]))
            acc.last_outcome = last[1]
            acc.last_error = _opt(last[2], _pick_kind)
            acc.last_completed_at = _opt(last[3], _pick_int)
        tokens = data.get("tok")
        if tokens is not None:
            if not (isinstance(tokens, list) and len(tokens) == len(_TOKEN_KEYS)):
                raise ValueError("tokens")
            acc.tokens = tuple(_need_int(t) for t in tokens)
        acc.models = {_need(_pick_model(m)) for m in _need_list(data.get("models"))}
        acc.latest = _opt(data.get("ts"), _pick_time)
        return acc

    def facts(self, thread_id: str, archived: bool) -> ThreadFacts:
        last = None
        if self.last_id is not None and self.last_outcome is not None:
            last = LastTurn(
                self.last_id, self.last_outcome, self.last_error, self.last_completed_at
            )
        return ThreadFacts(
            thread_id=thread_id,
            latest_event_at=self.latest,
            turns=TurnCounts(
                started=self.started,
                completed=self.completed,
                failed=self.failed,
                interrupted=self.interrupted,
                unfinished=len(self.open_turns),
            ),
            last_turn=last,
            tokens=TokenTotals(*self.tokens) if self.tokens is not None else None,
            models=tuple(sorted(self.models)),
            history_mode=self.history_mode,
            archived=archived,
        )


def _need(value: Any) -> Any:
    if value is None:
        raise ValueError("missing or invalid value")
    return value


def _need_int(value: Any) -> int:
    picked = _pick_int(value)
    if picked is None or picked < 0:
        raise ValueError("not a count")
    return picked


def _need_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("not a list")
    return value


def _opt(value: Any, picker: Any) -> Any:
    return None if value is None else _need(picker(value))


# ---------------------------------------------------------------------------------------------
# Reading one file
# ---------------------------------------------------------------------------------------------


class _FileReader:
    """Feeds the complete lines of one file, from a consumed offset, into its accumulator."""

    __slots__ = ("acc", "corrupt", "known_raw")

    def __init__(self, acc: _Acc) -> None:
        self.acc = acc
        self.corrupt = 0
        # Raw `"model":"..."` values already proven to name known models (see _models_known).
        self.known_raw: set[bytes] = set()

    def read(self, fd: int, start: int, size: int) -> tuple[int, int]:
        """Read `[start, size)`; return (offset after the last complete line, bytes read)."""
        pos = start
        consumed = start
        bytes_read = 0
        pieces: list[bytes] = []  # the current partial line, while it spans reads
        pieces_len = 0
        skipping = False  # inside an over-long, never-counted line: its bytes are dropped
        skip_time: str | None = None
        while pos < size:
            data = os.pread(fd, min(_CHUNK, size - pos), pos)
            if not data:
                break  # the file shrank under us; the next scan sees the truncation
            length = len(data)
            bytes_read += length
            chunk_at = pos
            pos += length
            first = data.find(b"\n")
            if first < 0:
                if not skipping:
                    pieces.append(data)
                    pieces_len += length
                    if pieces_len > _LONG_LINE:
                        skip_time = self._skippable(pieces)
                        if skip_time is not None:
                            skipping, pieces, pieces_len = True, [], 0
                continue
            if skipping:
                self.acc.see_time(skip_time)
                skipping, skip_time = False, None
            elif pieces:
                pieces.append(data[: first + 1])
                line = b"".join(pieces)
                pieces, pieces_len = [], 0
                self._region(line, 0, len(line))
            else:
                first = -1  # the read starts on a line boundary: nothing carried over
            last = data.rfind(b"\n")
            if last > first:
                self._region(data, first + 1, last + 1)
            consumed = chunk_at + last + 1
            if last + 1 < length:
                pieces = [data[last + 1 :]]
                pieces_len = length - last - 1
        return consumed, bytes_read

    def _skippable(self, pieces: list[bytes]) -> str | None:
        """The time of a long partial line if its header proves it is never counted."""
        head = pieces[0] if len(pieces[0]) >= 512 else b"".join(pieces)[:512]
        match = _HEADER.match(head)
        if match is None:
            return None
        kind, sub = match.group(2), match.group(3)
        if kind in _COUNTED_OUTER or (
            kind == b"event_msg" and (sub is None or sub in _COUNTED_EVENTS)
        ):
            return None
        return match.group(1).decode("ascii")

    # -- regions of complete lines -----------------------------------------------------------

    def _region(self, buf: bytes, start: int, end: int) -> None:
        """Handle the complete lines in `buf[start:end]` (`end` is just past a newline)."""
        acc = self.acc
        if acc.mode is None:
            # Decided once, on the file's first line (regions start at offset 0 for a new file).
            acc.mode = _MODE_FAST if _FIRST_LINE.match(buf, start, end) else _MODE_EXACT
        if acc.mode == _MODE_FAST:
            self._fast(buf, start, end)
        else:
            self._exact(buf, start, end)

    def _exact(self, buf: bytes, start: int, end: int) -> None:
        line_start = start
        find = buf.find
        while line_start < end:
            line_end = find(b"\n", line_start, end)
            if line_end < 0:
                line_end = end
            if line_end > line_start:
                self._line(buf, line_start, line_end)
            line_start = line_end + 1

    def _fast(self, buf: bytes, start: int, end: int) -> None:
        acc = self.acc
        find = buf.find
        rfind = buf.rfind
        startswith = buf.startswith
        prefix = _HEADER_PREFIX.fullmatch
        seen: set[int] = set()  # starts of lines handed to `_line` in this region
        tokens_at = -1  # start of the newest line that set tokens while read in order

        if not acc.meta_seen:
            hit = find(_NEEDLE_META, start, end)
            if hit >= 0:
                line_start = rfind(b"\n", start, hit) + 1 or start
                seen.add(line_start)
                self._meta(buf, line_start, hit, find(b"\n", hit, end))

        # Every event, in file order. A hit is handled here only if everything between its
        # line start and it is a header prefix; otherwise it sits inside another record (or a
        # torn line) and the line is judged whole by `_line`. serde writes the payload right
        # after its tag and the event's own tag first, so the subtype sits at a fixed place;
        # a line laid out otherwise is also judged by `_line`. Token counts are only noted:
        # the last one wins. Handling a turn event twice changes nothing (it is idempotent).
        token_hits: list[int] = []
        turn_event = self._turn_event
        hit = find(_EVENT_TYPE, start, end)
        while hit >= 0:
            sub = hit + _SUB_AT
            if startswith(_EVENT_SUB, hit + len(_EVENT_TYPE)):
                if buf[sub] != _T:  # item_completed, agent_message, ...: never counted
                    hit = find(_EVENT_TYPE, sub, end)
                    continue
                if startswith(_SUB_TOKENS, sub):
                    token_hits.append(hit)
                    hit = find(_EVENT_TYPE, sub, end)
                    continue
                if startswith(_SUB_STARTED, sub):
                    kind = _STARTED
                elif startswith(_SUB_COMPLETE, sub):
                    kind = _COMPLETE
                elif startswith(_SUB_ABORTED, sub):
                    kind = _ABORTED
                else:
                    hit = find(_EVENT_TYPE, sub, end)
                    continue
                line_start = rfind(b"\n", start, hit) + 1 or start
                line_end = find(b"\n", sub, end)
                if prefix(buf, line_start, hit) is not None:
                    turn_event(kind, buf, line_start, sub, line_end)
                    hit = find(_EVENT_TYPE, line_end, end)
                    continue
            else:
                line_start = rfind(b"\n", start, hit) + 1 or start
                line_end = find(b"\n", hit, end)
            if line_start not in seen:
                seen.add(line_start)
                if self._line(buf, line_start, line_end):
                    tokens_at = line_start
            hit = find(_EVENT_TYPE, line_end, end)

        # Models: the set only grows, so order does not matter.
        models_known = self._models_known
        hit = find(_CONTEXT_TYPE, start, end)
        while hit >= 0:
            line_start = rfind(b"\n", start, hit) + 1 or start
            line_end = find(b"\n", hit, end)
            if (
                prefix(buf, line_start, hit) is None or not models_known(buf, hit, line_end)
            ) and line_start not in seen:
                seen.add(line_start)
                if self._line(buf, line_start, line_end):
                    tokens_at = max(tokens_at, line_start)
            hit = find(_CONTEXT_TYPE, line_end, end)

        # Tokens: walk back over both kinds of token record, newest first, and stop at the
        # first that carries totals; `_line` re-checks each header.
        usage_hit = rfind(_NEEDLE_USAGE, start, end)
        while token_hits or usage_hit >= 0:
            if token_hits and token_hits[-1] > usage_hit:
                hit = token_hits.pop()
            else:
                hit = usage_hit
                before = rfind(b"\n", start, hit)
                usage_hit = rfind(_NEEDLE_USAGE, start, before) if before > start else -1
            line_start = rfind(b"\n", start, hit) + 1 or start
            if line_start < tokens_at:
                break  # older than totals already taken in order above
            if line_start in seen:
                continue
            seen.add(line_start)
            line_end = find(b"\n", hit, end)
            if self._totals(buf, line_start, hit, line_end) or self._line(
                buf, line_start, line_end
            ):
                break

        # The newest time: codex appends lines in time order, so the region's last line has
        # it (the parsed records above were seen too). Lines skipped unread are not consulted.
        line_end = end - 1
        line_start = rfind(b"\n", start, line_end) + 1 or start
        header = _HEADER.match(buf, line_start, line_end)
        if header is not None:
            acc.see_time(header.group(1).decode("ascii"))
        elif line_start not in seen and line_end > line_start:
            self._line(buf, line_start, line_end)

    def _meta(self, buf: bytes, line_start: int, hit: int, line_end: int) -> None:
        """The file's session_meta: its thread id and history mode, without decoding its text.

        `payload.id` is read where no `{` or `[` precedes it inside the payload, which proves
        it is a top-level key. A single `"history_mode":` in the line is taken as the payload's.
        Anything less clear is parsed as JSON.
        """
        body = hit + len(_NEEDLE_META) + len(_PAYLOAD_OPEN)
        key = buf.find(_META_ID_KEY, body, line_end)
        found = _META_ID.match(buf, key, line_end) if key >= 0 else None
        modes = buf.count(_HISTORY_MODE_KEY, body, line_end)
        mode = _HISTORY_MODE.search(buf, body, line_end) if modes == 1 else None
        if (
            found is None
            or (modes and mode is None)
            or modes > 1
            or not buf.startswith(_PAYLOAD_OPEN, hit + len(_NEEDLE_META))
            or buf.find(b"{", body, key) >= 0
            or buf.find(b"[", body, key) >= 0
            or (header := _HEADER_PREFIX.fullmatch(buf, line_start, hit)) is None
        ):
            self._line(buf, line_start, line_end)
            return
        acc = self.acc
        acc.see_time(header.group(1).decode("ascii"))
        acc.meta_seen = True
        acc.thread_id = found.group(1).decode("ascii")
        acc.history_mode = mode.group(1).decode("ascii") if mode and mode.group(1) else None

    def _totals(self, buf: bytes, line_start: int, hit: int, line_end: int) -> bool:
        """Token totals of a verified token_count line read in place; False if not that shape."""
        at = hit + _SUB_AT
        if not buf.startswith(_TOTALS_AT, at):
            return False
        counts = _FLAT_COUNTS.match(buf, at + len(_TOTALS_AT), line_end)
        if counts is None or _HEADER_PREFIX.fullmatch(buf, line_start, hit) is None:
            return False
        self.acc.tokens = _pick_tokens(json.loads(counts.group(0)))
        return True

    def _turn_event(self, kind: int, buf: bytes, line_start: int, at: int, line_end: int) -> None:
        """A verified task_started / task_complete / turn_aborted line, read without json.

        Fast only when unambiguous: every `"turn_id":` holds the same plain id, at most one
        `completed_at` (a number), and for a completion at most one `error` that is null or an
        object with at most one error kind. Anything else (escapes, duplicates, new shapes) is
        parsed as JSON, which decides exactly.
        """
        count = buf.count
        ids = _TURN_ID.findall(buf, at, line_end)
        if (
            not ids
            or count(_TURN_ID_KEY, at, line_end) != len(ids)
            or ids.count(ids[0]) != len(ids)
        ):
            self._parsed(buf, line_start, line_end)
            return
        turn_id = ids[0].decode("ascii")
        acc = self.acc
        if kind == _STARTED:
            acc.turn_started(turn_id)
            return
        completed_at: int | None = None
        times = count(_COMPLETED_AT_KEY, at, line_end)
        if times:
            found = _COMPLETED_AT.search(buf, at, line_end) if times == 1 else None
            if found is None:
                self._parsed(buf, line_start, line_end)
                return
            completed_at = int(found.group(1))
        if kind == _ABORTED:
            acc.turn_ended(turn_id, "interrupted", None, completed_at)
            return
        errors = count(_ERROR_KEY, at, line_end)
        if errors == 0:
            acc.turn_ended(turn_id, "completed", None, completed_at)
            return
        value_at = buf.find(_ERROR_KEY, at, line_end) + len(_ERROR_KEY)
        if errors == 1 and buf.startswith(b"null", value_at):
            acc.turn_ended(turn_id, "completed", None, completed_at)
            return
        infos = count(_ERROR_INFO_KEY, at, line_end)
        info = _ERROR_INFO.search(buf, at, line_end) if infos == 1 else None
        if errors != 1 or not buf.startswith(b"{", value_at) or infos > 1 or (infos and not info):
            self._parsed(buf, line_start, line_end)
            return
        code: str | None = None
        if info is not None and info.group(0) != _ERROR_INFO_KEY + b"null":
            raw = info.group(1) if info.group(1) is not None else info.group(2)
            code = _pick_kind(raw.decode("utf-8", "replace")) or "unrecognized"
        acc.turn_ended(turn_id, "failed", code, completed_at)

    def _line(self, buf: bytes, start: int, end: int) -> bool:
        """One complete line: skip it by its header, or parse it and keep the counted fields."""
        match = _HEADER.match(buf, start, end)
        if match is not None:
            self.acc.see_time(match.group(1).decode("ascii"))
            kind = match.group(2)
            if kind == b"event_msg":
                sub = match.group(3)
                if sub is not None and sub not in _COUNTED_EVENTS:
                    return False
            elif kind == b"turn_context":
                if self._models_known(buf, start, end):
                    return False
            elif kind not in _COUNTED_OUTER:
                return False
        elif not buf[start:end].strip():
            return False  # a blank line is not a record, and not corrupt either
        return self._parsed(buf, start, end)

    def _parsed(self, buf: bytes, start: int, end: int) -> bool:
        """Parse one line and keep its counted fields; returns whether it set tokens."""
        try:
            record = json.loads(buf[start:end])
        except ValueError:
            self.corrupt += 1
            return False
        if not isinstance(record, dict):
            self.corrupt += 1
            return False
        return self.acc.apply(record)

    def _models_known(self, buf: bytes, start: int, end: int) -> bool:
        # A turn_context names the same model turn after turn. If every `"model":"..."` in the
        # line is a model we already have, `payload.model` (one of them) adds nothing and the
        # line need not be parsed. Any escaped or odd value falls through to a real parse.
        values = _MODEL_VALUE.findall(buf, start, end)
        if not values or len(values) != buf.count(_MODEL_KEY, start, end):
            return False
        if self.known_raw.issuperset(values):
            return True
        models = self.acc.models
        for value in values:
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:
                return False
            if _pick_model(text) not in models:
                return False
        self.known_raw.update(values)
        return True


# ---------------------------------------------------------------------------------------------
# The index and the scanner
# ---------------------------------------------------------------------------------------------


class _Entry:
    """The index's record of one rollout file, with caches a rescan reuses when it is unchanged."""

    __slots__ = (
        "acc",
        "archived",
        "dev",
        "facts",
        "ino",
        "mtime",
        "offset",
        "size",
        "tail",
        "text",
        "text_rel",
    )

    def __init__(
        self, dev: int, ino: int, size: int, offset: int, archived: bool, acc: _Acc
    ) -> None:
        self.dev = dev
        self.ino = ino
        self.size = size
        self.mtime = 0
        self.offset = offset
        # A short hash of the bytes just before `offset`: an append leaves them alone, a rewrite
        # in place (same inode, not shorter) does not, and then the file is read again.
        self.tail = ""
        self.archived = archived
        self.acc = acc
        self.text: str | None = None  # this entry's member of the index, while unchanged
        self.text_rel = ""
        self.facts: ThreadFacts | None = None  # its facts, while unchanged

    def touched(self) -> None:
        self.text = None
        self.facts = None

    def to_json(self) -> dict[str, Any]:
        return {
            "dev": self.dev,
            "ino": self.ino,
            "size": self.size,
            "mtime": self.mtime,
            "off": self.offset,
            "tail": self.tail,
            "arch": self.archived,
            "acc": self.acc.to_json(),
        }

    def fragment(self, rel: str) -> str:
        """`"<rel>":{...}`, this entry's member of the index's `files` object."""
        if self.text is None or self.text_rel != rel:
            self.text = f"{json.dumps(rel)}:{json.dumps(self.to_json(), separators=(',', ':'))}"
            self.text_rel = rel
        return self.text

    def copy(self) -> _Entry:
        return _Entry.from_json(self.to_json())

    @classmethod
    def from_json(cls, data: Any) -> _Entry:
        if not isinstance(data, dict):
            raise ValueError("entry is not an object")
        entry = cls(
            dev=_need_int(data.get("dev")),
            ino=_need_int(data.get("ino")),
            size=_need_int(data.get("size")),
            offset=_need_int(data.get("off")),
            archived=bool(data.get("arch")),
            acc=_Acc.from_json(data.get("acc")),
        )
        mtime = _pick_int(data.get("mtime"))
        tail = data.get("tail")
        if entry.offset > entry.size or mtime is None or not isinstance(tail, str):
            raise ValueError("offset, mtime or tail")
        if not _HEX.fullmatch(tail) or (entry.offset > 0) != bool(tail):
            raise ValueError("tail")
        entry.mtime = mtime
        entry.tail = tail
        return entry


def _tail_hash(fd: int, offset: int) -> str:
    """The hash `_Entry.tail` keeps of the bytes before `offset` ("" at the start of a file)."""
    if offset <= 0:
        return ""
    size = min(_TAIL_BYTES, offset)
    return hashlib.blake2b(os.pread(fd, size, offset - size), digest_size=8).hexdigest()


def _thread_id_from_name(name: str) -> str | None:
    match = _NAME_UUID.search(name)
    return match.group(1).lower() if match else None


def _walk(home: Path) -> list[tuple[str, str, bool, os.stat_result]]:
    """(relative path, absolute path, archived, lstat) of every rollout file, no symlinks."""
    found: list[tuple[str, str, bool, os.stat_result]] = []
    prefix = len(str(home)) + 1
    for top, archived in _ROOTS:
        stack = [str(home / top)]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue
            for entry in entries:
                name = entry.name
                try:
                    # Names first: they cost no system call, and most entries are rollouts.
                    if (
                        name.endswith(".jsonl")
                        and name.startswith("rollout-")
                        and entry.is_file(follow_symlinks=False)
                    ):
                        path = entry.path
                        found.append(
                            (path[prefix:], path, archived, entry.stat(follow_symlinks=False))
                        )
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                except FileNotFoundError:
                    continue  # removed while we listed it
    return found


class RolloutScanner:
    """Incremental scanner of one Codex home's rollouts, remembering progress in `index_path`.

    The index is a cache of progress, not a source of truth: it is rebuilt (and the result says
    so) when unparsable or written for another home, and refused only when its schema is one
    we do not know, since a newer loopx-chat may own it. Scans are not locked against each
    other: every index write is one atomic rename of a self-consistent snapshot, so a lost race
    only costs a re-read next time. `index_path` must sit in a folder loopx-chat owns: that
    folder is made (or tightened to) 0700.
    """

    def __init__(self, codex_home: Path, index_path: Path) -> None:
        self.codex_home = Path(codex_home).resolve()
        self.index_path = Path(index_path)
        # The index as this object last wrote or read it, keyed by the file's identity, so a
        # long-lived scanner does not re-parse its own index on every rescan.
        self._cached: tuple[tuple[int, int, int, int], dict[str, _Entry]] | None = None

    # -- index -------------------------------------------------------------------------------

    def _load(self) -> tuple[dict[str, _Entry], list[str]]:
        try:
            st = self.index_path.stat()
        except FileNotFoundError:
            self._cached = None
            return {}, []
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1], []
        self._cached = None
        try:
            raw = self.index_path.read_bytes()
        except OSError as exc:
            raise StateError(
                f"cannot read the rollout index {self.index_path}: {exc.strerror}",
                error_code="state_corrupt",
            ) from exc
        # Thousands of small containers, none of them cyclic: the cycle collector would only
        # walk them again and again while they are built.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._parse_index(raw, key)
        finally:
            if collecting:
                gc.enable()

    def _parse_index(
        self, raw: bytes, key: tuple[int, int, int, int]
    ) -> tuple[dict[str, _Entry], list[str]]:
        try:
            doc = json.loads(raw)
        except ValueError:
            return {}, ["index_unparsable"]
        if not isinstance(doc, dict):
            return {}, ["index_unparsable"]
        schema = doc.get("schema")
        if schema != INDEX_SCHEMA:
            # Never rebuilt over: a newer loopx-chat may own this file. Left as it is.
            raise StateError(
                f"rollout index {self.index_path} has schema {schema!r}; this loopx-chat "
                f"reads only {INDEX_SCHEMA!r}",
                error_code="state_schema_unsupported",
            )
        if doc.get("codex_home") != str(self.codex_home):
            return {}, ["index_home_changed"]
        files = doc.get("files")
        if not isinstance(files, dict):
            return {}, ["index_unparsable"]
        try:
            entries = {str(rel): _Entry.from_json(data) for rel, data in files.items()}
        except (ValueError, TypeError):
            return {}, ["index_unparsable"]
        # `_save` writes one file per line: reuse each line as that entry's cached member, so
        # the next save does not have to serialize every unchanged entry again.
        lines = raw.split(b"\n")
        if len(lines) == len(entries) + 2:
            for (rel, entry), line in zip(entries.items(), lines[1:-1], strict=True):
                member = line.rstrip(b",").decode("utf-8", "replace")
                if member.startswith(json.dumps(rel) + ":"):
                    entry.text, entry.text_rel = member, rel
        self._cached = (key, entries)
        return entries, []

    def _save(self, entries: dict[str, _Entry]) -> None:
        # Assembled from per-entry members, one per line, so an unchanged entry costs a join.
        members = ",\n".join([entry.fragment(rel) for rel, entry in entries.items()])
        head = json.dumps({"schema": INDEX_SCHEMA, "codex_home": str(self.codex_home)})
        data = f'{head[:-1]}, "files": {{\n{members}\n}}}}'.encode()
        try:
            ensure_private_dir(self.index_path.parent)
            # A cache of progress: after a power cut a lost write means one re-read, never a
            # wrong fact, so it is not worth an fsync on every status refresh.
            atomic_write_bytes(self.index_path, data, mode=PRIVATE_FILE_MODE, durable=False)
            st = self.index_path.stat()
        except OSError as exc:
            self._cached = None
            raise StateError(
                f"cannot write the rollout index {self.index_path}: {exc.strerror or exc}",
                error_code="state_unwritable",
            ) from exc
        self._cached = ((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns), entries)

    # -- scan --------------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        """Read what was appended since the last scan and return the facts of every thread."""
        entries, notes = self._load()
        try:
            return self._scan(entries, notes)
        except BaseException:
            # Accumulators may be half advanced; make the next scan start from the disk index.
            self._cached = None
            raise

    def _scan(self, old: dict[str, _Entry], notes: list[str]) -> ScanResult:
        entries: dict[str, _Entry] = {}
        changed = bool(notes)
        bytes_read = 0
        files_reread = 0
        corrupt = 0
        # A file moved between folders (thread/archive renames it) keeps its inode: continue
        # it from where it was rather than reading it again.
        by_inode: dict[tuple[int, int], _Entry] | None = None
        for rel, path, archived, st in _walk(self.codex_home):
            entry = old.get(rel)
            if entry is None:
                if by_inode is None:
                    by_inode = {(e.dev, e.ino): e for e in old.values()}
                moved = by_inode.get((st.st_dev, st.st_ino))
                # A copy: if the old path still exists too, each path keeps its own state.
                if moved is not None:
                    entry = moved.copy()
                    changed = True
            if (
                entry is not None
                and entry.dev == st.st_dev
                and entry.ino == st.st_ino
                and entry.size == st.st_size
                and entry.mtime == st.st_mtime_ns
            ):
                if entry.archived != archived:
                    entry.archived = archived
                    entry.touched()
                    changed = True
                entries[rel] = entry
                continue  # unchanged since last time (a pending partial line stays pending)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue  # gone (or unreadable) since the listing: dropped like a removed file
            try:
                fst = os.fstat(fd)
                if not stat.S_ISREG(fst.st_mode):
                    continue
                if (
                    entry is None
                    or entry.dev != fst.st_dev
                    or entry.ino != fst.st_ino
                    or fst.st_size < entry.size
                    or _tail_hash(fd, entry.offset) != entry.tail
                ):
                    # New, replaced (new inode), truncated or rewritten: read from the start.
                    if entry is not None:
                        files_reread += 1
                    entry = _Entry(fst.st_dev, fst.st_ino, fst.st_size, 0, archived, _Acc())
                reader = _FileReader(entry.acc)
                entry.offset, got = reader.read(fd, entry.offset, fst.st_size)
                entry.tail = _tail_hash(fd, entry.offset)
                entry.size = fst.st_size
                entry.mtime = fst.st_mtime_ns
                entry.archived = archived
                entry.touched()
                bytes_read += got
                corrupt += reader.corrupt
            finally:
                os.close(fd)
            entries[rel] = entry
            changed = True
        if len(entries) != len(old):
            # Unless something changed, every path kept was in the old index: a shorter list
            # means files disappeared, and they are dropped from the index.
            changed = True
        if changed or not self.index_path.exists():
            self._save(entries)
        threads = _threads(entries)
        position = HostPosition(
            files=len(entries),
            total_offset=sum(e.offset for e in entries.values()),
            latest_event_at=max(
                (f.latest_event_at for f in threads.values() if f.latest_event_at), default=None
            ),
            turns_started=MappingProxyType({tid: f.turns.started for tid, f in threads.items()}),
        )
        return ScanResult(
            threads=threads,
            files=len(entries),
            bytes_read=bytes_read,
            files_reread=files_reread,
            corrupt_lines=corrupt,
            position=position,
            notes=tuple(notes),
        )


def _rank(entry: _Entry, facts: ThreadFacts) -> tuple[str, int, int, bool]:
    return (facts.latest_event_at or "", facts.turns.started, entry.offset, not entry.archived)


def _threads(entries: Mapping[str, _Entry]) -> dict[str, ThreadFacts]:
    """Facts per thread; a thread found in two files (mid-archive copy) keeps the newer one."""
    found: dict[str, tuple[_Entry, ThreadFacts]] = {}
    for rel, entry in entries.items():
        facts = entry.facts
        if facts is None:
            thread_id = entry.acc.thread_id or _thread_id_from_name(rel)
            if thread_id is None:
                continue  # neither a session_meta nor a uuid in the name: no thread to name
            facts = entry.facts = entry.acc.facts(thread_id, entry.archived)
        other = found.get(facts.thread_id)
        if other is None or _rank(entry, facts) > _rank(*other):
            found[facts.thread_id] = (entry, facts)
    return {tid: found[tid][1] for tid in sorted(found)}


def scan_home_facts(codex_home: Path, index_path: Path) -> ScanResult:
    """One incremental scan of `codex_home` with progress kept in `index_path`."""
    return RolloutScanner(codex_home, index_path).scan()


def thread_facts_for(
    threads: Mapping[str, ThreadFacts], thread_ids: Iterable[str]
) -> dict[str, ThreadFacts | None]:
    """The facts of the given threads, in the order asked; None for a thread not on the host."""
    return {thread_id: threads.get(thread_id) for thread_id in thread_ids}

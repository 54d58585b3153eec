"""Reading one rollout file: its complete lines, from a consumed offset, into its accumulator.

What this module owns:
  * `_FileReader`: 1 MiB reads, partial lines carried across reads (and never consumed), an
    over-long never-counted line dropped as it streams in, and the two ways of handling a
    region of complete lines: the fast byte-level path for files in codex's compact serde
    layout and the exact line-by-line path for every other file;
  * the byte patterns both paths rely on (the compact header, the needles, the in-place field
    patterns), and the read-size knobs `_CHUNK` / `_LONG_LINE`.

What it must never do:
  * consume a trailing partial line, fail on a corrupt line (it is counted), or hold a whole
    file in memory;
  * keep any text: fields go through the pickers in `fields` into the accumulator, and the
    rest of a line is dropped at once.

How the scan stays fast. In a file written in codex's compact serde layout (checked on its
first line) each line costs a few C calls, never a Python loop over its bytes: `\n` is found
at memchr speed, and the line's own type is read right after the first `"type":"` in its
head, which is its top-level key when the line opens with `{` and no other `{` precedes it
(quotes inside JSON strings are escaped, so text cannot fake it). Only the counted records
are looked at further: the file's first `session_meta`, the turn events, `turn_context`
(skipped when it names only known models), and the newest token record, found by walking
back over the token records of the read; an odd line is parsed in full. Turn events are read
in place when unambiguous (one plain turn id, one `error`, one `completed_at`) and parsed as
JSON otherwise; big text records are never parsed at all.
Two consequences, both exact in a well-formed rollout: `latest_event_at` is the newest time
among the records read and the last line of each read (codex appends in time order), and
`corrupt_lines` counts the bad lines the scan reads (a torn turn event, the last line of a
read); a file not in the compact layout is read line by line and every line is checked.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from loopx_chat.codex.rollouts.accumulator import _MODE_EXACT, _MODE_FAST, _Acc, _shared
from loopx_chat.codex.rollouts.fields import _pick_kind, _pick_model, _pick_tokens

# 1 MiB reads: large enough that syscalls and Python overhead vanish, small enough that peak
# memory stays flat whatever the size of the home.
_CHUNK = 1 << 20
# A partial line longer than this whose header says "never counted" is dropped as it streams
# in, so one enormous tool output never has to sit in memory.
_LONG_LINE = _CHUNK

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
# Where a line's own type is read: the first `"type":"` in its head. The head is long enough
# for any header `_HEADER_PREFIX` accepts (timestamp <= 40, ordinal <= 20 digits).
_TYPE_KEY = b'"type":"'
_TYPE_AT = len(_TYPE_KEY)  # where the type's name starts, from the hit
_HEAD = 100
_EVENT_NAME = b'event_msg"'
_EVENT_TAIL = b'event_msg","payload":{"type":"'  # serde: the payload right after its tag
_CONTEXT_NAME = b'turn_context"'
_USAGE_NAME = b'token_usage_record"'
_META_NAME = b'session_meta"'
_NEEDLE_META = _TYPE_KEY + _META_NAME
_SUB_AT = _TYPE_AT + len(_EVENT_TAIL)  # where an event's subtype starts, from the hit
_OPEN, _E, _S, _T = ord("{"), ord("e"), ord("s"), ord("t")  # every counted subtype: `t`
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
_EVENT_HEAD = re.compile(
    rb'(?:task_started|task_complete|turn_aborted)",'
    rb'(?:"turn_attribution":\{"turn_id":"([A-Za-z0-9][A-Za-z0-9._:\-]{0,127})",'
    rb'"root_turn_id":"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}"\},)?'
    rb'"turn_id":"([A-Za-z0-9][A-Za-z0-9._:\-]{0,127})"'
)
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
_MODEL_KEY_LEN = len(_MODEL_KEY)
# Raw `"model":"..."` bytes -> the model name facts keep for them (a pure function, cached for
# the process: a home names a handful of models in thousands of turns). Bounded by clearing.
_MODEL_NAMES: dict[bytes, str | None] = {}
_MODEL_NAMES_MAX = 256
_UNSEEN = object()


def _single(buf: bytes, key: bytes, pattern: re.Pattern[bytes], at: int, end: int) -> Any:
    """`pattern` matched at the only `key` in `buf[at:end]`: None without the key, False when
    the key occurs twice or its value is not that shape (so the caller parses the line)."""
    first = buf.find(key, at, end)
    if first < 0:
        return None
    found = pattern.match(buf, first, end)
    if found is None or buf.find(key, found.end(), end) >= 0:
        return False
    return found


class _FileReader:
    """Feeds the complete lines of one file, from a consumed offset, into its accumulator."""

    __slots__ = ("acc", "corrupt", "known_raw")

    def __init__(self, acc: _Acc) -> None:
        self.acc = acc
        self.corrupt = 0
        # Raw `"model":"..."` values this read has found among the file's models.
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
        startswith = buf.startswith
        line = self._line
        turn_event = self._turn_event
        token_hits: list[int] = []  # token records, in file order: only the newest is read
        tokens_at = -1  # start of the newest line that set tokens while read in order

        # One walk over the lines: `\n` is found at memchr speed, and each line's own type is
        # read at a fixed place after the first `"type":"` of its head. That key belongs to
        # the line's top-level object when the line opens with `{` and no other `{` comes
        # before it (a `"type":"` run of bytes cannot sit inside a JSON string, where quotes
        # are escaped). A line that does not show that shape is judged whole by `_line`.
        type_key, type_at, head, e, t = _TYPE_KEY, _TYPE_AT, _HEAD, _E, _T
        rfind = buf.rfind
        line_start = start
        while line_start < end:
            line_end = find(b"\n", line_start, end)
            hit = find(type_key, line_start, line_start + head)
            if hit < 0 or hit > line_end or rfind(b"{", line_start, hit) != line_start:
                if line_end > line_start and line(buf, line_start, line_end):
                    tokens_at = line_start
                line_start = line_end + 1
                continue
            at = hit + type_at
            first = buf[at]
            if first == e:
                if startswith(_EVENT_TAIL, at):
                    sub = hit + _SUB_AT
                    if buf[sub] != t:
                        pass  # item_completed, agent_message, ...: never counted
                    elif startswith(_SUB_TOKENS, sub):
                        token_hits.append(hit)
                    elif startswith(_SUB_STARTED, sub):
                        turn_event(_STARTED, buf, line_start, sub, line_end)
                    elif startswith(_SUB_COMPLETE, sub):
                        turn_event(_COMPLETE, buf, line_start, sub, line_end)
                    elif startswith(_SUB_ABORTED, sub):
                        turn_event(_ABORTED, buf, line_start, sub, line_end)
                elif startswith(_EVENT_NAME, at) and line(buf, line_start, line_end):
                    tokens_at = line_start  # an event laid out some other way
            elif first == t:
                if startswith(_CONTEXT_NAME, at):
                    # Models: the set only grows, so order does not matter.
                    # A model new to this file: the line is parsed (its type is proven
                    # above, so `_line` need not check the header and the models again).
                    if not self._models_known(buf, hit, line_end) and self._parsed(
                        buf, line_start, line_end
                    ):
                        tokens_at = line_start
                elif startswith(_USAGE_NAME, at):
                    token_hits.append(hit)
            elif first == _S and not acc.meta_seen and startswith(_META_NAME, at):
                self._meta(buf, line_start, hit, line_end)
            line_start = line_end + 1

        # Tokens: walk back over the token records, newest first, and stop at the first that
        # carries totals; `_line` re-checks each header.
        for hit in reversed(token_hits):
            line_start = buf.rfind(b"\n", start, hit) + 1 or start
            if line_start < tokens_at:
                break  # older than totals already taken in order above
            line_end = find(b"\n", hit, end)
            if self._totals(buf, line_start, hit, line_end) or line(buf, line_start, line_end):
                break

        # The newest time: codex appends lines in time order, so the region's last line has
        # it (the parsed records above were seen too). Lines skipped unread are not consulted.
        line_end = end - 1
        line_start = buf.rfind(b"\n", start, line_end) + 1 or start
        header = _HEADER.match(buf, line_start, line_end)
        if header is not None:
            acc.see_time(header.group(1).decode("ascii"))

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
        # `match` at the key, not `search`: a search walks the 12 KB instructions byte by byte.
        mode = (
            _HISTORY_MODE.match(buf, buf.find(_HISTORY_MODE_KEY, body, line_end), line_end)
            if modes == 1
            else None
        )
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
        acc.history_mode = (
            _shared(mode.group(1).decode("ascii")) if mode and mode.group(1) else None
        )

    def _totals(self, buf: bytes, line_start: int, hit: int, line_end: int) -> bool:
        """Token totals of a verified token_count line read in place; False if not that shape."""
        at = hit + _SUB_AT
        if not buf.startswith(_TOTALS_AT, at):
            return False
        counts = _FLAT_COUNTS.match(buf, at + len(_TOTALS_AT), line_end)
        if counts is None or _HEADER_PREFIX.fullmatch(buf, line_start, hit) is None:
            return False
        self.acc.set_tokens(_pick_tokens(json.loads(counts.group(0))))
        return True

    def _turn_event(self, kind: int, buf: bytes, line_start: int, at: int, line_end: int) -> None:
        """A verified task_started / task_complete / turn_aborted line, read without json.

        Fast only when unambiguous: every `"turn_id":` holds the same plain id, at most one
        `completed_at` (a number), and for a completion at most one `error` that is null or an
        object with at most one error kind. Anything else (escapes, duplicates, new shapes) is
        parsed as JSON, which decides exactly.
        """
        find = buf.find
        turn_id: bytes | None = None
        # codex's own layout in one match: the ids right after the subtype, and no other
        # `"turn_id":` after them. Any other layout takes the key-by-key walk below.
        head = _EVENT_HEAD.match(buf, at, line_end)
        if (
            head is not None
            and (head.group(1) is None or head.group(1) == head.group(2))
            and find(_TURN_ID_KEY, head.end(), line_end) < 0
        ):
            turn_id = head.group(2)
            key = -1
        else:
            key = find(_TURN_ID_KEY, at, line_end)
        while key >= 0:
            found = _TURN_ID.match(buf, key, line_end)
            if found is None or (turn_id is not None and found.group(1) != turn_id):
                self._parsed(buf, line_start, line_end)
                return
            turn_id = found.group(1)
            key = find(_TURN_ID_KEY, found.end(), line_end)
        if turn_id is None:
            self._parsed(buf, line_start, line_end)
            return
        tid = turn_id.decode("ascii")
        acc = self.acc
        if kind == _STARTED:
            acc.turn_started(tid)
            return
        completed_at: int | None = None
        stamp = _single(buf, _COMPLETED_AT_KEY, _COMPLETED_AT, at, line_end)
        if stamp is False:
            self._parsed(buf, line_start, line_end)
            return
        if stamp is not None:
            completed_at = int(stamp.group(1))
        if kind == _ABORTED:
            acc.turn_ended(tid, "interrupted", None, completed_at)
            return
        error_at = find(_ERROR_KEY, at, line_end)
        if error_at < 0:
            acc.turn_ended(tid, "completed", None, completed_at)
            return
        value_at = error_at + len(_ERROR_KEY)
        if find(_ERROR_KEY, value_at, line_end) >= 0:
            self._parsed(buf, line_start, line_end)  # two `error` keys: let JSON decide
            return
        if buf.startswith(b"null", value_at):
            acc.turn_ended(tid, "completed", None, completed_at)
            return
        info = _single(buf, _ERROR_INFO_KEY, _ERROR_INFO, at, line_end)
        if info is False or not buf.startswith(b"{", value_at):
            self._parsed(buf, line_start, line_end)
            return
        code: str | None = None
        if info is not None and info.group(0) != _ERROR_INFO_KEY + b"null":
            raw = info.group(1) if info.group(1) is not None else info.group(2)
            code = _pick_kind(raw.decode("utf-8", "replace")) or "unrecognized"
        acc.turn_ended(tid, "failed", code, completed_at)

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
        find = buf.find
        key = find(_MODEL_KEY, start, end)
        if key < 0:
            return False
        known = self.known_raw
        while key >= 0:
            # The raw bytes up to the next quote: a value seen before (so plain, unescaped and
            # already among the models) costs one set lookup; anything else is checked fully.
            value = key + _MODEL_KEY_LEN
            close = find(b'"', value, end)
            if close < 0:
                return False
            raw = buf[value:close]
            if raw not in known:
                if not self._model_kept(buf, key, end, raw):
                    return False
                known.add(raw)
            key = find(_MODEL_KEY, close, end)
        return True

    def _model_kept(self, buf: bytes, key: int, end: int, raw: bytes) -> bool:
        """Whether the plain `"model":"<raw>"` at `key` names a model the file already has."""
        found = _MODEL_VALUE.match(buf, key, end)
        if found is None or found.group(1) != raw:
            return False  # empty, too long or escaped: parse the line
        picked = _MODEL_NAMES.get(raw, _UNSEEN)
        if picked is _UNSEEN:
            try:
                picked = _pick_model(raw.decode("utf-8"))
            except UnicodeDecodeError:
                return False
            if len(_MODEL_NAMES) >= _MODEL_NAMES_MAX:
                _MODEL_NAMES.clear()
            _MODEL_NAMES[raw] = picked
        return picked in self.acc.models

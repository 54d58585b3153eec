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

import json
import os
import re

from loopx_chat.codex.rollouts.accumulator import _MODE_EXACT, _MODE_FAST, _Acc
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

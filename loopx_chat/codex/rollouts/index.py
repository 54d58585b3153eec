"""The rollout index: the on-disk record of how far each rollout file has been read.

What this module owns:
  * The rollout index (`loopx_chat_rollout_index_v2`, owner-local JSON, 0600 in a 0700 folder),
    so a rescan reads only the bytes appended since the last one:
        {"schema": ..., "codex_home": "<resolved home>", "generation": ..., "files": {
        "<path relative to the home>": [dev, ino, size, mtime, off (bytes consumed, always at a
            line end), tail (hash of the 64 bytes before off), archived, mode, meta seen,
            thread id, history mode, started, completed, failed, interrupted, [open turn ids],
            last turn id, its outcome, its error kind, its completed_at, [5 token totals],
            [models], newest time],
        ... up to 256 files per line ...}}
    Each file is one flat row, not an object of objects: a CLI command loads the whole index
    before it can answer, and a row parses and checks in a few microseconds (v1's nested
    objects took about 50 us each). An index of v1 is rebuilt ("index_outdated").
    A file whose device or inode changed, that shrank, or whose bytes before "off" changed is
    read again from the start; files that disappeared are dropped. The snapshot's head also
    names its "generation" (random hex).
  * Its journal, `<index>.journal` (0600, JSON lines): a rescan appends one line,
    `{"files": {"<rel>": [row] | null}, "gen": "<generation>"}`, with only the files it
    changed (null: gone), instead of rewriting the whole snapshot. A line applies only to the
    snapshot of its generation, so lines left over from before a compaction are ignored, and a
    torn or unparsable line is skipped. The journal is folded into a new snapshot (and
    removed) once it outgrows a quarter of the snapshot. Every entry is a self-consistent pair
    of offset and accumulator, so whichever of two racing writers wins, the worst case is
    reading some bytes again.
  * `_Entry` (one file's record, with the caches a rescan reuses while it is unchanged),
    `_tail_hash`, and `_IndexFile`, the load / parse / save of the index that
    `RolloutScanner` inherits.

What it must never do:
  * hold a rollout path other than relative to the home, or any text: an entry is identity,
    offsets, a hash and the accumulator's compact form;
  * rebuild over an index whose schema it does not know (a newer loopx-chat may own it), or
    write anywhere but `index_path` and its journal, in a folder it makes (or tightens to) 0700.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopx_chat.codex.rollouts.accumulator import ACC_ROW_LEN, _Acc
from loopx_chat.codex.rollouts.records import ThreadFacts
from loopx_chat.errors import StateError
from loopx_chat.state.jsonl import append_record
from loopx_chat.state.private_files import (
    PRIVATE_FILE_MODE,
    atomic_write_chunks,
    ensure_private_dir,
)
from loopx_chat.state.safe_read import JOURNAL_LIMIT, read_regular

INDEX_SCHEMA = "loopx_chat_rollout_index_v2"
# Schemas an older loopx-chat wrote: ours to rebuild (the result says "index_outdated").
_OLDER_SCHEMAS = frozenset({"loopx_chat_rollout_index_v1"})
# A row: the entry's seven fields, then the accumulator's.
_ACC_AT = 7
_ROW_LEN = _ACC_AT + ACC_ROW_LEN

# How many bytes before the consumed offset `_Entry.tail` hashes.
_TAIL_BYTES = 64
_HEX = re.compile(r"[0-9a-f]{0,64}")
# Files per line of a snapshot (and per write).
_ROWS_PER_LINE = 256


# The journal is folded into a new snapshot once it is larger than this share of the snapshot
# (or than `_JOURNAL_MIN`, for small homes), so loading never replays much.
_JOURNAL_SHARE = 4
_JOURNAL_MIN = 64 * 1024

_StatKey = tuple[int, int, int, int]


def _stat_key(path: Path) -> _StatKey | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


# What a settled entry keeps of its accumulator besides the facts: (read mode, session_meta
# seen, thread id from it), one copy of each of the few combinations for all entries.
_Settled = tuple[str | None, bool, bool]
_SETTLED: dict[_Settled, _Settled] = {}


class _Entry:
    """The index's record of one rollout file, with caches a rescan reuses when it is unchanged.

    Once its facts are made and no turn of it is open, `settle` drops its accumulator: a
    long-lived scanner keeps a row per rollout file, most of them of threads long closed, and
    the facts hold all the accumulator did but the read mode and two flags. `acc` makes it
    again from the facts when the file changes (or the index is written)."""

    __slots__ = (
        "_acc",
        "_settled",
        "archived",
        "dev",
        "facts",
        "ino",
        "mtime",
        "offset",
        "size",
        "tail",
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
        self._acc: _Acc | None = acc
        self._settled: _Settled | None = None
        self.facts: ThreadFacts | None = None  # its facts, while unchanged

    @property
    def acc(self) -> _Acc:
        """The accumulator, made again from the facts if it was dropped (`settle`)."""
        acc = self._acc
        if acc is None:
            acc = self._acc = self._unsettled()
        return acc

    def _unsettled(self) -> _Acc:
        assert self.facts is not None and self._settled is not None  # as `settle` left it
        return _Acc.from_facts(self.facts, *self._settled)

    def settle(self) -> None:
        """Drop the accumulator of a file whose facts are made and whose turns all ended."""
        acc = self._acc
        if acc is None or self.facts is None or acc.open_turns:
            return
        settled = (acc.mode, acc.meta_seen, acc.thread_id is not None)
        self._settled = _SETTLED.setdefault(settled, settled)
        self._acc = None

    def touched(self) -> None:
        self.acc  # noqa: B018 - made again from the facts before they go
        self.facts = None

    def to_row(self) -> list[Any]:
        """`[dev, ino, size, mtime, off, tail, arch, *accumulator fields]`."""
        return [
            self.dev,
            self.ino,
            self.size,
            self.mtime,
            self.offset,
            self.tail,
            self.archived,
            # A settled entry's row is made from its facts without keeping the accumulator.
            *(self._acc or self._unsettled()).to_row(),
        ]

    def copy(self) -> _Entry:
        return _Entry.from_row(self.to_row())

    @classmethod
    def from_row(cls, row: Any) -> _Entry:
        """One row as `to_row` wrote it; anything else raises ValueError (the index is rebuilt)."""
        if type(row) is not list or len(row) != _ROW_LEN:
            raise ValueError("entry is not a row")
        dev, ino, size, mtime, offset, tail, archived = row[:_ACC_AT]
        for count in (dev, ino, size, offset):
            if type(count) is not int or count < 0:
                raise ValueError("identity or offset")
        if type(mtime) is not int or type(archived) is not bool or offset > size:
            raise ValueError("mtime, archived or offset")
        if type(tail) is not str or not _HEX.fullmatch(tail) or (offset > 0) != bool(tail):
            raise ValueError("tail")
        entry = cls(dev, ino, size, offset, archived, _Acc.from_row(row, _ACC_AT))
        entry.mtime = mtime
        entry.tail = tail
        return entry


def _loads(raw: bytes) -> Any:
    """The JSON value of `raw`, or None when it is not JSON we can read.

    Not `safe_read.parse_json`: its nesting pre-scan costs more than the parse on a 1 MB
    index, and nothing here walks a parsed value recursively (every shape check is flat), so
    the decoder's own RecursionError is bound enough.
    """
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # invalid, not UTF-8, a number Python refuses
        return None


def _tail_hash(fd: int, offset: int) -> str:
    """The hash `_Entry.tail` keeps of the bytes before `offset` ("" at the start of a file)."""
    if offset <= 0:
        return ""
    import hashlib  # on first need: 3 ms of every command start that scans nothing

    size = min(_TAIL_BYTES, offset)
    return hashlib.blake2b(os.pread(fd, size, offset - size), digest_size=8).hexdigest()


class _IndexFile:
    """Load and save of the index at `index_path` and its journal, written for `codex_home`.

    `_cached` is the index as this object last wrote or read it, keyed by the identity of
    both files. `RolloutScanner` inherits these methods and sets the three attributes.
    """

    codex_home: Path
    index_path: Path
    _cached: tuple[tuple[_StatKey, _StatKey | None], dict[str, _Entry]] | None
    # The loaded snapshot's generation and size, and whether the journal held a bad line: a
    # journal line is written only against a known generation, and a damaged journal is
    # folded away at the next save.
    _generation: str | None = None
    _snapshot_size = 0
    _journal_damaged = False

    @property
    def journal_path(self) -> Path:
        return self.index_path.with_name(self.index_path.name + ".journal")

    # -- load --------------------------------------------------------------------------------

    def _load(self) -> tuple[dict[str, _Entry], list[str]]:
        snapshot = _stat_key(self.index_path)
        if snapshot is None:
            self._cached = None
            self._generation = None
            return {}, []
        key = (snapshot, _stat_key(self.journal_path))
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1], []
        self._cached = None
        self._generation = None
        try:
            # Regular files only, bounded, never through a symlink or into a FIFO.
            raw = read_regular(self.index_path, limit=JOURNAL_LIMIT)
            journal = (
                read_regular(self.journal_path, limit=JOURNAL_LIMIT) if key[1] is not None else b""
            )
        except FileNotFoundError:
            return {}, []  # replaced under us: start afresh, the next save writes a snapshot
        # Thousands of small containers, none of them cyclic: the cycle collector would only
        # walk them again and again while they are built.
        collecting = gc.isenabled()
        gc.disable()
        try:
            entries, notes = self._parse_index(raw)
            if not notes and journal:
                self._replay(entries, journal)
            if not notes:
                self._snapshot_size = len(raw)
                self._cached = (key, entries)
            return entries, notes
        finally:
            if collecting:
                gc.enable()

    def _parse_index(self, raw: bytes) -> tuple[dict[str, _Entry], list[str]]:
        doc = _loads(raw)
        if not isinstance(doc, dict):
            return {}, ["index_unparsable"]
        schema = doc.get("schema")
        if schema in _OLDER_SCHEMAS:
            return {}, ["index_outdated"]
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
            entries = {rel: _Entry.from_row(row) for rel, row in files.items()}
        except (ValueError, TypeError):
            return {}, ["index_unparsable"]
        generation = doc.get("generation")
        # An index written before journals existed has no generation: the next save writes a
        # snapshot with one.
        self._generation = generation if isinstance(generation, str) and generation else None
        self._journal_damaged = False
        return entries, []

    def _replay(self, entries: dict[str, _Entry], journal: bytes) -> None:
        """Apply the journal lines written against this snapshot, in order."""
        complete, _, torn = journal.rpartition(b"\n")
        self._journal_damaged = bool(torn)
        for line in complete.split(b"\n") if complete else ():
            doc = _loads(line)
            if not isinstance(doc, dict):
                self._journal_damaged = True
                continue
            try:
                if doc.get("gen") != self._generation:
                    continue  # written against an older snapshot (or by something else)
                files = doc["files"]
                changes = {
                    rel: None if row is None else _Entry.from_row(row) for rel, row in files.items()
                }
            except (ValueError, TypeError, KeyError, AttributeError):
                self._journal_damaged = True
                continue
            for rel, entry in changes.items():
                if entry is None:
                    entries.pop(rel, None)
                else:
                    entries[rel] = entry

    # -- save --------------------------------------------------------------------------------

    def _save(
        self, entries: dict[str, _Entry], changed: list[str] | None, removed: set[str]
    ) -> None:
        """Record `entries`: the changed and removed files as one journal line when the loaded
        snapshot is still current, or else (and when `changed` is None) a new snapshot."""
        try:
            if changed is not None and self._journal_fits(changed, removed):
                self._append(entries, changed, removed)
            else:
                self._write_snapshot(entries)
        except OSError as exc:
            self._cached = None
            raise StateError(
                f"cannot write the rollout index {self.index_path}: {exc.strerror or exc}",
                error_code="state_unwritable",
            ) from exc

    def _journal_fits(self, changed: list[str], removed: set[str]) -> bool:
        if self._cached is None or self._generation is None or self._journal_damaged:
            return False
        snapshot, journal = self._cached[0]
        if journal is not None and journal[2] > max(
            _JOURNAL_MIN, self._snapshot_size // _JOURNAL_SHARE
        ):
            return False
        # Someone else wrote a snapshot since: a line against ours would be ignored anyway.
        return _stat_key(self.index_path) == snapshot and bool(changed or removed)

    def _append(self, entries: dict[str, _Entry], changed: list[str], removed: set[str]) -> None:
        files: dict[str, Any] = {rel: entries[rel].to_row() for rel in changed}
        files.update(dict.fromkeys(removed))
        append_record(self.journal_path, {"gen": self._generation, "files": files}, durable=False)
        if self._cached is not None:
            self._cached = ((self._cached[0][0], _stat_key(self.journal_path)), entries)

    def _write_snapshot(self, entries: dict[str, _Entry]) -> None:
        # os.urandom, not `secrets`: the same source, without importing base64 and hmac.
        generation = os.urandom(8).hex()
        head = json.dumps(
            {"schema": INDEX_SCHEMA, "codex_home": str(self.codex_home), "generation": generation}
        )
        written = 0

        def chunks() -> Iterator[bytes]:
            # A line of up to `_ROWS_PER_LINE` files per write, each line one `json.dumps`
            # (one call per file cost twice as much): the document is never whole in memory,
            # however many rollouts the home holds.
            nonlocal written
            rels = list(entries)
            opening = f'{head[:-1]}, "files": {{'
            for at in range(0, len(rels), _ROWS_PER_LINE):
                batch = {rel: entries[rel].to_row() for rel in rels[at : at + _ROWS_PER_LINE]}
                chunk = f"{opening}\n{json.dumps(batch, separators=(',', ':'))[1:-1]}".encode()
                opening = ","
                written += len(chunk)
                yield chunk
            chunk = f"{opening}\n}}}}".encode() if not rels else b"\n}}"
            written += len(chunk)
            yield chunk

        ensure_private_dir(self.index_path.parent)
        # A cache of progress: after a power cut a lost write means one re-read, never a wrong
        # fact, so it is not worth an fsync on every status refresh.
        atomic_write_chunks(self.index_path, chunks(), mode=PRIVATE_FILE_MODE, durable=False)
        # The old journal belongs to the old generation; a reader between the rename and this
        # unlink ignores its lines.
        with contextlib.suppress(FileNotFoundError):
            self.journal_path.unlink()
        snapshot = _stat_key(self.index_path)
        self._generation = generation
        self._snapshot_size = written
        self._journal_damaged = False
        self._cached = None if snapshot is None else ((snapshot, None), entries)

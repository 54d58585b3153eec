"""The rollout index: the on-disk record of how far each rollout file has been read.

What this module owns:
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
  * `_Entry` (one file's record, with the caches a rescan reuses while it is unchanged),
    `_tail_hash`, and `_IndexFile`, the load / parse / save of the index that
    `RolloutScanner` inherits.

What it must never do:
  * hold a rollout path other than relative to the home, or any text: an entry is identity,
    offsets, a hash and the accumulator's compact form;
  * rebuild over an index whose schema it does not know (a newer loopx-chat may own it), or
    write anywhere but `index_path`, in a folder it makes (or tightens to) 0700.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from loopx_chat.codex.rollouts.accumulator import _Acc
from loopx_chat.codex.rollouts.fields import _need_int, _pick_int
from loopx_chat.codex.rollouts.records import ThreadFacts
from loopx_chat.errors import StateError
from loopx_chat.fsutil import PRIVATE_FILE_MODE, atomic_write_bytes, ensure_private_dir

INDEX_SCHEMA = "loopx_chat_rollout_index_v1"

# How many bytes before the consumed offset `_Entry.tail` hashes.
_TAIL_BYTES = 64
_HEX = re.compile(r"[0-9a-f]{0,64}")


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


class _IndexFile:
    """Load and save of the index at `index_path`, written for `codex_home`.

    `_cached` is the index as this object last wrote or read it, keyed by the file's identity.
    `RolloutScanner` inherits these methods and sets the three attributes.
    """

    codex_home: Path
    index_path: Path
    _cached: tuple[tuple[int, int, int, int], dict[str, _Entry]] | None

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

"""Scanning one Codex home: walking its rollouts and continuing each file from the index.

What this module owns:
  * finding `<home>/sessions/**/rollout-*.jsonl` and `<home>/archived_sessions/**/rollout-*.jsonl`
    (no symlinks followed), deciding per file whether it is unchanged, appended to, moved
    (same inode, new path) or to be read again from the start, and dropping files that
    disappeared;
  * `RolloutScanner.scan()`, the incremental scan that feeds changed files to the reader and
    saves the index, the per-thread facts it returns (a thread found in two files keeps the
    newer), the `HostPosition`, and `scan_home_facts` / `thread_facts_for`.

What it must never do:
  * follow a symlink, write to the home, or keep a rollout path outside the index;
  * parse lines itself (`parse` does) or know the index's on-disk form (`index` does).
"""

from __future__ import annotations

import gc
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from loopx_chat.codex.rollouts.accumulator import _Acc
from loopx_chat.codex.rollouts.index import _Entry, _IndexFile, _tail_hash
from loopx_chat.codex.rollouts.layout import ARCHIVED_FOLDER, ROLLOUT_FOLDERS
from loopx_chat.codex.rollouts.parse import _FileReader
from loopx_chat.codex.rollouts.records import HostPosition, ScanResult, ThreadFacts

_NAME_UUID = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$"
)


def _thread_id_from_name(name: str) -> str | None:
    match = _NAME_UUID.search(name)
    return match.group(1).lower() if match else None


# Folders are opened, not followed: a symlink inside the home (or a file named like a folder)
# fails to open and is skipped. The two roots themselves may be symlinks, as before.
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_SUBDIR_OPEN = _DIR_OPEN | os.O_NOFOLLOW


def _walk(home: Path) -> list[tuple[str, bool, os.stat_result]]:
    """(path relative to the home, archived, lstat) of every rollout file, no symlinks.

    A rescan's floor is this walk: one `fstatat` per rollout, relative to its open folder (no
    path lookup from the root each time), and no system call at all for other names until
    they are tried as folders.
    """
    found: list[tuple[str, bool, os.stat_result]] = []
    root = str(home)
    for top in ROLLOUT_FOLDERS:
        archived = top == ARCHIVED_FOLDER
        stack = [(f"{top}/", _DIR_OPEN)]
        while stack:
            folder, flags = stack.pop()
            try:
                fd = os.open(f"{root}/{folder}", flags)
            except OSError:
                continue  # missing, a file, a symlink below the root, or unreadable
            try:
                names = os.listdir(fd)
            except OSError:
                names = []
            try:
                for name in names:
                    if name.startswith("rollout-") and name.endswith(".jsonl"):
                        try:
                            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        except FileNotFoundError:
                            continue  # removed while we listed it
                        if stat.S_ISREG(st.st_mode):
                            found.append((folder + name, archived, st))
                            continue
                        if not stat.S_ISDIR(st.st_mode):
                            continue
                    stack.append((f"{folder}{name}/", _SUBDIR_OPEN))
            finally:
                os.close(fd)
    return found


class RolloutScanner(_IndexFile):
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
        # The index as this object last wrote or read it (see `_IndexFile._cached`), so a
        # long-lived scanner does not re-parse its own index on every rescan.
        self._cached = None

    # -- scan --------------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        """Read what was appended since the last scan and return the facts of every thread."""
        # A scan builds thousands of small records (entries, accumulators, facts), none of
        # them cyclic: the cycle collector would only walk them again and again (about a
        # tenth of a warm scan). It runs again as soon as the scan is over.
        collecting = gc.isenabled()
        gc.disable()
        try:
            entries, notes = self._load()
            try:
                return self._scan(entries, notes)
            except BaseException:
                # Accumulators may be half advanced; make the next scan start from the disk
                # index.
                self._cached = None
                raise
        finally:
            if collecting:
                gc.enable()

    def _scan(self, old: dict[str, _Entry], notes: list[str]) -> ScanResult:
        entries: dict[str, _Entry] = {}
        changed: list[str] = []  # paths whose entry is new or different
        bytes_read = 0
        files_reread = 0
        corrupt = 0
        # A file moved between folders (thread/archive renames it) keeps its inode: continue
        # it from where it was rather than reading it again.
        by_inode: dict[tuple[int, int], _Entry] | None = None
        root = str(self.codex_home)
        for rel, archived, st in _walk(self.codex_home):
            entry = old.get(rel)
            if entry is None:
                if by_inode is None:
                    by_inode = {(e.dev, e.ino): e for e in old.values()}
                moved = by_inode.get((st.st_dev, st.st_ino))
                # A copy: if the old path still exists too, each path keeps its own state.
                if moved is not None:
                    entry = moved.copy()
                    changed.append(rel)
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
                    changed.append(rel)
                entries[rel] = entry
                continue  # unchanged since last time (a pending partial line stays pending)
            try:
                fd = os.open(f"{root}/{rel}", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
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
            if not changed or changed[-1] != rel:
                changed.append(rel)
        # Paths in the old index and not listed now: their files disappeared (or moved).
        removed = set(old).difference(entries)
        if notes or (self._generation is None and entries):
            # No usable snapshot yet: write a whole one. An empty home never scanned has
            # nothing to remember, and a read (`codex facts`, `status`) writes no state for it.
            self._save(entries, None, removed)
        elif changed or removed:
            self._save(entries, changed, removed)
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
        entry.settle()  # a row per rollout file lives as long as the scanner: keep the facts
        other = found.get(facts.thread_id)
        if other is None or _rank(entry, facts) > _rank(*other):
            found[facts.thread_id] = (entry, facts)
    return {tid: found[tid][1] for tid in sorted(found)}

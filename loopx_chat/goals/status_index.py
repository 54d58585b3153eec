"""Each goal's status row, computed once per change of the files it is folded from.

Owns the incremental status: for each goal, a signature of every file its row is read from
(the goal's `*.jsonl` records; for each of its sessions, `session.json` and every turn file:
name, inode, size, mtime_ns) and the row folded from them, each file read once. The entry
keeps a digest of the signature, not the stats, so it does not grow with every session and
turn file of its goal (issue 37). A look whose signatures all match costs a `stat` per file,
a digest per goal and no fold; a goal whose signature moved is folded again, alone. A goal's
entry is a function of that goal's files only (their problems included: an unreadable record
gives the goal's problem row), so an entry never needs another goal's files to be right. The
one exception is a session whose `session.json` cannot be read: it can no longer say its
goal, so the control-event log says it (goals/unreadable.py); such a session's stat and
error code, and the control log's stat, go into the signature of the goal it is attributed
to, so that goal is folded again when the session's file or the log changes (and the log is
read only while some session is unreadable). A session no event names is kept as
`unattributed`.

The CLI keeps the entries in a persisted index (`<state>/index/status.json`, 0600 in a 0700
folder, written by atomic rename). It is never trusted blindly: an entry is used only when
its goal's signature is unchanged now, and an index that is torn, corrupt, of another
version or of another Codex home is ignored and rebuilt. The service keeps the entries in
memory (`StatusIndex` without a path) and looks again when it wrote, or after its sweep
interval for another process's writes.

What it never does: write a goal or session record, read the host's rollouts (the host's
part of a row is added by `status.collect_status` on every look), or keep anything in the
index the status document would not show (rows are already compact).

Limits: a change is seen through inode, size or mtime. A rewrite in place that keeps the
size within one tick of the file system's clock is missed until the file changes again;
loopx-chat's own writers append (size) or rename (inode), so only a hand edit can do that.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import (
    GATE_EVENT_SCHEMA,
    GATES_FILE,
    HANDOFF_SCHEMA,
    HANDOFFS_FILE,
    Gate,
    GateStore,
    fold_gates,
    handoffs_from,
    is_valid_goal_id,
)
from loopx_chat.goals.status_render import RowTexts
from loopx_chat.goals.status_row import (
    displayed_blocker_refs,
    goal_problem,
    goal_status,
    record_summary,
)
from loopx_chat.state.jsonl import read_records
from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SESSION_FILE, SessionStore, StoreProblem

if TYPE_CHECKING:
    from loopx_chat.goals.goal_runs import GoalRun
    from loopx_chat.goals.unreadable import Unreadable, UnreadableByGoal

INDEX_SCHEMA = "loopx_chat_status_index_v2"
INDEX_FILE = ("index", "status.json")

FileStat = tuple[str, int, int, int]  # name, inode, size, mtime_ns
Signature = tuple[FileStat, ...]
# What an entry keeps of its signature: a digest of it, so a goal's entry does not grow with
# every session and turn file the goal has (the stats are taken again at every look anyway).
Digest = str
# Per session between looks: its session.json's inode, size and mtime_ns, its goal and its
# creation time, flat (the file's name is known from the key).
SessionRow = tuple[int, int, int, str, str]
StaleInput = tuple[tuple[str, ...], dict[str, int], str | None]
# A goal's file name -> (its stat, its raw-material findings): the audit reads what changed.
AuditCache = dict[str, tuple[FileStat, list[str]]]


@dataclass(frozen=True)
class PageFacts:
    """What the page's card shows beside the row, folded with it (never persisted)."""

    gates: tuple[Gate, ...]
    next_action: str | None
    proposals: tuple[str, ...]
    run: GoalRun | None
    host_loop_seen: dict[str, Any] | None
    host_loop_paused: dict[str, Any] | None


@dataclass(frozen=True)
class GoalEntry:
    """One goal's row (without the host's part) and what it was folded from."""

    goal_id: str
    signature: Digest  # of the files folded (`digest`), compared with the next look's
    row: dict[str, Any]
    stale: StaleInput | None  # what the host comparison needs; None for a problem row
    finished: bool  # the latest run was accepted (closed)
    activity_ns: int  # the newest mtime among the goal's files (-1: it has none)
    ran: bool = False  # it has a run on Codex's loop, or a loop loopx-chat did not start
    page: PageFacts | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "row": self.row,
            "stale": None
            if self.stale is None
            else [list(self.stale[0]), self.stale[1], self.stale[2]],
            "finished": self.finished,
            "activity_ns": self.activity_ns,
            "ran": self.ran,
        }

    @classmethod
    def from_json(cls, goal_id: str, data: Any) -> GoalEntry:
        """An entry as persisted; ValueError/TypeError/KeyError for anything malformed."""
        signature = data["signature"]
        if not isinstance(signature, str):
            raise ValueError("signature")
        row = data["row"]
        stale = data["stale"]
        if not isinstance(row, dict) or row.get("goal_id") != goal_id:
            raise ValueError("row")
        if stale is not None:
            threads, turns, last = stale
            if not isinstance(turns, dict) or not (last is None or isinstance(last, str)):
                raise ValueError("stale")
            stale = (
                tuple(str(t) for t in threads),
                {str(k): int(v) for k, v in turns.items()},
                last,
            )
        if not isinstance(data["finished"], bool) or not isinstance(data["ran"], bool):
            raise ValueError("finished")
        activity = int(data["activity_ns"])
        return cls(goal_id, signature, row, stale, data["finished"], activity, data["ran"])


def digest(signature: Signature) -> Digest:
    """The signature as an entry keeps it: 16 bytes of BLAKE2b over its text (the stats are
    ints and names, so their repr is one text per signature, the same in every process)."""
    try:
        # hashlib's own BLAKE2b, without the OpenSSL bindings `import hashlib` loads (2.4 ms
        # of every `status` with a goal, which needs nothing else of hashlib).
        from _blake2 import blake2b
    except ImportError:  # a Python built without it
        from hashlib import blake2b

    return blake2b(repr(signature).encode(), digest_size=16).hexdigest()


def _stat(path: str, name: str) -> FileStat | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (name, st.st_ino, st.st_size, st.st_mtime_ns)


def _goal_file_stats(folder: str) -> list[FileStat]:
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".jsonl"))
    except OSError:
        return []
    found = (_stat(os.path.join(folder, n), n) for n in names)
    return [s for s in found if s is not None]


def _turn_stats(session_dir: str, session_id: str) -> list[FileStat]:
    folder = os.path.join(session_dir, "turns")
    try:
        names = sorted(
            e.name for e in os.scandir(folder) if e.name.endswith(".json") and e.name[0] != "."
        )
    except OSError:
        return []
    found = (_stat(os.path.join(folder, n), f"{session_id}/turns/{n}") for n in names)
    return [s for s in found if s is not None]


class _GoalFiles:
    """A goal's record files for one fold: each read once, its records or its error kept."""

    def __init__(self, folder: Path, names: Sequence[str]) -> None:
        self.folder = folder
        self.names = names
        self._read: dict[str, tuple[str | None, list[dict[str, Any]] | StateError]] = {}

    def records(self, name: str, schema: str) -> list[dict[str, Any]]:
        got = self._read.get(name)
        if got is None or got[0] != schema:
            try:
                got = (schema, read_records(self.folder / name, schema))
            except StateError as exc:
                got = (schema, exc)
            self._read[name] = got
        if isinstance(got[1], StateError):
            raise got[1]
        return got[1]

    def raw_material(self, signature: Signature, audited: AuditCache) -> list[str]:
        """The raw-material audit (`raw_material_in`) of every file. A file whose stat is
        the one in `audited` is not audited again (nor read, when no other reader needed
        it); a file already read is not read again. `audited` is left holding this fold's
        files only."""
        from loopx_chat.goals.goal_ledger import raw_findings
        from loopx_chat.goals.raw_audit import MAX_FOUND

        stats = {s[0]: s for s in signature}
        kept: AuditCache = {}
        found: list[str] = []
        for name in self.names:
            stat = stats[name]
            known = audited.get(name)
            if known is not None and known[0] == stat:
                findings = known[1]
            else:
                got = self._read.get(name)
                records: list[dict[str, Any]] | None
                if got is not None and not isinstance(got[1], StateError):
                    records = got[1]
                else:
                    try:
                        records = read_records(self.folder / name)
                    except StateError:
                        records = None
                findings = raw_findings(name, records)
            kept[name] = (stat, findings)
            found.extend(findings)
        audited.clear()
        audited.update(kept)
        return found[:MAX_FOUND]


def fold_goal(
    goal_id: str,
    *,
    store: SessionStore,
    goals: GateStore,
    codex_home: str,
    sessions: Sequence[SessionRecord],
    signature: Signature,
    audited: AuditCache | None = None,
    unreadable: Sequence[Unreadable] = (),
) -> GoalEntry:
    """The goal's entry from its files, each read once (its problem row if one is
    unreadable). `sessions` are the goal's own sessions, oldest first; `audited` keeps each
    file's raw-material findings by its stat across folds; `unreadable` are the sessions
    attributed to the goal that cannot be read (each a fail-closed owner gate on the row)."""

    activity = max((s[3] for s in signature), default=-1)  # -1: no file, nothing known
    names = [s[0] for s in signature if "/" not in s[0] and s[0].endswith(".jsonl")]
    files = _GoalFiles(goals.goals_dir / goal_id, names)
    try:
        audit = {} if audited is None else audited
        return _fold(
            goal_id, files, store, codex_home, sessions, signature, activity, audit, unreadable
        )
    except StateError as exc:
        # One goal's unreadable record never hides the others.
        return GoalEntry(
            goal_id, digest(signature), goal_problem(goal_id, exc), None, False, activity
        )


def _fold(
    goal_id: str,
    files: _GoalFiles,
    store: SessionStore,
    codex_home: str,
    sessions: Sequence[SessionRecord],
    signature: Signature,
    activity: int,
    audited: AuditCache,
    unreadable: Sequence[Unreadable],
) -> GoalEntry:
    from loopx_chat.goals.goal_facts import facts_from_records
    from loopx_chat.goals.goal_ledger import (
        GOAL_STATE_SCHEMA,
        LIFECYCLE_SCHEMA,
        PROPOSAL_SCHEMA,
        REWARD_SCHEMA,
        current_rewards_from,
        fold_proposals,
        goal_state_from,
        stopped_from,
    )
    from loopx_chat.goals.goal_runs import (
        HOST_LOOP_EVENT,
        HOST_LOOP_PAUSED,
        RUN_SCHEMA,
        fold_runs,
        latest_event,
        run_answer_gate,
    )
    from loopx_chat.goals.unreadable import unreadable_fields, with_unreadable

    turns = [t for s in sessions for t in store.list_turns(s.session_id)]
    state = goal_state_from(goal_id, files.records("goal_state.jsonl", GOAL_STATE_SCHEMA))
    run_events = files.records("runs.jsonl", RUN_SCHEMA)
    runs = fold_runs(run_events)
    latest = runs[-1] if runs else None
    gates = fold_gates(goal_id, files.records(GATES_FILE, GATE_EVENT_SCHEMA))
    handoffs = handoffs_from(goal_id, files.records(HANDOFFS_FILE, HANDOFF_SCHEMA))
    facts = facts_from_records(
        goal_id,
        sessions=sessions,
        turns=turns,
        gates=gates,
        handoffs=handoffs,
        codex_home=codex_home,
        stopped=stopped_from(files.records("lifecycle.jsonl", LIFECYCLE_SCHEMA)),
        token_budget=state.token_budget if state else None,
        run_gate=run_answer_gate(latest, list(state.acceptance) if state else []),
        raw_material=files.raw_material(signature, audited),
    )
    facts = with_unreadable(facts, unreadable)
    row = goal_status(facts)
    proposals = fold_proposals(files.records("proposals.jsonl", PROPOSAL_SCHEMA))
    memory = _memory(goal_id, files)
    row.update(
        record_summary(
            state,
            current_rewards_from(files.records("rewards.jsonl", REWARD_SCHEMA)),
            proposals,
            memory,
        )
    )
    row.update(unreadable_fields(unreadable))
    row["shown_blocker_refs"] = displayed_blocker_refs(
        facts, row["projection"].get("first_screen", {})
    )
    page = PageFacts(
        gates=tuple(gates),
        next_action=handoffs[-1].next_action if handoffs else None,
        proposals=tuple(str(p.get("title", "")) for p in proposals if p["status"] == "advisory"),
        run=latest,
        host_loop_seen=latest_event(run_events, HOST_LOOP_EVENT),
        host_loop_paused=latest_event(run_events, HOST_LOOP_PAUSED),
    )
    stale = (facts.thread_ids, dict(facts.recorded_turns), facts.last_recorded_at)
    finished = latest is not None and latest.state == "closed"
    ran = latest is not None or page.host_loop_seen is not None
    return GoalEntry(goal_id, digest(signature), row, stale, finished, activity, ran, page)


def _memory(goal_id: str, files: _GoalFiles) -> dict[str, Any] | None:
    from loopx_chat.goals.memory_input import (
        MEMORY_INPUT_FILE,
        MEMORY_INPUT_SCHEMA,
        current_memory_input,
        memory_field_from,
    )

    return memory_field_from(
        goal_id, current_memory_input(files.records(MEMORY_INPUT_FILE, MEMORY_INPUT_SCHEMA))
    )


class StatusIndex:
    """The goals' entries, brought up to date by `refresh` (a stat per file; a fold for
    each goal whose files changed). With `path`, entries are loaded from and saved to the
    persisted index; without, they live as long as this object (the service)."""

    def __init__(
        self,
        store: SessionStore,
        goals: GateStore,
        codex_home: str,
        *,
        path: Path | None = None,
    ) -> None:
        self.store = store
        self.goals = goals
        self.codex_home = codex_home
        self.path = path
        self.entries: dict[str, GoalEntry] = {}
        # Per session: the stat of its session.json, its goal and its creation time (flat).
        self._sessions: dict[str, SessionRow] = {}
        # Sessions whose session.json cannot be read: its stat and error code, by session id.
        self._problems: dict[str, tuple[FileStat, str]] = {}
        # Which goal the control log names each unreadable session with, and what that was
        # read from (the log's stat and the unreadable sessions), so the log is read again
        # only when one of them moved.
        self._attributed: tuple[Any, UnreadableByGoal] | None = None
        self._audited: dict[str, AuditCache] = {}  # by goal
        self.generation = 0  # moves whenever an entry is added, folded again or dropped
        self.folded = 0  # goals folded by the last refresh (for tests and benches)
        self._saved_generation = -1
        # Each row's `--json` text, reused while its signature and host part hold (the CLI).
        self.texts: RowTexts = {}
        self._saved_texts: RowTexts = {}
        if path is not None:
            self.entries, self.texts = load_index(path, codex_home)
            self._saved_texts = self.texts
            self._saved_generation = 0 if self.entries else -1

    def _session_ids(self) -> dict[str, list[str]]:
        """Each goal's readable sessions, oldest first. Only a session's stat, goal and
        creation time are kept between looks (its record is read again by the fold that
        needs it); `session.json` is parsed again only when its stat moved. An unreadable
        one is left out, as `SessionStore.list` reports it."""
        root = str(self.store.sessions_dir)
        try:
            names = sorted(
                e.name
                for e in os.scandir(root)
                if e.name[0] != "." and e.is_dir(follow_symlinks=False)
            )
        except OSError:
            names = []
        seen: dict[str, SessionRow] = {}
        problems: dict[str, tuple[FileStat, str]] = {}
        for name in names:
            try:
                st = os.stat(os.path.join(root, name, SESSION_FILE), follow_symlinks=False)
            except OSError:
                continue  # a folder mid-creation, or one holding only a lock file
            cached = self._sessions.get(name)
            if cached is not None and cached[:3] == (st.st_ino, st.st_size, st.st_mtime_ns):
                seen[name] = cached
                continue
            try:
                record = self.store.load(name)
            except StateError as exc:
                if exc.error_code != "session_not_found":  # as `SessionStore.list` says
                    sig = (f"{name}/{SESSION_FILE}", st.st_ino, st.st_size, st.st_mtime_ns)
                    problems[name] = (sig, exc.error_code)
                continue
            # The goal's name once for all its sessions, not a copy per row.
            goal = sys.intern(record.goal_id)
            seen[name] = (st.st_ino, st.st_size, st.st_mtime_ns, goal, record.created_at)
        self._sessions = seen
        self._problems = problems
        by_goal: dict[str, list[str]] = {}
        for name in sorted(seen, key=lambda n: (seen[n][4], n)):
            by_goal.setdefault(seen[name][3], []).append(name)
        return by_goal

    def _records(self, session_ids: Sequence[str]) -> list[SessionRecord]:
        records = []
        for sid in session_ids:
            try:
                records.append(self.store.load(sid))
            except StateError:
                continue  # gone or unreadable since the listing: left out, as it would be
        return records

    def _unreadable(self) -> tuple[UnreadableByGoal, FileStat | None]:
        """The unreadable sessions on the goals the control log names them with, and the
        log's stat (None while every session can be read: the log is then not read)."""
        from loopx_chat.goals.unreadable import UnreadableByGoal, attribute

        if not self._problems:
            self._attributed = None
            return UnreadableByGoal({}, ()), None
        log_stat = _stat(str(self.goals.control.path), "events/control.jsonl")
        key = (log_stat, sorted((sid, code) for sid, (_, code) in self._problems.items()))
        if self._attributed is None or self._attributed[0] != key:
            problems = [
                StoreProblem(sid, code, "") for sid, (_, code) in sorted(self._problems.items())
            ]
            self._attributed = (key, attribute(problems, self.goals))
        return self._attributed[1], log_stat

    @property
    def unattributed(self) -> tuple[Unreadable, ...]:
        """Unreadable sessions no event names with a goal (as of the last refresh)."""
        return () if self._attributed is None else self._attributed[1].unattributed

    def unreadable_records(self) -> list[dict[str, str]]:
        """The status document's `unreadable_records`: each unattributed session in words."""
        return [r.to_dict() for r in self.unattributed]

    def refresh(self, only: str | None = None) -> int:
        """Bring every goal's entry (or only `only`'s) up to date; the new generation."""
        by_goal = self._session_ids()
        orphans = self.unattributed
        unreadable, log_stat = self._unreadable()
        if only is not None:
            ids = [only]
        else:
            named = {g for g in by_goal if is_valid_goal_id(g)}
            ids = sorted(named | set(self.goals.goal_ids()) | set(unreadable.by_goal))
        goals_root = str(self.goals.goals_dir)
        sessions_root = str(self.store.sessions_dir)
        folded = 0
        fresh: dict[str, GoalEntry] = {} if only is None else dict(self.entries)
        for goal_id in ids:
            stats = _goal_file_stats(os.path.join(goals_root, goal_id))
            for sid in by_goal.get(goal_id, ()):
                ino, size, mtime = self._sessions[sid][:3]
                stats.append((f"{sid}/{SESSION_FILE}", ino, size, mtime))
                stats.extend(_turn_stats(os.path.join(sessions_root, sid), sid))
            broken = unreadable.by_goal.get(goal_id, ())
            for record in broken:
                stat, code = self._problems[record.session_id]
                stats.append((f"{stat[0]}!{code}", *stat[1:]))
            if broken and log_stat is not None:
                stats.append(log_stat)
            signature = tuple(stats)
            entry = self.entries.get(goal_id)
            if entry is None or entry.signature != digest(signature):
                entry = fold_goal(
                    goal_id,
                    store=self.store,
                    goals=self.goals,
                    codex_home=self.codex_home,
                    sessions=self._records(by_goal.get(goal_id, ())),
                    signature=signature,
                    audited=self._audited.setdefault(goal_id, {}),
                    unreadable=broken,
                )
                folded += 1
            fresh[goal_id] = entry
        if folded or len(fresh) != len(self.entries) or orphans != unreadable.unattributed:
            self.generation += 1
        self.entries = fresh
        self.folded = folded
        if only is None:
            self._audited = {g: a for g, a in self._audited.items() if g in fresh}
        return self.generation

    def save(self) -> None:
        """Persist the entries when they changed since loaded or saved (a cache: a failure
        to write is not an error, the next status folds again)."""
        if self.path is None or (
            self._saved_generation == self.generation and self._saved_texts == self.texts
        ):
            return
        if not self.entries and not self.path.exists():
            return  # no goal yet: nothing to keep, and a first read leaves no file
        save_index(self.path, self.codex_home, self.entries, self.texts)
        self._saved_generation, self._saved_texts = self.generation, self.texts

    def bare_rows(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Each goal's signature (as JSON) and row as folded: what `status_text` reuses
        a row's text by."""
        return {g: (e.signature, e.row) for g, e in self.entries.items()}


def _index_identity() -> dict[str, Any]:
    from loopx_chat import __version__

    return {"schema_version": INDEX_SCHEMA, "package_version": __version__}


def load_index(path: Path, codex_home: str) -> tuple[dict[str, GoalEntry], RowTexts]:
    """The persisted entries and row texts, or none when the file is missing, torn, corrupt,
    of another version or of another Codex home (it is then rebuilt)."""
    from loopx_chat.state.safe_read import JOURNAL_LIMIT, read_regular

    try:
        data = json.loads(read_regular(path, limit=JOURNAL_LIMIT))
        if not isinstance(data, dict) or data.get("codex_home") != codex_home:
            return {}, {}
        if any(data.get(k) != v for k, v in _index_identity().items()):
            return {}, {}
        entries = {
            str(gid): GoalEntry.from_json(str(gid), item)
            for gid, item in data["goals"].items()
            if is_valid_goal_id(str(gid))
        }
        texts: RowTexts = {}
        for gid, (signature, extra, text) in data["texts"].items():
            if not all(isinstance(v, str) for v in (signature, extra, text)):
                raise ValueError("texts")
            texts[str(gid)] = (signature, extra, text)
        return entries, texts
    except (OSError, StateError, ValueError, TypeError, KeyError, AttributeError):
        return {}, {}


def save_index(path: Path, codex_home: str, entries: dict[str, GoalEntry], texts: RowTexts) -> None:
    from loopx_chat.state.private_files import (
        PRIVATE_FILE_MODE,
        atomic_write_bytes,
        ensure_private_dir,
    )

    doc = {
        **_index_identity(),
        "codex_home": codex_home,
        "goals": {gid: e.to_json() for gid, e in entries.items()},
        "texts": texts,
    }
    body = json.dumps(doc, separators=(",", ":")).encode()
    try:
        ensure_private_dir(path.parent, within=path.parent.parent)
        atomic_write_bytes(path, body, mode=PRIVATE_FILE_MODE, durable=False)
    except (OSError, StateError):
        return


def index_path(state_root: Path) -> Path:
    return state_root.joinpath(*INDEX_FILE)

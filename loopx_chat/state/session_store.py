"""Owner-local session state: `<state>/sessions/<session_id>/session.json` plus compact turns.

Owns where state lives (platformdirs, `--state-dir`, `LOOPX_CHAT_STATE_DIR`), atomic writes
with 0600 files in 0700 folders, the per-session lock (an `flock` across processes plus an
in-process lock), and the refusal to read files it does not understand. It never repairs,
rewrites or deletes a file it could not read: a corrupt or future-schema file is reported
with the path and left byte-for-byte as it was.

Readers never take the lock: every write is a rename, so a reader sees old or new bytes.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.state.file_lock import FileLock
from loopx_chat.state.private_files import (
    PRIVATE_FILE_MODE,
    atomic_write_bytes,
    check_own_root,
    ensure_private_dir,
    state_read,
    state_write,
)
from loopx_chat.state.safe_read import load_state_json, read_regular
from loopx_chat.state.session_records import (
    SESSION_SCHEMA_VERSION,
    TURN_SCHEMA_VERSION,
    SessionRecord,
    TurnRecord,
    validate_session_id,
)
from loopx_chat.state.used_table import UsedTable

SESSION_FILE = "session.json"
LOCK_FILE = ".lock"
# Sessions whose lock objects a store keeps while no worker is in their lock (the hot ones
# are reused without building a file lock again); older ones are dropped.
IDLE_LOCKS = 32


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class StoreProblem:
    """A session folder that could not be read; listed instead of crashing the listing."""

    session_id: str
    error_code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"session_id": self.session_id, "error_code": self.error_code, "error": self.message}


@dataclass(frozen=True)
class SessionListing:
    sessions: tuple[SessionRecord, ...]
    problems: tuple[StoreProblem, ...]


def _encode(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n").encode("utf-8")


def _decode_file(path: Path | str, expected_schema: str) -> dict[str, Any]:
    """Read and check a versioned JSON file; raise state_corrupt / state_schema_unsupported.
    FileNotFoundError passes through (the caller knows what a missing file means)."""
    data = load_state_json(read_regular(path), path)
    if not isinstance(data, dict):
        raise StateError(
            f"{path} does not hold a JSON object; it was left untouched",
            error_code="state_corrupt",
        )
    schema = data.get("schema_version")
    if schema != expected_schema:
        raise StateError(
            f"{path} has schema_version {schema!r}; this loopx-chat reads only "
            f"{expected_schema!r}. It was left untouched — upgrade loopx-chat to read it",
            error_code="state_schema_unsupported",
        )
    return data


@dataclass
class _SessionLocks:
    """One session's locks in this store: the in-process one, the file lock across
    processes (built on first use), and whether this store holds the file lock now (only
    the holder of `worker` reads or changes `held`)."""

    worker: threading.RLock = field(default_factory=threading.RLock)
    file: FileLock | None = None
    held: bool = False


class SessionStore:
    """Sessions and their compact turns under one owner-local root."""

    def __init__(self, root: Path, *, clock: Callable[[], str] = utc_now) -> None:
        check_own_root(root)  # a state dir of another user: refused before any read
        self.root = root
        self.sessions_dir = root / "sessions"
        self._clock = clock
        # Each session's locks, kept while a worker is in its lock and for the IDLE_LOCKS
        # most recently used sessions after, so a long-running service keeps nothing per
        # session forever (`used_table`).
        self._locks: UsedTable[_SessionLocks] = UsedTable(_SessionLocks, IDLE_LOCKS)

    # -- paths -------------------------------------------------------------------------
    def session_dir(self, session_id: str) -> Path:
        # Joined as text: pathlib interns a part it is given whole, so `sessions_dir / id`
        # made the caller's id string itself an entry of the interpreter's interned-string
        # table for as long as anything kept it (a table key), one per session ever seen;
        # split out of the joined path, the part is a copy that goes with the Path.
        return Path(os.path.join(self.sessions_dir, validate_session_id(session_id)))

    def session_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / SESSION_FILE

    def now(self) -> str:
        return self._clock()

    # -- locking -----------------------------------------------------------------------
    @contextmanager
    def lock(self, session_id: str) -> Iterator[None]:
        """Exclusive writer lock for one session, across workers (OS threads) and processes."""
        folder = self.session_dir(session_id)
        with self._locks.using(session_id) as locks, locks.worker:
            if locks.held:
                # Re-entered by the worker that holds it (a mutate inside a ledger step):
                # the file lock is ours already, and taking it again costs a turn's time.
                yield
                return
            if locks.file is None:
                with state_write(folder):
                    ensure_private_dir(folder, within=self.root)
                locks.file = FileLock(folder / LOCK_FILE)
            with state_write(folder / LOCK_FILE):
                locks.file.acquire()
            locks.held = True
            try:
                yield
            finally:
                locks.held = False
                locks.file.release()

    # -- sessions ----------------------------------------------------------------------
    def create(self, record: SessionRecord) -> SessionRecord:
        record.check_invariants()
        with state_write(self.sessions_dir):
            ensure_private_dir(self.sessions_dir, within=self.root)
        with self.lock(record.session_id):
            path = self.session_path(record.session_id)
            if path.exists():
                raise StateError(
                    f"session {record.session_id} already exists", error_code="session_exists"
                )
            self._write(path, record.to_dict())
        return record

    def load(self, session_id: str) -> SessionRecord:
        return self._load_file(self.session_path(session_id), session_id)

    def _load_file(self, path: Path | str, session_id: str) -> SessionRecord:
        try:
            data = _decode_file(path, SESSION_SCHEMA_VERSION)
        except FileNotFoundError:
            raise StateError(
                f"no session {session_id} in {self.sessions_dir}",
                error_code="session_not_found",
            ) from None
        try:
            record = SessionRecord.from_dict(data)
        except StateError as exc:
            raise StateError(f"{path}: {exc.message}", error_code="state_corrupt") from None
        except (TypeError, ValueError) as exc:
            raise StateError(
                f"{path} is not a valid session record ({exc}); it was left untouched",
                error_code="state_corrupt",
            ) from None
        if record.session_id != session_id:
            # Every command refuses it alike: acting on it would write another session's folder.
            raise StateError(
                f"{path} holds session {record.session_id!r}, not {session_id!r}; it was left "
                "untouched — move the folder aside or rename it to match",
                error_code="state_corrupt",
            )
        return record

    def update(self, session_id: str, **changes: Any) -> SessionRecord:
        return self.mutate(session_id, lambda record: record.with_changes(changes))

    def mutate(
        self,
        session_id: str,
        change: Callable[[SessionRecord], SessionRecord],
        *,
        durable: bool = True,
        current: SessionRecord | None = None,
    ) -> SessionRecord:
        """Read-modify-write under the session lock; `change` may raise to abort.

        `durable=False` skips the fsync: a SIGKILL still leaves the old or the new bytes (the
        rename is atomic and the page cache outlives the process); only a power cut may
        bring back the previous file. See docs/performance.md for which writes may.
        `current` is the record a caller already read while holding this lock (so it is
        still what the file says); without it the file is read here."""
        with self.lock(session_id):
            if current is None:
                current = self.load(session_id)
            updated = change(current)
            if updated == current and updated.extra == current.extra:
                return current
            updated = updated.with_changes({"updated_at": self.now()})
            self._write(self.session_path(session_id), updated.to_dict(), durable=durable)
            return updated

    def list(self) -> SessionListing:
        sessions: list[SessionRecord] = []
        problems: list[StoreProblem] = []
        try:
            with state_read(self.sessions_dir):
                entries = sorted(os.scandir(self.sessions_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return SessionListing((), ())
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                continue
            try:
                sessions.append(self._load_file(os.path.join(entry.path, SESSION_FILE), entry.name))
            except StateError as exc:
                if exc.error_code == "session_not_found":
                    continue  # a folder mid-creation, or one holding only a lock file
                problems.append(StoreProblem(entry.name, exc.error_code, exc.message))
        sessions.sort(key=lambda s: (s.created_at, s.session_id))
        return SessionListing(tuple(sessions), tuple(problems))

    # -- turns -------------------------------------------------------------------------
    def turn_path(self, session_id: str, turn_id: str) -> Path:
        return self.session_dir(session_id) / "turns" / f"{validate_session_id(turn_id)}.json"

    def save_turn(self, turn: TurnRecord, *, durable: bool = True) -> TurnRecord:
        """Write a turn record; callers hold the session lock. `durable` as in `mutate`."""
        self._write(self.turn_path(turn.session_id, turn.turn_id), turn.to_dict(), durable=durable)
        return turn

    def load_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        path = self.turn_path(session_id, turn_id)
        try:
            data = _decode_file(path, TURN_SCHEMA_VERSION)
        except FileNotFoundError:
            raise StateError(
                f"no turn {turn_id} in session {session_id}", error_code="session_not_found"
            ) from None
        try:
            return TurnRecord.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise StateError(
                f"{path} is not a valid turn record ({exc}); it was left untouched",
                error_code="state_corrupt",
            ) from None

    # `builtins.list`: in this class `list` is the method that lists sessions.
    def list_turns(self, session_id: str) -> builtins.list[TurnRecord]:
        folder = self.session_dir(session_id) / "turns"
        try:
            with state_read(folder):
                names = sorted(
                    e.name[: -len(".json")]
                    for e in os.scandir(folder)
                    if e.name.endswith(".json") and not e.name.startswith(".")
                )
        except FileNotFoundError:
            return []
        turns = [self.load_turn(session_id, name) for name in names]
        turns.sort(key=lambda t: (t.created_at, t.turn_id))
        return turns

    def find_turn_by_client_id(self, session_id: str, client_turn_id: str) -> TurnRecord | None:
        for turn in self.list_turns(session_id):
            if turn.client_turn_id == client_turn_id:
                return turn
        return None

    # -- io ----------------------------------------------------------------------------
    def _write(self, path: Path, data: Mapping[str, Any], *, durable: bool = True) -> None:
        with state_write(path):
            ensure_private_dir(path.parent, within=self.root)
            atomic_write_bytes(path, _encode(data), mode=PRIVATE_FILE_MODE, durable=durable)

"""Who uses a Codex home, and exclusive operations that need every user quiet first.

Owns the three levels of the spec's "sharing a host home":
- ordinary open (`home_check`): read-only identity and configuration checks, safe while
  others use the home: it never writes, migrates, starts or stops anything;
- who uses a home (`find_home_users`): the app-servers this controller spawned (a registry
  with pid + process start time, so a reused pid is not mistaken), any process holding files
  open under the home or its sqlite home, any process whose environment names the home where
  the OS lets us read it, and codex processes we may not inspect, reported as `unknown`;
- exclusive operations (`run_exclusive`): hold this state dir's per-home lock so no
  controller here starts an app-server, ask our own idle app-servers to close (a quiesce
  marker our controllers watch), never signal anyone else's process, refuse with
  `home_in_use` while any user remains, else run the command with `CODEX_HOME` set.

The lock is advisory (`flock`): it stops only loopx-chat controllers, so the scan is what
protects the home from Codex Desktop, the CLI or an IDE. Command lines are shown as the
executable and its subcommand only: the rest of an argv can carry a prompt.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loopx_chat.codex.sign_in import SignIn, sign_in_state
from loopx_chat.errors import LoopxChatError, Remedy, StateError
from loopx_chat.home import CodexHomeBinding, home_key
from loopx_chat.pids import start_time
from loopx_chat.state.file_lock import FileLock, LockTimeout
from loopx_chat.state.private_files import (
    PRIVATE_FILE_MODE,
    atomic_write_bytes,
    ensure_private_dir,
    state_write,
)
from loopx_chat.state.safe_read import parse_json, read_regular

# A spawn waits this long for another controller's spawn (a slow app-server start) to finish;
# an exclusive hold (its quiesce marker is up) is refused at once.
SPAWN_GUARD_WAIT_SEC = 120.0
_SPAWN_GUARD_POLL_SEC = 0.2
_EXCLUSIVE_POLL_SEC = 0.25  # how often an exclusive operation looks for the home's users
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


# -- ordinary open ------------------------------------------------------------------------


@dataclass(frozen=True)
class HomeProblem:
    code: str  # an error code of `errors.ERRORS`
    message: str


@dataclass(frozen=True)
class HomeCheck:
    path: str
    source: str
    sqlite_home: str
    sqlite_source: str
    home_exists: bool
    home_is_dir: bool
    sqlite_home_exists: bool
    sqlite_home_is_dir: bool
    config_present: bool
    config_parses: bool | None
    sign_in: SignIn | None  # None: the home's config could not be read
    issues: tuple[HomeProblem, ...]
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.issues

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(p.message for p in self.issues)

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        del doc["issues"]
        return {
            **doc,
            "ok": self.ok,
            "sign_in": self.sign_in.to_dict() if self.sign_in else None,
            "problems": list(self.problems),
            "problem_codes": [p.code for p in self.issues],
            "warnings": list(self.warnings),
        }


SIGN_IN_NEXT = "Sign this home in: `loopx-chat home exclusive -- codex login`."


def home_check(binding: CodexHomeBinding, environ: Mapping[str, str] | None = None) -> HomeCheck:
    """Read-only checks; opens `config.toml` for reading and nothing else."""
    issues: list[HomeProblem] = []
    warnings: list[str] = []
    home, sqlite = binding.path, binding.sqlite_home
    home_exists, home_is_dir = home.exists(), home.is_dir()
    if not home_exists:
        issues.append(HomeProblem("codex_home_missing", "the Codex home does not exist"))
    elif not home_is_dir:
        issues.append(HomeProblem("codex_home_invalid", "the Codex home is not a folder"))
    sqlite_exists, sqlite_is_dir = sqlite.exists(), sqlite.is_dir()
    if sqlite != home and not sqlite_exists:
        issues.append(HomeProblem("codex_home_invalid", "the sqlite home does not exist"))
    elif sqlite_exists and not sqlite_is_dir:
        issues.append(HomeProblem("codex_home_invalid", "the sqlite home is not a folder"))
    config = home / "config.toml"
    present = config.is_file()
    parses: bool | None = None
    parsed: dict[str, Any] | None = {}
    if present:
        import tomllib  # as in home.py: only a home with a config.toml pays for the parser

        try:
            with open(config, "rb") as handle:
                parsed = tomllib.load(handle)
            parses = True
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            parses, parsed = False, None
            issues.append(
                HomeProblem(
                    "codex_config_invalid", f"config.toml does not parse ({type(exc).__name__})"
                )
            )
    elif home_is_dir:
        warnings.append("no config.toml: codex runs with its defaults (the openai provider)")
    sign_in = None
    if parsed is not None and home_is_dir:
        sign_in = sign_in_state(home, parsed, environ if environ is not None else {})
        if sign_in.signed_in is False:
            issues.append(
                HomeProblem(
                    "codex_not_signed_in",
                    f"not signed in for the model provider `{sign_in.provider}` ({sign_in.how})",
                )
            )
        elif sign_in.needed and sign_in.signed_in is None:
            warnings.append(f"sign-in cannot be checked from the files ({sign_in.how})")
    return HomeCheck(
        path=str(home),
        source=binding.source,
        sqlite_home=str(sqlite),
        sqlite_source=binding.sqlite_source,
        home_exists=home_exists,
        home_is_dir=home_is_dir,
        sqlite_home_exists=sqlite_exists,
        sqlite_home_is_dir=sqlite_is_dir,
        config_present=present,
        config_parses=parses,
        sign_in=sign_in,
        issues=tuple(issues),
        warnings=tuple(warnings),
    )


# -- the registry of app-servers we spawned -----------------------------------------------


@dataclass(frozen=True)
class RegisteredServer:
    pid: int
    create_time: float
    codex_home: str
    sqlite_home: str
    thread_id: str | None
    session_id: str | None


class AppServerRegistry:
    """`<state>/registry/app-servers/<pid>.json`, one file per live app-server we spawned."""

    def __init__(self, state_root: Path) -> None:
        self.folder = state_root / "registry" / "app-servers"
        self._root = state_root

    def register(self, entry: RegisteredServer) -> None:
        path = self.folder / f"{entry.pid}.json"
        with state_write(path):
            ensure_private_dir(self.folder, within=self._root)
            atomic_write_bytes(
                path, json.dumps(asdict(entry), sort_keys=True).encode(), mode=PRIVATE_FILE_MODE
            )

    def unregister(self, pid: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / f"{pid}.json").unlink()

    def live(self) -> list[RegisteredServer]:
        """Entries whose process is still the one we started (pid and start time match)."""
        out: list[RegisteredServer] = []
        try:
            paths = sorted(self.folder.glob("*.json"))
        except OSError:
            return out
        for path in paths:
            try:
                doc = parse_json(read_regular(path, limit=1 << 16))
                if not isinstance(doc, dict):
                    raise StateError("an app-server entry is not a JSON object")
                entry = RegisteredServer(**doc)
            except (OSError, ValueError, TypeError, StateError):
                continue  # a torn or foreign file is not an app-server of ours
            started = start_time(entry.pid)
            if started is not None and abs(started - entry.create_time) < 0.01:
                out.append(entry)
            else:
                self.unregister(entry.pid)  # the process is gone or the pid was reused
        return out


# -- the per-home lock and the quiesce request ----------------------------------------------


EXCLUSIVE_REMEDY = Remedy(
    summary="An exclusive operation (account switch, migration, rollback) holds this Codex home.",
    next_action="Wait for `loopx-chat home exclusive` to finish, then retry.",
)


class HomeLock:
    def __init__(self, state_root: Path, home: Path) -> None:
        folder = state_root / "locks" / "homes"
        key = home_key(home)
        self.folder = folder
        self.path = folder / f"{key}.lock"
        self.quiesce_marker = folder / f"{key}.quiesce"
        self._lock = FileLock(self.path)

    @contextmanager
    def spawn_guard(self) -> Iterator[None]:
        """Held while a controller starts an app-server; refused during an exclusive hold."""
        ensure_private_dir(self.folder)
        deadline = time.monotonic() + SPAWN_GUARD_WAIT_SEC
        while True:
            try:
                self._lock.acquire(timeout=_SPAWN_GUARD_POLL_SEC)
                break
            except LockTimeout:
                # Held: by an exclusive operation (marker up: refuse now) or by another
                # controller starting its app-server (wait for it, however slow its start).
                if self.quiesce_requested() or time.monotonic() > deadline:
                    raise LoopxChatError(
                        "an exclusive operation holds this Codex home; no app-server may start now",
                        error_code="home_exclusive_hold",
                        remedy=EXCLUSIVE_REMEDY,
                    ) from None
        try:
            yield
        finally:
            self._lock.release()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        ensure_private_dir(self.folder)
        try:
            self._lock.acquire(timeout=0)
        except LockTimeout:
            raise LoopxChatError(
                "another loopx-chat exclusive operation or app-server start holds this home",
                error_code="home_exclusive_hold",
                remedy=EXCLUSIVE_REMEDY,
            ) from None
        try:
            atomic_write_bytes(
                self.quiesce_marker, str(os.getpid()).encode(), mode=PRIVATE_FILE_MODE
            )
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.quiesce_marker.unlink()
            self._lock.release()

    def quiesce_requested(self) -> bool:
        return self.quiesce_marker.exists()


# -- who uses a home ----------------------------------------------------------------------


@dataclass(frozen=True)
class HomeUser:
    pid: int
    command: str
    kind: str  # registered | open_files | environment | unknown
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def short_command(cmdline: Sequence[str]) -> str:
    """The executable and its subcommand; never the rest (it may be a prompt)."""
    if not cmdline:
        return "?"
    parts = [os.path.basename(cmdline[0])]
    args = [a for a in cmdline[1:] if not a.startswith("-")]
    if parts[0] in ("node", "python", "python3") and args:
        parts.append(os.path.basename(args[0]))
        args = args[1:]
    if args and _SUBCOMMAND.match(args[0]):
        parts.append(args[0])
    return " ".join(parts)


def _is_codex(cmdline: Sequence[str]) -> bool:
    return any(os.path.basename(a) in ("codex", "codex.js", "codex.exe") for a in cmdline[:2])


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def find_home_users(
    binding: CodexHomeBinding,
    registry: AppServerRegistry,
) -> list[HomeUser]:
    roots = sorted({str(binding.path), str(binding.sqlite_home)})
    users: dict[int, HomeUser] = {}
    for entry in registry.live():
        if entry.codex_home == str(binding.path):
            users[entry.pid] = HomeUser(
                entry.pid, "codex app-server", "registered", f"session {entry.session_id}"
            )
    import psutil  # only here: a home's users are looked for by an exclusive operation

    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        pid = proc.info["pid"]
        if pid in users or pid == me:
            continue
        cmdline = proc.info.get("cmdline") or []
        codex = _is_codex(cmdline)
        denied = False
        try:
            held = [f.path for f in proc.open_files() if _under(f.path, roots)]
        except psutil.AccessDenied:
            held, denied = [], True
        except psutil.Error:
            continue  # exited while we looked
        if held:
            users[pid] = HomeUser(
                pid, short_command(cmdline), "open_files", f"{len(held)} open file(s) in the home"
            )
            continue
        try:
            env = proc.environ()
        except psutil.AccessDenied:
            env, denied = {}, True
        except psutil.Error:
            continue
        named = [
            k
            for k in ("CODEX_HOME", "LOOPX_CHAT_CODEX_HOME", "CODEX_SQLITE_HOME")
            if env.get(k) and _under(os.path.realpath(env[k]), roots)
        ]
        if named:
            users[pid] = HomeUser(pid, short_command(cmdline), "environment", ", ".join(named))
        elif codex and denied:
            # A codex process we may not look into could be using this home.
            users[pid] = HomeUser(pid, short_command(cmdline), "unknown", "not inspectable")
    return sorted(users.values(), key=lambda u: u.pid)


# -- exclusive operations -----------------------------------------------------------------


def run_exclusive(
    binding: CodexHomeBinding,
    state_root: Path,
    command: Sequence[str],
    *,
    wait: float,
    environ: Mapping[str, str],
) -> int:
    """Run `command` once nobody uses the home; returns its exit code."""
    if not command:
        raise LoopxChatError("give the command to run after --", error_code="usage_error")
    lock = HomeLock(state_root, binding.path)
    registry = AppServerRegistry(state_root)
    with lock.exclusive():
        deadline = time.monotonic() + wait
        while True:
            users = find_home_users(binding, registry)
            if not users:
                break
            if time.monotonic() >= deadline:
                listing = "; ".join(f"pid {u.pid} ({u.command}, {u.kind})" for u in users)
                raise LoopxChatError(
                    f"the Codex home is in use by {len(users)} process(es): {listing}",
                    error_code="home_in_use",
                    remedy=Remedy(
                        summary="Every user of this Codex home must be quiet first.",
                        next_action="Quit those processes yourself (loopx-chat never signals "
                        "other programs), then run the exclusive operation again.",
                    ),
                )
            time.sleep(_EXCLUSIVE_POLL_SEC)
        env = {**environ, "CODEX_HOME": str(binding.path)}
        try:
            return subprocess.run(list(command), env=env, check=False).returncode
        except OSError as exc:
            raise LoopxChatError(
                f"cannot run {os.path.basename(command[0])}: {exc.strerror}",
                error_code="usage_error",
            ) from None

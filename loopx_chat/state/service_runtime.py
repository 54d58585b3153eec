"""The service's two files in the state dir: the owner's secret, and where the service runs.

Owns `service-token` (the random owner secret every request but `/healthz` must carry: made
once, 0600 in the 0700 state dir, never rewritten) and `service.json` (port, pid, start time,
version and the Codex home identity of the running service: written atomically at start,
0600, removed on a clean stop). A `service.json` whose pid is gone, or was reused by another
program since, is stale: readers ignore it and the next start replaces it.

The readers (`read_secret`, `read_runtime`) use only the standard library, so a CLI command
that delegates to the service pays for nothing else. It never logs, prints or returns the
secret in an error: a refusal names the file, never its content.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat import pids
from loopx_chat.pids import pid_alive

SECRET_FILE = "service-token"
RUNTIME_FILE = "service.json"
RUNTIME_SCHEMA = "loopx_chat_service_runtime_v1"
SECRET_BYTES = 32  # token_urlsafe(32): 43 characters, 256 bits
_SECRET_SHAPE = re.compile(r"[A-Za-z0-9_-]{43,128}")
_RUNTIME_LIMIT = 16 << 10


def home_identity(codex_home: Path | str) -> str:
    """A short, stable name of a Codex home that does not show its path (the page and the
    CLI compare it; the path itself stays in the owner's state)."""
    return _sha256_hex(str(codex_home).encode("utf-8", "surrogatepass"))[:24]


def _sha256_hex(data: bytes) -> str:
    """SHA-256 from the interpreter's builtin implementation when it has one: the CLI asks
    for one short digest before it delegates, and `hashlib` would first load OpenSSL
    (3-4 ms of every delegated command). The digest is the same either way."""
    try:
        from _sha2 import sha256  # CPython 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # CPython 3.11
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


@dataclass(frozen=True)
class ServiceRuntime:
    """What `service.json` says about a running service."""

    port: int
    pid: int
    started_at: str
    version: str
    codex_home_id: str
    process_started: float | None  # the pid's start time, to tell a reused pid apart

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": RUNTIME_SCHEMA,
            "port": self.port,
            "pid": self.pid,
            "started_at": self.started_at,
            "version": self.version,
            "codex_home_id": self.codex_home_id,
            "process_started": self.process_started,
        }


# -- reading (standard library only) --------------------------------------------------------


def _read_private(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file of ours that nobody else can read, or None when there is
    no such file. Anything else (a symlink, another owner, a group- or world-readable mode)
    is `ValueError`, so a secret someone else could have read is never used."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path} cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if info.st_uid != os.getuid():
            raise ValueError(f"{path} belongs to another user")
        if info.st_mode & 0o077:
            raise ValueError(f"{path} is readable by other users (mode {info.st_mode & 0o777:o})")
        return os.read(fd, limit + 1)[:limit]
    finally:
        os.close(fd)


def read_secret(state_dir: Path, *, file_name: str = SECRET_FILE) -> str | None:
    """The owner's secret (or another secret kept the same way, `file_name`), or None when
    no service has made one yet."""
    raw = _read_private(state_dir / file_name, 256)
    if raw is None:
        return None
    text = raw.decode("ascii", "replace").strip()
    if not _SECRET_SHAPE.fullmatch(text):
        raise ValueError(f"{state_dir / file_name} does not hold a loopx-chat secret")
    return text


def parse_runtime(raw: bytes) -> ServiceRuntime | None:
    """`service.json` as a record, or None when it is not one we wrote."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("schema_version") != RUNTIME_SCHEMA:
        return None
    port, pid = doc.get("port"), doc.get("pid")
    started = doc.get("process_started")
    if not (isinstance(port, int) and 0 < port < 65536 and isinstance(pid, int) and pid > 0):
        return None
    if not all(isinstance(doc.get(k), str) for k in ("started_at", "version", "codex_home_id")):
        return None
    return ServiceRuntime(
        port=port,
        pid=pid,
        started_at=doc["started_at"],
        version=doc["version"],
        codex_home_id=doc["codex_home_id"],
        process_started=float(started) if isinstance(started, int | float) else None,
    )


def read_runtime(
    state_dir: Path, *, check_process: bool = True, start_time: bool = True
) -> ServiceRuntime | None:
    """The running service of this state dir, or None: no file, not ours, or stale (its pid
    is gone, or now belongs to a process that started after the file was written).

    `start_time=False` checks only that the pid is alive (no start time read): for a caller that
    then authenticates the service with the owner's secret, which only a service of this
    state dir can answer to, a reused pid shows as a service that does not answer."""
    try:
        raw = _read_private(state_dir / RUNTIME_FILE, _RUNTIME_LIMIT)
    except ValueError:
        return None
    runtime = parse_runtime(raw) if raw is not None else None
    if runtime is None or not check_process:
        return runtime
    if not pid_alive(runtime.pid):
        return None
    if start_time and runtime.process_started is not None:
        now_started = pids.start_time(runtime.pid)
        if now_started is None or abs(now_started - runtime.process_started) > 1.0:
            return None
    return runtime


# -- writing (the service's start and stop) --------------------------------------------------


def ensure_secret(state_dir: Path, *, file_name: str = SECRET_FILE) -> str:
    """The owner's secret, made now (0600, in the private state dir) if there is none.
    `file_name` keeps another secret the same way (the webhook's signing key).

    A file that is there but unusable (another owner, readable by others, not a secret) is
    refused as `state_unsafe` and left as it is: a secret others could read must be replaced
    by the owner on purpose, never quietly trusted or overwritten."""
    from loopx_chat.errors import Remedy, StateError
    from loopx_chat.state.private_files import create_private, ensure_private_dir, state_write

    path = state_dir / file_name
    try:
        current = read_secret(state_dir, file_name=file_name)
    except ValueError as exc:
        raise StateError(
            f"the service's secret file is not safe to use: {exc}",
            error_code="state_unsafe",
            remedy=Remedy(
                summary="loopx-chat will not serve with a secret another user may have read.",
                next_action=f"Delete {path} and start the service again: it makes a new one "
                "(every open page then needs the new login URL).",
            ),
        ) from None
    if current is not None:
        return current
    import secrets  # only the service's start makes one; a reader never needs `random`

    secret = secrets.token_urlsafe(SECRET_BYTES)
    with state_write(state_dir):
        ensure_private_dir(state_dir)
    with state_write(path):
        if not create_private(path, secret.encode("ascii") + b"\n"):
            return ensure_secret(state_dir, file_name=file_name)  # another start won the race
    return secret


def write_runtime(state_dir: Path, runtime: ServiceRuntime) -> None:
    from loopx_chat.state.private_files import (
        PRIVATE_FILE_MODE,
        atomic_write_bytes,
        ensure_private_dir,
        state_write,
    )

    with state_write(state_dir):
        ensure_private_dir(state_dir)
    data = (json.dumps(runtime.to_dict(), sort_keys=True) + "\n").encode()
    with state_write(state_dir / RUNTIME_FILE):
        atomic_write_bytes(state_dir / RUNTIME_FILE, data, mode=PRIVATE_FILE_MODE)


def remove_runtime(state_dir: Path, pid: int) -> None:
    """Remove `service.json` if it still names this process (a newer service's file stays)."""
    current = read_runtime(state_dir, check_process=False)
    if current is not None and current.pid == pid:
        # A file left behind is stale once we are gone: readers ignore it, a start replaces it.
        with contextlib.suppress(OSError):
            os.unlink(state_dir / RUNTIME_FILE)


def runtime_for_this_process(
    port: int, version: str, codex_home: Path | str, started_at: str
) -> ServiceRuntime:
    pid = os.getpid()
    return ServiceRuntime(
        port=port,
        pid=pid,
        started_at=started_at,
        version=version,
        codex_home_id=home_identity(codex_home),
        process_started=pids.start_time(pid),
    )


# Another secret kept the same way (the webhook's signing key) is read with the same checks.
read_private = _read_private

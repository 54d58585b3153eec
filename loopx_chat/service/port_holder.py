"""Why `serve` could not listen, said so the owner can act: which flag picks another port
and, when it can be seen, what holds the one asked for.

Owns `PortHolder` (the process listening on a port: its pid and process name, and whether it
is this state dir's own service), `find_holder` (the probe: this state dir's `service.json`
first, then the system's listening sockets through psutil; where the OS lets only root list
them all, as macOS does, the sockets of the processes we may inspect) and
`listen_refusal` (PURE: the `listen_failed` error with its `Remedy`, worded from `HINTS`).

What it must never do: bind, connect to or signal the holder; name a command line, a path or
anything but a pid and a process name; fail `serve` a second time (a probe that cannot see,
or is not allowed to, answers "not knowable" instead).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat.errors import Remedy, UsageError
from loopx_chat.visible_text import ControlMode, visible_text


@dataclass(frozen=True)
class PortHolder:
    pid: int | None
    name: str | None
    # This state dir's own `loopx-chat serve` (its `service.json` names the port).
    our_service: bool = False

    def words(self) -> str:
        if self.our_service:
            return f"this state dir's loopx-chat service (pid {self.pid})"
        if self.pid is None:
            return "another program"
        name = visible_text(self.name, ControlMode.ESCAPES) if self.name else "a process"
        return f"{name} (pid {self.pid})"


# What the owner is told, by what stands in the way: (summary, next action). `{port}` is the
# port asked for, `{holder}` what holds it, `{try_port}` a port to try instead.
HINTS: dict[str, tuple[str, str]] = {
    "our_service": (
        "loopx-chat already serves this state dir on that port.",
        "Use it: `loopx-chat open` opens its page (stop it first to restart it); one "
        "service serves a state dir, and another state dir takes `--state-dir DIR`.",
    ),
    "in_use": (
        "Port {port} is in use by {holder}.",
        "Pick another port: `loopx-chat serve --port {try_port}` (`--port 0`: any free "
        "port), or stop what holds {port}.",
    ),
    "not_allowed": (
        "This user may not listen on port {port}.",
        "Pick a port above 1023: `loopx-chat serve --port {try_port}` (`--port 0`: any free port).",
    ),
    "other": (
        "The address could not be bound.",
        "Pick another port with `loopx-chat serve --port N` (`--port 0`: any free port); "
        "`--host` takes 127.0.0.1, ::1 or localhost.",
    ),
}

DEFAULT_TRY_PORT = 8768


def _hint_kind(err: int | None, holder: PortHolder | None) -> str:
    if err == errno.EADDRINUSE:
        return "our_service" if holder is not None and holder.our_service else "in_use"
    if err == errno.EACCES:
        return "not_allowed"
    return "other"


def listen_refusal(host: str, port: int, exc: OSError, holder: PortHolder | None) -> UsageError:
    """The `listen_failed` error for a bind that failed with `exc` (PURE)."""
    kind = _hint_kind(exc.errno, holder)
    try_port = port + 1 if 1023 < port < 65535 else DEFAULT_TRY_PORT
    words = {
        "port": port,
        "holder": holder.words() if holder else "another program",
        "try_port": try_port,
    }
    summary, next_action = HINTS[kind]
    return UsageError(
        f"cannot listen on {host}:{port}: {exc.strerror or 'bind failed'}",
        error_code="listen_failed",
        remedy=Remedy(summary=summary.format(**words), next_action=next_action.format(**words)),
    )


def find_holder(port: int, state_dir: Path) -> PortHolder | None:
    """What listens on `port`, if it can be seen: this state dir's service, else a process
    the OS shows us holding a listening socket on it; None when nothing can be told."""
    from loopx_chat.state.service_runtime import read_runtime

    try:
        ours = read_runtime(state_dir)
    except Exception:  # an unusable service.json says nothing about the port
        ours = None
    if ours is not None and ours.port == port:
        return PortHolder(pid=ours.pid, name="loopx-chat", our_service=True)
    try:
        import psutil
    except ImportError:
        return None
    try:
        listening = [(c.pid, c) for c in psutil.net_connections(kind="inet")]
    except psutil.AccessDenied:  # macOS lets only root list every socket: our own processes
        listening = _own_sockets(psutil)
    except (psutil.Error, OSError):
        return None
    for pid, conn in listening:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if pid is None:
                return PortHolder(pid=None, name=None)
            try:
                name = psutil.Process(pid).name()
            except (psutil.Error, OSError):
                name = None
            return PortHolder(pid=pid, name=name)
    return None


def _own_sockets(psutil: Any) -> list[tuple[int | None, Any]]:
    """The inet sockets of the processes we may inspect, each with its process's pid."""
    found: list[tuple[int | None, Any]] = []
    for proc in psutil.process_iter():
        try:
            # `net_connections` since psutil 6; `connections` before.
            sockets = getattr(proc, "net_connections", None) or proc.connections
            found.extend((proc.pid, conn) for conn in sockets(kind="inet"))
        except (psutil.Error, OSError):
            continue
    return found

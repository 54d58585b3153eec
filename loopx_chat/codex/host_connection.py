"""The seam between the thread code and one running app-server, as httpx has its transport.

Owns the vocabulary both sides share: `HostConnection` (what `CodexThread`, `ThreadReader`
and the controller use of a running app-server: request, notify, next notification, where
its notifications go (`route`), a look at each first (`tap`), a request nobody waits on
(`fire`), close,
pid, whether it still runs, why it ended), `ConnectionFactory` (how one is started for a
launch), the JSON-RPC failures a connection raises (`RpcError`, `ProcessGone`), the
`Notification` record, and the `ServerRequestPolicy` a connection answers server requests by
(`reply` answers one its holder kept, later, from any thread).

The real connection is `app_server.AppServerProcess` (a subprocess); `AppServerProcess.spawn`
is the default factory everywhere. Tests pass an in-process host that replays recorded
transcripts of the real codex. This module holds types only: it never spawns, reads or writes
anything.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class RpcError(Exception):
    """A JSON-RPC error response; `message` is upstream text, used only for classification."""

    def __init__(self, method: str, message: str) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method
        self.message = message


class ProcessGone(Exception):
    """The app-server's stdout closed (it exited or was killed)."""


@dataclass(frozen=True)
class Notification:
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class ServerRequest:
    """A request codex sent us (an approval, a question). `params` stay in memory only."""

    request_id: Any
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class ServerRequestPolicy:
    """How server-initiated requests are answered. Default: decline everything.

    `holder`, when set, is offered each request first (on the reader thread; it must not
    block), with the connection that received it: True means it took the request and will
    answer it later through the connection's `reply`. Otherwise approvals get `decision`
    (`decline` by default), an MCP server's elicitation is declined (`{action: decline}`),
    and any other request (user input, unknown future methods) gets a JSON-RPC error so the
    server moves on.
    """

    approval_decision: str = "decline"
    holder: Callable[[Any, ServerRequest], bool] | None = None

    def answer(self, method: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        if method.endswith("/requestApproval"):
            return {"decision": self.approval_decision}, None
        if method in {"execCommandApproval", "applyPatchApproval"}:
            return {"decision": "denied"}, None
        if method == "mcpServer/elicitation/request":
            return {"action": "decline"}, None
        return None, {"code": -32601, "message": f"loopx-chat does not answer {method}"}


def waiting(source: queue.Queue[Any]) -> list[Notification]:
    """codex's notifications in `source` not yet taken, in order, left where they are
    (`tap`)."""
    with source.mutex:
        return [item for item in source.queue if isinstance(item, Notification)]


def rehome(source: queue.Queue[Any], target: queue.Queue[Any]) -> None:
    """Move codex's items (notifications and the end marker, None) from `source` into
    `target` in order; anything else put in `source` stays there, in order (`route`)."""
    others: list[Any] = []
    while True:
        try:
            item = source.get_nowait()
        except queue.Empty:
            break
        if item is None or isinstance(item, Notification):
            target.put(item)
        else:
            others.append(item)
    for item in others:
        source.put(item)


class HostConnection(Protocol):
    """One running app-server, spoken to in JSON-RPC.

    Server requests (approvals, questions) never reach the caller: the connection answers
    them by its `ServerRequestPolicy` (whose `holder`, the controller's host-request desk,
    may keep one for the owner and answer it later), so a turn never blocks on one unless
    the owner let codex ask.
    """

    @property
    def pid(self) -> int:
        """The id it is registered under (`AppServerRegistry`)."""
        ...

    @property
    def protocol_fault(self) -> str | None:
        """Set, before it reads as ended, when the server broke the protocol and was ended."""
        ...

    @property
    def alive(self) -> bool:
        """Whether it still runs and its stdout is still open."""
        ...

    def request(
        self,
        method: str,
        params: Mapping[str, Any],
        timeout: float,
        *,
        after_send: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """The `result` of the answer; raises RpcError, ProcessGone or TimeoutError.

        `after_send` runs once the request is sent, before the wait; what it raises
        propagates and the answer is not awaited."""
        ...

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification; raises ProcessGone when the server no longer reads."""
        ...

    def reply(
        self,
        request_id: Any,
        *,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
    ) -> bool:
        """Answer a server request its policy's `holder` kept (an approval the owner decided,
        a question answered); False when the server is gone or stopped reading."""
        ...

    def fire(self, method: str, params: Mapping[str, Any]) -> bool:
        """Send a request whose answer nobody waits for (it is read and dropped), from any
        thread, the reader's included; False when it could not be written."""
        ...

    def tap(self, hook: Callable[[Notification], None] | None) -> None:
        """From now on the reader calls `hook` with each notification before it puts it
        anywhere (a goal run's budget, `budget_trip`); `hook` must never wait. None: no tap.
        The notifications read already and not yet taken are given to `hook` first, in
        order: it sees the stream from where its consumer will take it (a resumed thread's
        token total, repeated by codex before the run takes anything, is its baseline)."""
        ...

    def next_notification(self, timeout: float) -> Notification | None:
        """The next notification; None on timeout; raises ProcessGone once it ended."""
        ...

    def route(self, inbox: queue.Queue[Any] | None) -> None:
        """Put notifications into `inbox` from now on (a goal run's one input queue), those
        not yet read first, in order; the reader only puts there, never waits on who takes.
        None: back into the connection's own queue (codex's notifications in `inbox` move
        back with it, in order, the end marker included; anything else stays in `inbox`)."""
        ...

    def close(self, grace: float = 3.0) -> int | None:
        """End it (gracefully first, within `grace` per step); its exit code if known."""
        ...

    def wait_exit(self, timeout: float) -> int | None:
        """Its exit code once it exited within `timeout`, else None."""
        ...


class ConnectionFactory(Protocol):
    """Starts one app-server for a launch: `AppServerProcess.spawn`, or a test's host."""

    def __call__(
        self,
        *,
        executable: Path,
        codex_home: Path,
        work_dir: Path,
        environ: Mapping[str, str],
        config_args: Sequence[str],
        stderr_log: Path,
        policy: ServerRequestPolicy | None,
    ) -> HostConnection: ...

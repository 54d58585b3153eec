"""The owner's programs as clients of the running service: find it, check it, call it.

Owns finding the service of a state dir (`service.json` and the owner's Unix socket beside
it), the identity check (its `capabilities` must name the Codex home the caller resolved,
else it is not ours), and the calls the CLI delegates: open a session, run a turn streamed
from its first delta (`POST .../turns` with `Accept: text/event-stream`), resume, interrupt,
open and resolve a gate, make a one-time login code. Every request goes over the Unix socket
in the 0700 state dir, to a peer that has proven it runs as this user (state/owner_socket.py),
and carries no secret at all: a stale `service.json`, a reused pid or a squatter on the
service's TCP port never receives a byte. Requests carry `X-Loopx-Surface: cli`.

It speaks HTTP/1.1 over that socket (one request per connection, `Connection: close`):
the service is ours and answers with `Content-Length` or, for a stream, until it closes, so
`http.client` (and the `email` parser and `ssl` it loads, a third of a delegated command's
imports) is not needed. Standard library only, plus the reader of the service's two files
(`state/service_runtime`, `state/owner_socket`): a delegating CLI command loads no
controller, no session store, no filelock, no psutil. A service it does not use is said in
one line (`Skipped.note`) and nothing is sent to it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat.codex.turn_defaults import TURN_BODY_LIMIT
from loopx_chat.errors import LoopxChatError, Remedy
from loopx_chat.state import owner_socket
from loopx_chat.state.service_runtime import (
    ServiceRuntime,
    home_identity,
    read_runtime,
)

PROBE_TIMEOUT_SEC = 1.0  # a service that does not answer its identity in this long is skipped
CALL_TIMEOUT_SEC = 120.0  # opening a session may start an app-server
# Between two events of a streamed turn: the service sends a keepalive every 15 s.
STREAM_GAP_SEC = 60.0
INTERRUPT_ON_EXIT_SEC = 2.0
SURFACE = "cli"
# The largest turn request the service reads from its owner (`service.app.TURN_BODY_MAX`; a
# test keeps the two equal): every message the CLI takes fits.
BODY_LIMIT = TURN_BODY_LIMIT
_LINE_LIMIT = 64 << 10
_BODY_READ_LIMIT = 8 << 20  # no answer the CLI asks for is near this
# What a transport failure looks like: the socket's errors, or an answer that is not HTTP.
TRANSPORT_ERRORS = (OSError, ValueError)


class ServiceLost(LoopxChatError):
    """The service went away in the middle of a call."""

    default_code = "service_lost"


@dataclass(frozen=True)
class Skipped:
    """A service.json was there, but the service is not used; `note` says why, in one line."""

    note: str


def _encode(body: Mapping[str, Any]) -> bytes:
    """A request body as compact UTF-8 JSON (a lone surrogate escaped, as the direct path
    would pass it on)."""
    try:
        return json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body).encode("ascii")


def turn_body(
    text: str, client_turn_id: str | None, options: Mapping[str, Any] | None = None
) -> bytes:
    """A turn request: the message, its retry id, and the turn's own options (the `chat`
    flags given, by their names: `controller.turn_settings.WIRE`)."""
    body: dict[str, Any] = {"text": text, "client_turn_id": client_turn_id}
    if options:
        body["options"] = dict(options)
    return _encode(body)


def find_service(state_dir: Path, codex_home: Path) -> ServiceClient | Skipped | None:
    """The service of `state_dir` serving `codex_home`, ready to call; `Skipped` when a
    service.json is there but the service is stale, silent, someone else's, or serves another
    home; None when no service was ever started (or it stopped cleanly: its file is gone)."""
    runtime = read_runtime(state_dir, check_process=False)
    if runtime is None:
        return None
    where = f"the service on port {runtime.port}"
    client = ServiceClient(runtime, state_dir)
    try:
        status, doc = client.call(
            "GET", "/api/chat/capabilities", timeout=PROBE_TIMEOUT_SEC, total=True
        )
    except owner_socket.NotOwnerPeer:
        return Skipped(f"{where} is not this user's (its socket's peer runs as another user)")
    except (FileNotFoundError, ConnectionRefusedError):
        return Skipped(
            f"service.json names pid {runtime.pid}, but nothing listens on its socket "
            "(a stale file)"
        )
    except TRANSPORT_ERRORS:
        return Skipped(f"{where} did not answer within {PROBE_TIMEOUT_SEC:g} s")
    if status != 200:
        return Skipped(f"{where} refused this user ({status})")
    home = doc.get("codex_home") if isinstance(doc, dict) else None
    if not isinstance(home, dict) or home.get("id") != home_identity(codex_home):
        return Skipped(f"{where} serves another Codex home")
    return client


def _error(doc: object, status: int) -> LoopxChatError:
    """The service's JSON error as the error the direct path raises (same code, message,
    remedy)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("error_code"), str):
        return ServiceLost(f"the service answered {status} without an error document")
    gate = doc.get("gate")
    remedy = None
    if isinstance(gate, dict):
        remedy = Remedy(
            summary=str(gate.get("summary", "")), next_action=str(gate.get("next_action", ""))
        )
    return LoopxChatError(str(doc.get("error", "")), error_code=doc["error_code"], remedy=remedy)


class _Reply:
    """One response read off its socket: the status, the headers, then the body or lines."""

    def __init__(self, sock: socket.socket, deadline: float | None) -> None:
        self._sock = sock
        self._deadline = deadline
        self._buf = bytearray()
        parts = self.readline().split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ValueError("not an HTTP response")
        self.status = int(parts[1])
        self.headers: dict[str, str] = {}
        while True:
            line = self.readline()
            if not line.endswith(b"\n"):
                raise ValueError("the response's headers were cut short")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def _fill(self) -> bool:
        """Read what the socket has; False at its end. With a deadline, each wait is only
        for what is left of it (a server that sends a byte now and then cannot stretch the
        probe's one second)."""
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the service did not answer in time")
            self._sock.settimeout(left)
        chunk = self._sock.recv(1 << 16)
        self._buf += chunk
        return bool(chunk)

    def readline(self) -> bytes:
        """The next line with its newline; what is left (maybe nothing) at the end."""
        while (end := self._buf.find(b"\n")) < 0:
            if len(self._buf) > _LINE_LIMIT:
                raise ValueError("a line of the response is too long")
            if not self._fill():
                line = bytes(self._buf)
                self._buf.clear()
                return line
        line = bytes(self._buf[: end + 1])
        del self._buf[: end + 1]
        return line

    def read(self) -> bytes:
        """The body: `Content-Length` bytes, or up to the end; bounded."""
        length = self.headers.get("content-length")
        want = int(length) if length is not None and length.isdigit() else None
        if want is not None and want > _BODY_READ_LIMIT:
            raise ValueError("the response is larger than any answer the CLI asks for")
        while want is None or len(self._buf) < want:
            if len(self._buf) > _BODY_READ_LIMIT:
                raise ValueError("the response is larger than any answer the CLI asks for")
            if not self._fill():
                if want is not None:
                    raise ValueError("the response's body was cut short")
                break
        body = bytes(self._buf[:want] if want is not None else self._buf)
        self._buf.clear()
        return body

    def close(self) -> None:
        self._sock.close()


def _events(response: _Reply) -> Iterator[dict[str, Any]]:
    """The server-sent events of a response, each as its JSON data (keepalives skipped)."""
    data: list[bytes] = []
    while True:
        line = response.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line[5:].strip())
        elif not line and data:
            event = json.loads(b"\n".join(data))
            data = []
            if isinstance(event, dict):
                yield event


class ServiceClient:
    """Calls to one running service, as its owner's CLI."""

    def __init__(self, runtime: ServiceRuntime, state_dir: Path) -> None:
        self.runtime = runtime
        self.state_dir = state_dir

    def __repr__(self) -> str:
        return f"ServiceClient(port={self.runtime.port}, pid={self.runtime.pid})"

    def _open(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | bytes | None,
        accept: str,
        timeout: float,
        total: bool = False,
    ) -> _Reply:
        """Send one request; the response once its headers are in (`timeout` per read, or
        for the whole exchange when `total`)."""
        deadline = time.monotonic() + timeout if total else None
        payload = body if isinstance(body, bytes) else _encode(body) if body is not None else b""
        head = (
            f"{method} {path} HTTP/1.1\r\n"
            "Host: localhost\r\n"
            f"X-Loopx-Surface: {SURFACE}\r\n"
            f"Accept: {accept}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        # The peer proved its uid before this: nothing is sent to anyone else.
        sock = owner_socket.connect(self.state_dir, timeout)
        try:
            sock.sendall(head.encode("ascii") + payload)
            return _Reply(sock, deadline)
        except BaseException:
            sock.close()
            raise

    def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        timeout: float = CALL_TIMEOUT_SEC,
        total: bool = False,
    ) -> tuple[int, Any]:
        """(HTTP status, JSON document) of one request; transport errors as they come."""
        response = self._open(method, path, body, "application/json", timeout, total)
        try:
            return response.status, json.loads(response.read() or b"null")
        finally:
            response.close()

    def _checked(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        try:
            status, doc = self.call(method, path, body)
        except TRANSPORT_ERRORS as exc:
            raise ServiceLost(
                f"the service on port {self.runtime.port} stopped answering "
                f"({type(exc).__name__}); run the command again (with --direct to run it here)"
            ) from None
        if status >= 300 or not isinstance(doc, dict) or doc.get("ok") is not True:
            raise _error(doc, status)
        return doc

    # -- what the CLI delegates ----------------------------------------------------------
    def open_session(self, goal_id: str, work_dir: str) -> dict[str, Any]:
        """A new session for GOAL (made if new, as `chat new` does): its public record."""
        body = {"goal_id": goal_id, "work_dir": work_dir, "create_goal": True}
        return dict(self._checked("POST", "/api/chat/sessions", body)["session"])

    def resume_session(self, session_id: str) -> dict[str, Any]:
        """The session's public record, with `host_loop: true` when the service found codex
        running a loop loopx-chat did not start on its thread."""
        doc = self._checked("POST", f"/api/chat/sessions/{session_id}/resume")
        return {**doc["session"], **({"host_loop": True} if doc.get("host_loop") else {})}

    def interrupt_turn(self, session_id: str) -> dict[str, Any]:
        """The turn asked to stop and `goal_run` (`ChatController.interrupt`)."""
        doc = self._checked("POST", f"/api/chat/sessions/{session_id}/interrupt")
        return {"turn": dict(doc["turn"]), "goal_run": doc.get("goal_run")}

    def request_gate(
        self, goal_id: str, question: str, actor: str, blocking: bool
    ) -> dict[str, Any]:
        """Open an owner gate (the goal made if new, as `gate request` does): the answer
        says whether the goal's run was blocked before it came (`run_blocked`)."""
        body = {"question": question, "actor": actor, "blocking": blocking, "create_goal": True}
        return dict(self._checked("POST", f"/api/goals/{goal_id}/gates", body))

    def goal_run(
        self, method: str, goal_id: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """`POST` Run the goal (with the run's options), or `GET` its latest run: the run."""
        return dict(self._checked(method, f"/api/goals/{goal_id}/run", body)["run"])

    def login_code(
        self, name: str | None = None, *, full: bool = True, desk: bool = False
    ) -> dict[str, Any]:
        """A one-time code that signs one browser in (`open`, `pair`): code, expires_in_sec.
        `desk`: the browser at the machine (`open`), whose page may show pairing codes."""
        body: dict[str, Any] = {"full": full, "desk": desk, **({"name": name} if name else {})}
        return dict(self._checked("POST", "/api/auth/codes", body))

    def pause_goal(self, goal_id: str) -> dict[str, Any]:
        """Pause the run (or the loop loopx-chat did not start) the service follows."""
        return dict(self._checked("POST", f"/api/goals/{goal_id}/pause", {}))

    def resolve_gate(
        self, goal_id: str, gate_id: str, decision: str, reason: str | None, **host: Any
    ) -> dict[str, Any]:
        """`host`: a host gate's `for_session` / `answer` (what codex asked)."""
        path = f"/api/goals/{goal_id}/gates/{gate_id}/decision"
        body = {"decision": decision, "reason": reason, **host}
        return dict(self._checked("POST", path, body)["gate"])

    def submit_turn(
        self,
        session_id: str,
        text: str,
        client_turn_id: str | None,
        *,
        on_delta: Callable[[str], None],
        on_started: Callable[[str], None],
        on_notice: Callable[[str], None] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run one turn in the service and stream it: `on_started(turn_id)` once codex has
        it, `on_delta` for every piece of the reply, `on_notice` for each line the service
        passes on while codex retries; the result document (session_id, thread_id, created,
        turn) at the end. `options`: the turn's own sandbox, policy and limits. Ending this
        process mid-turn (Ctrl-C, SIGTERM) asks the service to interrupt the turn, as the
        direct path would stop it."""
        path = f"/api/chat/sessions/{session_id}/turns"
        body = turn_body(text, client_turn_id, options)
        try:
            response = self._open("POST", path, body, "text/event-stream", STREAM_GAP_SEC)
        except TRANSPORT_ERRORS as exc:
            raise ServiceLost(
                f"the service on port {self.runtime.port} did not take the turn "
                f"({type(exc).__name__}); run it again (with --direct to run it here)"
            ) from None
        started = False
        try:
            if response.status != 200:
                try:
                    doc = json.loads(response.read() or b"null")
                except ValueError:
                    doc = None
                raise _error(doc, response.status)
            for event in _events(response):
                kind = event.get("type")
                if kind == "delta":
                    on_delta(str(event.get("delta", "")))
                elif kind == "notice" and on_notice is not None:
                    on_notice(str(event.get("notice", "")))
                elif kind == "status" and event.get("status") == "running" and not started:
                    started = True
                    on_started(str(event.get("turn_id")))
                elif kind == "result":
                    started = False  # over: nothing to interrupt on the way out
                    return event
                elif kind == "error":
                    started = False
                    raise _error(event, 500)
            raise ServiceLost(
                f"the service on port {self.runtime.port} ended the turn's stream early; "
                f"`loopx-chat sessions show {session_id}` says how the turn ended"
            )
        except TRANSPORT_ERRORS as exc:
            raise ServiceLost(
                f"the service on port {self.runtime.port} stopped answering mid-turn "
                f"({type(exc).__name__}); `loopx-chat sessions show {session_id}` says how "
                "the turn ended"
            ) from None
        except BaseException:
            if started:  # this process is ending mid-turn: the turn ends with it
                self._interrupt_quietly(session_id)
            raise
        finally:
            response.close()

    def _interrupt_quietly(self, session_id: str) -> None:
        # The service gone too: its turn ended with it.
        with contextlib.suppress(*TRANSPORT_ERRORS):
            self.call(
                "POST",
                f"/api/chat/sessions/{session_id}/interrupt",
                timeout=INTERRUPT_ON_EXIT_SEC,
            )

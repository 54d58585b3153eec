"""The HTTP shell of the local service: loopback sockets, request parsing, graceful stop.

Owns binding (loopback only; anything else is `non_loopback_host`) and the owner's Unix
socket beside it (`OwnerSocketServer`: a peer of another uid is closed unanswered), reading
at most 1 MiB of body (larger is refused before it is read; only a turn the owner sends,
over the owner's socket or signed, may be larger: `ServiceApp.body_limit`), and the bounds
that keep another local user from starving the owner: a connection is *unproven* until one of its
requests is the owner's; unproven connections share `UNPROVEN_SHARE` places (a new one
pushes out the oldest), must send their request within `UNPROVEN_DEADLINE_SEC`, and are
closed after their one answer; only proven connections count against `max_connections`.
It writes responses and SSE streams (HEAD: headers only) and logs one bounded line per
request (service/logline.py): method, path, status and milliseconds for the owner's requests,
never a path, query, body or token of anyone else's. It raises the open-file limit as far as
the hard limit allows, and on SIGTERM stops accepting, closes the controller (active turns
recorded as interrupted) and exits 0.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import socketserver
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopx_chat.errors import UsageError
from loopx_chat.service.app import (
    Response,
    ServiceApp,
    body_limit_words,
    error_response,
)
from loopx_chat.service.logline import log, log_refusal
from loopx_chat.service.security import LOOPBACK_BIND_HOSTS
from loopx_chat.state import owner_socket
from loopx_chat.visible_text import ControlMode, visible_text


def _request_words(command: str, path: str) -> tuple[str, str]:
    """A request's method and path (without its query) for a log line, control characters
    escaped so that a request cannot forge lines."""
    return (
        visible_text(command, ControlMode.ESCAPES),
        visible_text(path.split("?")[0], ControlMode.ESCAPES),
    )


MAX_CONNECTIONS = 128
REQUEST_DEADLINE_SEC = 10.0
# Connections that have not yet shown the owner's credential: a small share, a short life.
UNPROVEN_SHARE = 24
UNPROVEN_DEADLINE_SEC = 3.0
# What a LaunchAgent starts with is launchd's default soft limit of 256 open files: a few
# hundred idle clients would leave the owner's page and codex no descriptors.
OPEN_FILES_WANTED = 8192
_BUSY_BODY = (
    b'{"error": "too many connections", "error_code": "too_many_connections", "gate": null, '
    b'"ok": false}'
)
_BUSY_REPLY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
    % (len(_BUSY_BODY), _BUSY_BODY)
)


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Clients that open a connection per request (browsers, scripts polling status) queue
    # here while handler threads start; the default 5 stalled them for seconds.
    request_queue_size = 128

    def __init__(
        self,
        host: str,
        port: int,
        app_factory: Any,
        *,
        max_connections: int = MAX_CONNECTIONS,
        request_deadline: float = REQUEST_DEADLINE_SEC,
    ) -> None:
        self.max_connections = max_connections
        self.request_deadline = request_deadline
        self._connections = 0
        self._connections_lock = threading.Lock()
        self._unproven: OrderedDict[Any, None] = OrderedDict()
        self._owner: set[Any] = set()
        # Sockets still reading a request, and when they must be done (one reaper thread
        # closes late ones: a thread per connection would cost more than the check).
        self._reading: dict[socket.socket, float] = {}
        self._reaper: threading.Thread | None = None
        self._closed = threading.Event()
        if host not in LOOPBACK_BIND_HOSTS:
            raise UsageError(
                f"refusing to listen on {host!r}: loopx-chat serves loopback only "
                "(127.0.0.1, ::1 or localhost)",
                error_code="non_loopback_host",
            )
        bind_host = "127.0.0.1" if host == "localhost" else host
        self.address_family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
        super().__init__((bind_host, port), _Handler)
        self.app: ServiceApp = app_factory(self.server_address[1])

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    # -- bounds --------------------------------------------------------------------------
    def process_request(self, request: Any, client_address: Any) -> None:
        """Every connection starts unproven; past the share, the oldest unproven one goes
        (a browser sends its request at once, so the owner's is never the oldest)."""
        with self._connections_lock:
            self._unproven[request] = None
            evict = next(iter(self._unproven)) if len(self._unproven) > UNPROVEN_SHARE else None
            if evict is not None:
                del self._unproven[evict]
                self._reading.pop(evict, None)
        if evict is not None:
            with contextlib.suppress(OSError):
                evict.shutdown(socket.SHUT_RDWR)
            log_refusal("connection closed: too many connections have not signed in")
        super().process_request(request, client_address)

    def proven(self, conn: socket.socket) -> bool:
        """`conn` carried the owner's request: it leaves the unproven share and takes one of
        the owner's places; False when those are all taken (503, and the connection ends)."""
        with self._connections_lock:
            if conn not in self._unproven:
                return True  # proven before, on an earlier request of this connection
            del self._unproven[conn]
            if self._connections >= self.max_connections:
                return False
            self._connections += 1
            self._owner.add(conn)
            return True

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.reading_done(request)
            with self._connections_lock:
                self._unproven.pop(request, None)
                if request in self._owner:
                    self._owner.discard(request)
                    self._connections -= 1

    @property
    def connections(self) -> int:
        return self._connections

    def reading(self, conn: socket.socket) -> None:
        """`conn` starts reading a request: it must have all of it within the deadline (a
        short one while the connection is unproven)."""
        with self._connections_lock:
            deadline = (
                min(UNPROVEN_DEADLINE_SEC, self.request_deadline)
                if conn in self._unproven
                else self.request_deadline
            )
            self._reading[conn] = time.monotonic() + deadline
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap, name="loopx-request-deadline", daemon=True
                )
                self._reaper.start()

    def reading_done(self, conn: socket.socket) -> None:
        with self._connections_lock:
            self._reading.pop(conn, None)

    def _reap(self) -> None:
        while not self._closed.wait(0.25):
            now = time.monotonic()
            with self._connections_lock:
                late = [c for c, deadline in self._reading.items() if deadline <= now]
                for conn in late:
                    del self._reading[conn]
            for conn in late:
                # The handler's blocked read returns at once, and it closes the connection.
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                log_refusal("connection closed: the request was not read within the deadline")

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed outside our handler's own checks: one line, no traceback
        (a traceback names local paths, and a reset storm would flood the log)."""
        import sys

        exc = sys.exc_info()[1]
        name = type(exc).__name__ if exc else "unknown"
        log_refusal(f"connection failed: {visible_text(name, ControlMode.ESCAPES)}")


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer
    protocol_version = "HTTP/1.1"
    # A client that stops sending (or reading) is dropped after this long, so a stalled
    # local process cannot hold handler threads forever. Event streams send a keepalive
    # every 15 s, well inside it.
    timeout = 60
    server_version = "loopx-chat"
    sys_version = ""

    owner_channel = False  # the owner's Unix socket handler says True

    def handle_one_request(self) -> None:
        # A keep-alive connection waits for its next request on a fresh deadline.
        self.server.reading(self.connection)
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError, OSError) as exc:
            self.close_connection = True
            log_refusal(
                f"connection failed: {visible_text(type(exc).__name__, ControlMode.ESCAPES)}"
            )

    def _handle(self) -> None:
        started = time.monotonic()
        headers = {k.lower(): v for k, v in self.headers.items()}
        declared = (headers.get("content-length") or "0").strip()
        length = int(declared) if declared.isascii() and declared.isdigit() else -1
        if "transfer-encoding" in headers:
            # Only Content-Length bodies are read; a chunked body left unread would be parsed
            # as the next request on this connection.
            response = error_response(
                400, "bad_request", "chunked request bodies are not accepted; send Content-Length"
            )
            self.close_connection = True
        elif length < 0:
            response = error_response(400, "bad_request", "invalid Content-Length")
            self.close_connection = True
        elif length > (
            limit := self.server.app.body_limit(
                self.command, self.path, headers, owner_channel=self.owner_channel
            )
        ):
            response = error_response(413, "body_too_large", body_limit_words(limit))
            self.close_connection = True  # the unread body must not be parsed as a request
        else:
            body = self.rfile.read(length) if length else b""
            self.server.reading_done(self.connection)
            if len(body) < length:  # the client went, or the deadline closed it
                self.close_connection = True
                log_refusal("a request's body was cut short")
                return
            try:
                response = self.server.app.handle(
                    self.command, self.path, headers, body, owner_channel=self.owner_channel
                )
            except Exception as exc:  # never a traceback to the client
                method, target = _request_words(self.command, self.path)
                log(f"internal error on {method} {target}: {type(exc).__name__}")
                response = error_response(500, "internal_error", "internal error")
            if response.authenticated:
                if not self.server.proven(self.connection):
                    response = error_response(
                        503, "too_many_connections", "too many connections; retry"
                    )
            else:
                # One answer per unproven connection: nobody holds a place without signing in.
                self.close_connection = True
        try:
            self._send(response)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client left: nobody to answer, nothing to report
        elapsed = f"{(time.monotonic() - started) * 1000:.0f}ms"
        if response.authenticated:
            method, target = _request_words(self.command, self.path)
            log(f"{method} {target} {response.status} {elapsed}")
        else:
            # Never the path of a request nobody vouched for: it is the sender's to choose.
            log_refusal(f"unauthenticated request {response.status} {elapsed}")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def do_HEAD(self) -> None:
        self._handle()

    def _send(self, response: Response) -> None:
        if response.status == 503:
            # Full: a client told to come back later must not keep the connection it holds.
            self.close_connection = True
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in response.headers:
            self.send_header(name, value)
        if response.stream is not None:
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                if self.command == "HEAD":
                    return  # headers only; `finally` gives the stream's place back
                for chunk in response.stream:
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                pass
            finally:
                close = getattr(response.stream, "close", None)
                if close is not None:
                    close()
            return
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals, made before `_handle` runs (a malformed request line, a
        URI or a header too long, an unsupported version or method), logged like any request:
        method and path without the query, or `-` where the line could not be read."""
        super().send_error(code, message, explain)
        self.close_connection = True
        # Before handling nobody is authenticated: the code only, never the line's words.
        log_refusal(f"request {code} refused before handling")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # our own log lines carry no query strings, bodies or raw request lines


class _OwnerHandler(_Handler):
    owner_channel = True


class OwnerSocketServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The owner's own channel: the Unix socket in the state dir. A connection whose peer
    runs as another uid is closed before a byte is read or written; the owner's connections
    never share a place with anyone else's."""

    daemon_threads = True

    def __init__(
        self, state_dir: Path, app: ServiceApp, listening: socket.socket | None = None
    ) -> None:
        """`listening`: the socket `owner_socket.listen` gave (serve takes it, and with it the
        state dir's claim, before anything else starts); else it is made here."""
        self.state_dir = state_dir
        self.app = app
        self.request_deadline = REQUEST_DEADLINE_SEC
        socketserver.BaseServer.__init__(
            self, str(owner_socket.socket_path(state_dir)), _OwnerHandler
        )
        self.socket = listening if listening is not None else owner_socket.listen(state_dir)

    def server_bind(self) -> None:  # pragma: no cover - bound in owner_socket.listen
        pass

    def verify_request(self, request: Any, client_address: Any) -> bool:
        try:
            owner_socket.check_peer(request)
        except OSError:
            log_refusal("owner socket: a process of another user was refused")
            return False
        return True

    # The handler's hooks that the loopback server implements for its deadlines.
    def reading(self, conn: socket.socket) -> None:
        conn.settimeout(self.request_deadline)

    def reading_done(self, conn: socket.socket) -> None:
        conn.settimeout(None)

    def proven(self, conn: socket.socket) -> bool:
        return True

    def server_close(self) -> None:
        owner_socket.remove(self.state_dir, self.socket)
        super().server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log_refusal("owner socket: a connection failed")


def raise_open_file_limit(wanted: int = OPEN_FILES_WANTED) -> tuple[int, int]:
    """Raise the soft open-file limit toward `wanted`, never past the hard limit; returns
    (before, after). A refusal leaves it as it was: the caps still hold the service up."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def serve_forever(
    server: LoopbackServer,
    *,
    install_signals: bool = True,
    also: tuple[socketserver.BaseServer, ...] = (),
) -> None:
    """Serve until SIGTERM/SIGINT; then stop accepting and close the controller. `also`:
    servers of the same app on other sockets (the owner's Unix socket)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    if install_signals:
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    worker = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
    )
    worker.start()
    for other in also:
        threading.Thread(
            target=other.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        ).start()
    host = str(server.server_address[0])
    shown = f"[{host}]" if ":" in host else host
    log(
        f"listening on http://{shown}:{server.port}/ "
        f"(codex home from {server.app.controller.binding.source})"
    )
    try:
        while not stop.wait(0.5):
            pass
    finally:
        log("stopping: interrupting active turns and closing app-servers")
        for other in also:
            other.shutdown()
            other.server_close()
        server.shutdown()
        server.app.runs.close()  # goal runs: paused, their running turns recorded
        server.app.host_loops.close()  # loops we did not start: let go, the goal untouched
        server.app.controller.close()
        server.server_close()
        log("stopped")

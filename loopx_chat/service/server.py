"""The HTTP shell of the local service: loopback sockets, request parsing, graceful stop.

Owns binding (loopback only; anything else is `non_loopback_host`), reading at most 1 MiB
of body (larger is refused before it is read), writing responses and SSE streams, request
logging to stderr (method, path, status, milliseconds: never bodies), and SIGTERM: stop
accepting, close the controller (active turns recorded as interrupted), exit 0.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from loopx_chat.errors import UsageError
from loopx_chat.service.app import (
    MAX_BODY,
    Response,
    ServiceApp,
    error_response,
    log,
)
from loopx_chat.service.security import LOOPBACK_BIND_HOSTS
from loopx_chat.visible_text import ControlMode, visible_text


def _request_words(command: str, path: str) -> tuple[str, str]:
    """A request's method and path (without its query) for a log line, control characters
    escaped so that a request cannot forge lines."""
    return (
        visible_text(command, ControlMode.ESCAPES),
        visible_text(path.split("?")[0], ControlMode.ESCAPES),
    )


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Clients that open a connection per request (browsers, scripts polling status) queue
    # here while handler threads start; the default 5 stalled them for seconds.
    request_queue_size = 128

    def __init__(self, host: str, port: int, app_factory: Any) -> None:
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


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer
    protocol_version = "HTTP/1.1"
    # A client that stops sending (or reading) is dropped after this long, so a stalled
    # local process cannot hold handler threads forever. Event streams send a keepalive
    # every 15 s, well inside it.
    timeout = 60
    server_version = "loopx-chat"
    sys_version = ""

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
        elif length > MAX_BODY:
            response = error_response(413, "body_too_large", "request bodies are limited to 1 MiB")
            self.close_connection = True  # the unread body must not be parsed as a request
        else:
            body = self.rfile.read(length) if length else b""
            try:
                response = self.server.app.handle(self.command, self.path, headers, body)
            except Exception as exc:  # never a traceback to the client
                method, target = _request_words(self.command, self.path)
                log(f"internal error on {method} {target}: {type(exc).__name__}")
                response = error_response(500, "internal_error", "internal error")
        try:
            self._send(response)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client left: nobody to answer, nothing to report
        method, target = _request_words(self.command, self.path)
        log(f"{method} {target} {response.status} {(time.monotonic() - started) * 1000:.0f}ms")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def do_HEAD(self) -> None:
        self._handle()

    def _send(self, response: Response) -> None:
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
                for chunk in response.stream:
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                pass
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
        # parse_request clears `command` before reading a line; `path` may then be the
        # previous request's on this connection, so it is shown only with a command.
        command = self.command or ""
        path = getattr(self, "path", "") if command else ""
        method, target = _request_words(command, path)
        log(f"{method or '-'} {target[:200] or '-'} {code} refused before handling")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # our own log lines carry no query strings, bodies or raw request lines


def serve_forever(server: LoopbackServer, *, install_signals: bool = True) -> None:
    """Serve until SIGTERM/SIGINT; then stop accepting and close the controller."""
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
    host = server.server_address[0]
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
        server.shutdown()
        server.app.controller.close()
        server.server_close()
        log("stopped")

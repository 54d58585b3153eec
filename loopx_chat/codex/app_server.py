"""One `codex app-server` process and its newline-delimited JSON-RPC stream.

Owns: spawning (argv, child env with the pinned `CODEX_HOME`, cwd, a new process group,
stderr into a size-capped log), request/response correlation, the notification queue,
answering server requests by policy so a turn never blocks, and shutdown (stdin EOF, then
SIGTERM, then SIGKILL of the whole group).

It never mutates the parent environment, never interprets turn content, and never writes
stdout payloads anywhere: a line that is not JSON is counted and noted in the log by size
only, then skipped. It never holds more than `MAX_LINE_BYTES` of one stdout line: a longer
line is a protocol violation that ends the app-server (`protocol_fault`).

`AppServerProcess` is the real `host_connection.HostConnection` and `AppServerProcess.spawn`
the default `ConnectionFactory`; the seam's shared names (`RpcError`, `ProcessGone`,
`Notification`, `ServerRequestPolicy`) are defined there and importable from here too.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from loopx_chat.codex.host_connection import (
    Notification,
    ProcessGone,
    RpcError,
    ServerRequest,
    ServerRequestPolicy,
    rehome,
    waiting,
)
from loopx_chat.errors import CodexError, Remedy
from loopx_chat.state.private_files import open_private_append, state_write

STDERR_LOG_CAP_BYTES = 1 << 20
# The longest stdout line we read. Far above any message codex 0.171.0 sends for a turn (our
# own messages are at most 8 MiB); a peer past it (one that never sends a newline) is ended
# rather than allowed to grow this process until MemoryError.
MAX_LINE_BYTES = 64 << 20

START_REMEDY = Remedy(
    summary="Codex app-server could not start for loopx-chat.",
    next_action="Verify the Codex CLI installation and app-server support, then retry.",
)


@dataclass
class ProcessStats:
    server_requests: int = 0  # answered by the policy (a count: it must not grow a list)


class _CappedLog:
    """Copies a byte stream into a file up to a cap; the rest is counted, not kept."""

    def __init__(self, path: Path, cap: int) -> None:
        # Never through a symlink (nor into a FIFO), 0600: it sits in the state dir.
        with state_write(path):
            fd = open_private_append(path)
        self._file: BinaryIO = os.fdopen(fd, "ab")  # closed by the stderr pump worker
        self._remaining = max(0, cap - self._file.tell())
        self._dropped = 0
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            if self._file.closed:
                return
            keep = data[: self._remaining]
            if keep:
                self._file.write(keep)
                self._file.flush()
                self._remaining -= len(keep)
            self._dropped += len(data) - len(keep)

    def note(self, text: str) -> None:
        self.write(f"[loopx-chat] {text}\n".encode())

    def close(self) -> None:
        with self._lock:
            if self._dropped and not self._file.closed:
                self._file.write(f"[loopx-chat] {self._dropped} bytes over cap dropped\n".encode())
            self._file.close()


# How long one line to stdin may take: a healthy app-server reads continuously, so this
# only bounds one that stopped reading.
WRITE_TIMEOUT_SEC = 30.0
# How long a request fired from the reader thread (`fire`) may take to write: the reader
# must not stall on a peer that stopped reading.
FIRE_SEC = 1.0


def child_environment(environ: Mapping[str, str], codex_home: Path) -> dict[str, str]:
    """A copy of `environ` with `CODEX_HOME` pinned; the parent's env is never touched."""
    env = dict(environ)
    env["CODEX_HOME"] = str(codex_home)
    # Always warnings only: the stderr log sits in loopx-chat's state, and codex's debug and
    # trace logs copy prompts and provider configuration into it. An inherited RUST_LOG
    # (from a shell that debugs something else) must not turn that on.
    env["RUST_LOG"] = "warn"
    return env


class AppServerProcess:
    """A running app-server, the real `HostConnection`; construct with `spawn` (the default
    `ConnectionFactory`)."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        log: _CappedLog,
        policy: ServerRequestPolicy,
    ) -> None:
        self.proc = proc
        self.stats = ProcessStats()
        self._log = log
        self._policy = policy
        self._write_lock = threading.Lock()
        self._id_lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._pending_lock = threading.Lock()
        # Codex's notifications, then None once stdout closed; a goal run's inbox while one
        # follows this app-server (`route`).
        self.notifications: queue.Queue[Any] = queue.Queue()
        self._route_lock = threading.Lock()
        # Called by the reader with each notification before it is put anywhere (`tap`).
        self._tap: Callable[[Notification], None] | None = None
        self.closed = threading.Event()
        # Set (before `closed`) when the app-server broke the protocol and we ended it.
        self.protocol_fault: str | None = None
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)  # see `_send`
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._stderr_pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self._reader.start()
        self._stderr_pump.start()

    # -- spawning -----------------------------------------------------------------------
    @classmethod
    def spawn(
        cls,
        *,
        executable: Path,
        codex_home: Path,
        work_dir: Path,
        environ: Mapping[str, str],
        config_args: Sequence[str] = (),
        stderr_log: Path,
        policy: ServerRequestPolicy | None = None,
    ) -> AppServerProcess:
        argv = [str(executable), "app-server"]
        for item in config_args:
            argv += ["-c", item]
        argv += ["--listen", "stdio://"]
        log = _CappedLog(stderr_log, STDERR_LOG_CAP_BYTES)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(work_dir),
                env=child_environment(environ, codex_home),
                # Own process group: shutdown can signal the whole tree (a wrapper's child
                # included) without touching ours.
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            raise CodexError(
                f"Codex app-server could not start ({exc.strerror or type(exc).__name__})",
                error_code="app_server_start_failed",
                remedy=START_REMEDY,
            ) from None
        return cls(proc, log, policy or ServerRequestPolicy())

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.closed.is_set()

    # -- JSON-RPC -----------------------------------------------------------------------
    def _send(self, message: Mapping[str, Any], timeout: float = WRITE_TIMEOUT_SEC) -> None:
        """Write one line to stdin within `timeout`, or raise TimeoutError.

        stdin is non-blocking and written with `select`, so an app-server that stops reading
        (a full pipe) can never block a caller, or `close()`, forever.
        """
        data = memoryview((json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8"))
        deadline = time.monotonic() + timeout
        if not self._write_lock.acquire(timeout=timeout):
            raise TimeoutError("app-server stdin is held by a write that does not finish")
        try:
            stdin = self.proc.stdin
            if stdin is None or stdin.closed:
                raise ProcessGone("app-server stdin is closed")
            fd = stdin.fileno()
            while data:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"app-server did not read its stdin within {timeout:g}s")
                if not select.select([], [fd], [], remaining)[1]:
                    continue
                try:
                    data = data[os.write(fd, data) :]
                except BlockingIOError:
                    continue
                except OSError:
                    raise ProcessGone("app-server stdin is closed") from None
        finally:
            self._write_lock.release()

    def request(
        self,
        method: str,
        params: Mapping[str, Any],
        timeout: float,
        *,
        after_send: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Send a request and wait for its response; raise RpcError, ProcessGone, TimeoutError.

        `after_send` runs once the request is written, before the wait: work that can overlap
        the app-server's answer. What it raises propagates, and the answer is not awaited."""
        with self._id_lock:
            self._next_id += 1
            request_id = self._next_id
        slot: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1)
        with self._pending_lock:
            if self.closed.is_set():
                raise ProcessGone(f"app-server exited before {method}")
            self._pending[request_id] = slot
        try:
            self._send({"id": request_id, "method": method, "params": dict(params)}, timeout)
            if after_send is not None:
                after_send()
            try:
                response = slot.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"{method} got no response in {timeout:g}s") from None
        finally:
            with self._pending_lock:
                self._pending.pop(request_id, None)
        if response.get("_gone"):
            raise ProcessGone(f"app-server exited during {method}")
        error = response.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            raise RpcError(method, message if isinstance(message, str) else str(error))
        result = response.get("result")
        return result if isinstance(result, dict) else {}

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            self._send(message)
        except TimeoutError:
            raise ProcessGone("app-server stopped reading its stdin") from None

    def fire(self, method: str, params: Mapping[str, Any]) -> bool:
        """See `HostConnection.fire`: a request whose answer the reader drops (its id is
        never pending); False when it could not be written at once."""
        with self._id_lock:
            self._next_id += 1
            request_id = self._next_id
        try:
            self._send({"id": request_id, "method": method, "params": dict(params)}, FIRE_SEC)
        except (ProcessGone, TimeoutError):
            return False
        return True

    def tap(self, hook: Callable[[Notification], None] | None) -> None:
        """See `HostConnection.tap`: the reader calls `hook` with each notification first,
        and those queued already are given to it now (under the lock the reader puts with,
        so each one reaches `hook` once, in order)."""
        with self._route_lock:
            self._tap = hook
            if hook is not None:
                for note in waiting(self.notifications):
                    self._call_tap(hook, note)

    def next_notification(self, timeout: float) -> Notification | None:
        """The next notification; None on timeout; raises ProcessGone once stdout closed."""
        try:
            item = self.notifications.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is None:
            self.notifications.put(None)  # keep the end marker for later callers
            raise ProcessGone("app-server exited")
        return item

    def route(self, inbox: queue.Queue[Any] | None) -> None:
        """See `HostConnection.route`: the reader puts into `inbox` from now on."""
        with self._route_lock:
            target: queue.Queue[Any] = queue.Queue() if inbox is None else inbox
            rehome(self.notifications, target)
            self.notifications = target

    def _note(self, item: Notification | None) -> None:
        with self._route_lock:
            self.notifications.put(item)

    # -- reader workers -----------------------------------------------------------------
    def _read_stdout(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        try:
            while raw := stream.readline(MAX_LINE_BYTES + 1):
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    self._end_for_protocol(f"a stdout line longer than {MAX_LINE_BYTES} bytes")
                    break
                self._dispatch(raw)
        except (OSError, ValueError):
            pass
        finally:
            with self._pending_lock:
                self.closed.set()
                waiting = list(self._pending.values())
            for slot in waiting:
                with contextlib.suppress(queue.Full):
                    slot.put_nowait({"_gone": True})
            self._note(None)

    def _end_for_protocol(self, what: str) -> None:
        self.protocol_fault = what
        self._log.note(f"ended the app-server: {what}")
        self._signal_group(signal.SIGKILL)

    def _dispatch(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            message = None
        if not isinstance(message, dict):
            if raw.strip():
                # Size only: the line might be model output, which never reaches our logs.
                self._log.note(f"skipped a non-JSON stdout line ({len(raw)} bytes)")
            return
        method = message.get("method")
        if "id" in message and method is None:
            response_id = message["id"]
            if not isinstance(response_id, int) or isinstance(response_id, bool):
                # Our ids are integers; anything else (a list, an object) answers nothing of
                # ours and must not take the reader worker down.
                self._log.note("skipped a response whose id is not one of our integer ids")
                return
            with self._pending_lock:
                slot = self._pending.get(response_id)
            if slot is not None:
                with contextlib.suppress(queue.Full):
                    slot.put_nowait(message)
            return
        if not isinstance(method, str):
            self._log.note("skipped a JSON message with neither a known id nor a method")
            return
        params = message.get("params")
        if "id" in message:
            self._answer_server_request(
                message["id"], method, params if isinstance(params, dict) else {}
            )
            return
        note = Notification(method, params if isinstance(params, dict) else {})
        with self._route_lock:
            if self._tap is not None:
                self._call_tap(self._tap, note)
            self.notifications.put(note)

    def _call_tap(self, tap: Callable[[Notification], None], note: Notification) -> None:
        try:
            tap(note)
        except Exception:  # a tap that fails must not stop the reading
            self._log.note(f"the tap of a {note.method} notification failed")

    def _answer_server_request(
        self, request_id: Any, method: str, params: Mapping[str, Any]
    ) -> None:
        self.stats.server_requests += 1
        holder = self._policy.holder
        if holder is not None:
            try:
                if holder(self, ServerRequest(request_id, method, params)):
                    return
            except Exception:  # a holder that fails must not leave codex waiting
                self._log.note(f"the holder of a {method} request failed; answered by policy")
        result, error = self._policy.answer(method)
        # On the reader thread: a reply that cannot be written must not stop the reading.
        self.reply(request_id, result=result, error=error)

    def reply(
        self,
        request_id: Any,
        *,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
    ) -> bool:
        """Answer a server request; False when the app-server is gone or stopped reading."""
        message: dict[str, Any] = {"id": request_id}
        if error is not None:
            message["error"] = dict(error)
        else:
            message["result"] = dict(result or {})
        try:
            self._send(message)
        except (ProcessGone, TimeoutError):
            return False
        return True

    def _pump_stderr(self) -> None:
        # A PIPE with Popen's default buffering: a BufferedReader, which has `read1`.
        stream = cast(io.BufferedReader, self.proc.stderr)
        try:
            for chunk in iter(lambda: stream.read1(65536), b""):
                self._log.write(chunk)
        except (OSError, ValueError):
            pass
        finally:
            self._log.close()

    # -- shutdown -----------------------------------------------------------------------
    def close(self, grace: float = 3.0) -> int | None:
        """Close stdin (the graceful exit), then SIGTERM, then SIGKILL the process group."""
        if self.proc.poll() is None:
            # A write stuck on a full pipe holds the lock until its own deadline; closing
            # does not wait for it: the signals below end the process either way.
            if self._write_lock.acquire(timeout=min(grace, 1.0)):
                try:
                    with contextlib.suppress(OSError, ValueError):
                        if self.proc.stdin and not self.proc.stdin.closed:
                            self.proc.stdin.close()
                finally:
                    self._write_lock.release()
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    self._signal_group(sig)
                if self._exited_within(grace):
                    break
        # A wrapper's orphaned child may still hold the group; make sure it is gone.
        self._signal_group(signal.SIGKILL)
        self._reader.join(timeout=2)
        self._stderr_pump.join(timeout=2)
        return self.proc.returncode

    def _exited_within(self, grace: float) -> bool:
        """Whether the process exits within `grace` seconds.

        Its stdout reaches end of file as it exits, which the reader worker signals at once;
        `Popen.wait(timeout)` alone polls with sleeps that double up to 50 ms, and was found
        to notice an exit 25 ms late, on every chat command."""
        deadline = time.monotonic() + grace
        while not self.closed.is_set():
            # Polled too, slowly: a wrapper may exit while a child of its keeps stdout open.
            if self.proc.poll() is not None:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.closed.wait(min(remaining, 0.05))
        try:
            self.proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            return False
        return True

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(self.proc.pid, sig)

    def wait_exit(self, timeout: float) -> int | None:
        self._exited_within(timeout)
        return self.proc.poll()

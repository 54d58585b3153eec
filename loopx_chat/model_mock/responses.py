"""Loopback-only mock of the OpenAI Responses API, for driving the real `codex` binary offline.

What this module owns:
  * `MockResponsesServer`: a tiny HTTP server that answers ``POST /v1/responses`` with the SSE
    event stream codex 0.171.0 expects from a custom model provider (``wire_api = "responses"``).
    The reply is chosen by directives in the last real user message (``mock:text=``,
    ``mock:slow=``, ``mock:hang``, ``mock:error=``, ``mock:fail``, ``mock:shell=``,
    ``mock:call=NAME {json}``, ``mock:usage_limit=EPOCH``; a call's ``NAME`` may be
    ``NAMESPACE/TOOL`` for a namespaced tool, such as an MCP server's ``mcp__SERVER/TOOL``),
    so a test or the offline demo can provoke each provider behaviour on demand. A
    goal-continuation turn has no user message of its own, so `script` queues directives
    that requests take in order instead (and a default for when the queue is empty): that
    is how a test makes codex's own loop call `update_goal`. `script_goal` keeps such a queue
    per goal, chosen by words of the objective codex sends with each continuation turn, and
    `load_script` takes a whole `script.MockScript` (what `loopx-chat mock serve --script`
    and `demo --tour` read from JSON). A text reply taken from a default (the global one or
    a goal's) carries the request's number (`(#N)`), so a loop it drives is not a loop that
    repeats itself; pushing the same text again scripts one that does.
  (The codex configuration that points a home at this mock is `offline_config`.)
  * ``python -m loopx_chat.model_mock.responses --port N``: the same server in the foreground
    (`loopx-chat mock serve` is the same with a script).

What it must never do:
  * listen on anything but a loopback address (it is a test double, not a service);
  * write request contents to disk or print them: prompts stay in memory, in `requests`;
  * need a real API key, reach the network, or import anything outside the standard library.
"""

from __future__ import annotations

import argparse
import json
import re
import select
import signal
import socket
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any

from loopx_chat.codex.offline_config import MOCK_MODEL
from loopx_chat.model_mock.script import MockScript
from loopx_chat.notify.push import is_loopback

__all__ = ["MockResponsesServer", "block_until_signalled"]

# Only these request headers are kept: enough to assert who called and for which thread, while
# the authorization header (and anything else that might carry a secret) is never stored.
_RECORDED_HEADERS = ("originator", "thread-id")

_FIRST_SERVER_ERROR = 500
_MAX_PORT = 65535

# How often blocked handlers re-check for stop() or a vanished client; bounds stop() latency.
_POLL_S = 0.1

_DIRECTIVE_TEXT = re.compile(r"mock:text=([^\r\n]*)")
_DIRECTIVE_SLOW = re.compile(r"mock:slow=([0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_DIRECTIVE_ERROR = re.compile(r"mock:error=([0-9]{3})")
_DIRECTIVE_SHELL = re.compile(r"mock:shell=([^\r\n]*)")
_DIRECTIVE_HANG = re.compile(r"mock:hang\b")
_DIRECTIVE_FAIL = re.compile(r"mock:fail\b")
_DIRECTIVE_CALL = re.compile(r"mock:call=(\S+)\s+(\{[^\r\n]*\})")
_DIRECTIVE_USAGE_LIMIT = re.compile(r"mock:usage_limit=([0-9]{1,12})")


class _StreamAbandonedError(Exception):
    """The HTTP client closed the connection, or the server is stopping; abandon the stream."""


def _is_injected(text: str) -> bool:
    # codex sends its own context (<environment_context>, <user_instructions>, <turn_aborted>...)
    # as role=user messages; those are not what the person typed.
    return text.lstrip().startswith("<")


def _message_texts(body: dict[str, Any], role: str, part_type: str) -> list[str]:
    """Texts of `part_type` content parts of `role` messages in the request's input, in order."""
    items = body.get("input")
    if isinstance(items, str):
        # The Responses API allows a bare string input; treat it as one user text.
        return [items] if role == "user" else []
    texts: list[str] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("role") != role:
            continue
        if item.get("type", "message") != "message":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == part_type:
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
    return texts


def _tool_output_after_last_user(body: dict[str, Any]) -> str | None:
    """Output text of a function_call_output that follows the last real user message, if any.

    Only outputs after the last user message count, so that a later turn in the same thread that
    again says ``mock:shell=`` gets a fresh tool call instead of seeing the old turn's output.
    """
    items = body.get("input")
    if not isinstance(items, list):
        return None
    found: str | None = None
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("role") == "user" and item.get("type", "message") == "message":
            texts = _message_texts({"input": [item]}, "user", "input_text")
            if any(not _is_injected(t) for t in texts):
                found = None
            continue
        if item.get("type") == "function_call_output":
            found = _output_text(item)
    return found


def _tool_outputs(body: dict[str, Any]) -> list[str]:
    """Every function_call_output in the request's input, as text, in order."""
    items = body.get("input")
    out: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            output = item.get("output")
            out.append(output if isinstance(output, str) else json.dumps(output))
    return out


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return str(output.get("content") or json.dumps(output))
    return "" if output is None else str(output)


def _goal_objective(body: dict[str, Any]) -> str | None:
    """The objective of a goal-continuation turn: the text of codex's latest `goal_objective`
    output, when the last user message is codex's own (a chat turn ends with the person's
    message, and is not a continuation turn even on a thread with a goal)."""
    items = body.get("input")
    objective: str | None = None
    last_user_is_codex = False
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output" and item.get("name") == "goal_objective":
            objective = _output_text(item)
        elif item.get("role") == "user" and item.get("type", "message") == "message":
            texts = _message_texts({"input": [item]}, "user", "input_text")
            last_user_is_codex = all(_is_injected(t) for t in texts)
    return objective if last_user_is_codex else None


def _answers_call(body: dict[str, Any], issued: set[str]) -> str | None:
    """The output text when the request's last input item answers a call this mock made.

    Codex puts its own function outputs into a goal-continuation turn (`goal_objective`),
    so "some tool output after the last user message" does not mean "a follow-up" there."""
    items = body.get("input")
    if not isinstance(items, list) or not items or not isinstance(items[-1], dict):
        return None
    last = items[-1]
    if last.get("type") != "function_call_output" or last.get("call_id") not in issued:
        return None
    return _output_text(last)


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _split_words(text: str) -> list[str]:
    # Each delta keeps its trailing whitespace so that the deltas concatenate back to `text`.
    words = re.findall(r"\s*\S+\s*", text)
    return words or [text]


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its owner; IPv6 when bound to ::1."""

    daemon_threads = True
    # Handlers are daemon threads that notice stop() within _POLL_S; joining them is unnecessary.
    block_on_close = False

    def __init__(self, address: tuple[str, int], owner: MockResponsesServer) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.owner = owner
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "loopx-mock-responses/1"
    server: _Server

    def log_message(self, *args: object) -> None:
        # Silence the default stderr access log: request lines must never be printed.
        return

    # ------------------------------------------------------------------ plumbing

    def _send_json(
        self, code: int, obj: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _read_body(self) -> bytes | None:
        """Request body, decoded from chunked/gzip/deflate; None if it cannot be decoded."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            raw = self._read_chunked()
        else:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
        encoding = (self.headers.get("content-encoding") or "identity").lower()
        try:
            if encoding == "gzip":
                return zlib.decompress(raw, 16 + zlib.MAX_WBITS)
            if encoding == "deflate":
                return zlib.decompress(raw)
        except zlib.error:
            return None
        # zstd (which codex advertises) is not in the stdlib; codex never compressed bodies
        # toward this provider in 0.171.0, so refusing is enough.
        return raw if encoding == "identity" else None

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size_line = self.rfile.readline(65537)
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                # Drain optional trailers up to the blank line.
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline(65537)

    def _client_gone(self) -> bool:
        """True if the peer closed its end (readable with EOF) without us sending anything."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        return peeked == b""

    def _wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, aborting early when the server stops or the client leaves."""
        deadline = time.monotonic() + seconds
        stop = self.server.owner._stopping
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if stop.wait(min(left, _POLL_S)) or self._client_gone():
                raise _StreamAbandonedError

    # --------------------------------------------------------------------- verbs

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if self.headers.get("upgrade", "").lower() == "websocket" and path == "/v1/responses":
            # The built-in openai provider tries a websocket first; 426 makes it fall back to SSE.
            self._send_json(426, {"error": {"message": "mock: websockets are not supported"}})
            return
        self._send_json(404, {"error": {"message": f"mock: no route for GET {path}"}})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path != "/v1/responses":
            self._send_json(404, {"error": {"message": f"mock: no route for POST {path}"}})
            return
        raw = self._read_body()
        if raw is None:
            self._send_json(415, {"error": {"message": "mock: unsupported content-encoding"}})
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"message": "mock: request body is not a JSON object"}})
            return
        owner = self.server.owner
        number = owner._record(
            body, {h: self.headers[h] for h in _RECORDED_HEADERS if h in self.headers}
        )
        try:
            self._respond(body, number)
        except (_StreamAbandonedError, BrokenPipeError, ConnectionResetError):
            # codex dropped the stream (interrupt, idle timeout) or stop() was called.
            self.close_connection = True

    # ------------------------------------------------------------------ replying

    def _usage_limit(self, resets_at: int) -> None:
        """What the Responses API sends when the account's usage limit is reached: a 429 whose
        error type is `usage_limit_reached`, with the reset time, and the rate-limit headers
        that say the primary window is used up."""
        in_sec = max(0, resets_at - int(time.time()))
        self._send_json(
            429,
            {
                "error": {
                    "type": "usage_limit_reached",
                    "message": "mock: the usage limit has been reached",
                    "plan_type": "pro",
                    "resets_at": resets_at,
                    "resets_in_seconds": in_sec,
                }
            },
            headers={
                "x-codex-primary-used-percent": "100.0",
                "x-codex-primary-window-minutes": "300",
                "x-codex-primary-reset-at": str(resets_at),
                "x-codex-primary-reset-after-seconds": str(in_sec),
            },
        )

    def _respond(self, body: dict[str, Any], number: int) -> None:
        user_texts = _message_texts(body, "user", "input_text")
        real_texts = [t for t in user_texts if not _is_injected(t)]
        owner = self.server.owner
        follow_up = _answers_call(body, owner._issued_calls)
        scripted, by_default = owner._next_scripted(follow_up is not None, _goal_objective(body))
        prompt = scripted if scripted is not None else (real_texts[-1] if real_texts else "")

        limit = _DIRECTIVE_USAGE_LIMIT.search(prompt)
        if limit:
            self._usage_limit(int(limit.group(1)))
            return
        error = _DIRECTIVE_ERROR.search(prompt)
        if error:
            code = int(error.group(1))
            self._send_json(
                code,
                {
                    "error": {
                        "message": f"mock forced HTTP {code}",
                        "type": "server_error"
                        if code >= _FIRST_SERVER_ERROR
                        else "invalid_request_error",
                        "code": None,
                    }
                },
            )
            return

        slow = _DIRECTIVE_SLOW.search(prompt)
        delay = float(slow.group(1)) if slow else 0.0
        text = _DIRECTIVE_TEXT.search(prompt)
        shell = _DIRECTIVE_SHELL.search(prompt)
        call = _DIRECTIVE_CALL.search(prompt)
        # A scripted directive drives a continuation turn, whose input carries codex's own
        # `goal_objective` output: there only the answer to a call of ours is a follow-up.
        if shell:
            tool_output = follow_up if scripted is not None else _tool_output_after_last_user(body)
        else:
            tool_output = None
        if follow_up is not None and scripted is None and not shell:
            call = None  # the follow-up of a call of ours, nothing scripted: answer in words
            reply = f"mock saw tool output: {follow_up.strip()[:80]}"
        elif call:
            reply = ""
        elif shell and tool_output is not None:
            # codex prefixes exec output with "Chunk ID/Wall time/.../Output:"; quote the command's
            # own output so a test can assert on it.
            _, marker, command_output = tool_output.partition("Output:\n")
            shown = command_output if marker else tool_output
            reply = f"mock saw tool output: {shown.strip()[:80]}"
        elif text and by_default:
            # A loop driven by the default gets somewhere: each reply carries its number.
            # A loop that repeats itself word for word is scripted by pushing one text again.
            reply = f"{text.group(1).strip()} (#{number})"
        elif text:
            reply = text.group(1).strip()
        else:
            reply = f"mock reply #{number}: seen {len(real_texts)} user messages"

        stream = _SseStream(self, body, reply)
        stream.open()
        if _DIRECTIVE_HANG.search(prompt):
            # Silent on purpose: codex's stream_idle_timeout_ms must fire (SSE comments would not
            # reset it anyway).  Leave when stopped or when codex drops the connection.
            self._wait(float("inf"))
            return
        if call:
            try:
                arguments = json.loads(call.group(2))
            except ValueError:
                arguments = {}
            owner._issued_calls.add(stream.function_call(call.group(1), arguments, delay))
            return
        if shell and tool_output is None:
            owner._issued_calls.add(
                stream.function_call("exec_command", {"cmd": shell.group(1).strip()})
            )
            return
        stream.message(delay, failed=bool(_DIRECTIVE_FAIL.search(prompt)))


class _SseStream:
    """One Responses API SSE stream, written event by event to a handler's socket."""

    def __init__(self, handler: _Handler, body: dict[str, Any], reply: str) -> None:
        self._handler = handler
        self._reply = reply
        self._sequence = 0
        model = body.get("model")
        self._response: dict[str, Any] = {
            "id": f"resp_{uuid.uuid4().hex[:24]}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": model if isinstance(model, str) else MOCK_MODEL,
            "output": [],
        }
        # Token counts derive from the request size so identical requests give identical usage.
        self._input_tokens = 1 + len(json.dumps(body.get("input", ""))) // 4

    def _event(self, event: dict[str, Any]) -> None:
        event["sequence_number"] = self._sequence
        self._sequence += 1
        data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
        self._handler.wfile.write(data)
        self._handler.wfile.flush()

    def open(self) -> None:
        handler = self._handler
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        # One response per connection keeps the server free of keep-alive bookkeeping.
        handler.send_header("connection", "close")
        handler.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        handler.end_headers()
        handler.close_connection = True
        self._event({"type": "response.created", "response": dict(self._response)})

    def _finish(self, output: list[dict[str, Any]], output_tokens: int, failed: bool) -> None:
        self._handler.server.owner._served_usage(self._input_tokens + output_tokens)
        final = dict(
            self._response,
            status="failed" if failed else "completed",
            output=output,
            usage=_usage(self._input_tokens, output_tokens),
        )
        if failed:
            final["error"] = {"code": "server_error", "message": "mock:fail requested"}
            self._event({"type": "response.failed", "response": final})
        else:
            self._event({"type": "response.completed", "response": final})

    def function_call(self, name: str, arguments: dict[str, Any], delay: float = 0.0) -> str:
        """Stream one call of tool `name`, its end `delay` seconds after its arguments (a
        model that takes that long to finish the response); returns its call id."""
        self._event({"type": "response.in_progress", "response": dict(self._response)})
        namespace, _, bare = name.rpartition("/")
        call = {
            "id": f"fc_{uuid.uuid4().hex[:24]}",
            "type": "function_call",
            "status": "completed",
            "call_id": f"call_{uuid.uuid4().hex[:24]}",
            "name": bare,
            "arguments": json.dumps(arguments),
        }
        if namespace:
            call["namespace"] = namespace
        added = dict(call, status="in_progress", arguments="")
        self._event({"type": "response.output_item.added", "output_index": 0, "item": added})
        self._event(
            {
                "type": "response.function_call_arguments.done",
                "item_id": call["id"],
                "output_index": 0,
                "arguments": call["arguments"],
            }
        )
        self._event({"type": "response.output_item.done", "output_index": 0, "item": call})
        if delay:
            self._handler._wait(delay)
        self._finish([call], output_tokens=20, failed=False)
        return str(call["call_id"])

    def message(self, delay: float, failed: bool) -> None:
        self._event({"type": "response.in_progress", "response": dict(self._response)})
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        item: dict[str, Any] = {
            "id": msg_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        where = {"item_id": msg_id, "output_index": 0, "content_index": 0}
        self._event({"type": "response.output_item.added", "output_index": 0, "item": item})
        empty_part = {"type": "output_text", "text": "", "annotations": []}
        self._event({"type": "response.content_part.added", **where, "part": empty_part})
        words = _split_words(self._reply)
        for index, word in enumerate(words):
            if index and delay:
                self._handler._wait(delay)
            self._event({"type": "response.output_text.delta", **where, "delta": word})
        self._event({"type": "response.output_text.done", **where, "text": self._reply})
        part = {"type": "output_text", "text": self._reply, "annotations": []}
        self._event({"type": "response.content_part.done", **where, "part": part})
        done = dict(item, status="completed", content=[part])
        self._event({"type": "response.output_item.done", "output_index": 0, "item": done})
        self._finish([done], output_tokens=len(words), failed=failed)


class _Lane:
    """The queued directives of the continuation turns of goals whose objective contains
    `objective` (mutated only under the server's lock)."""

    def __init__(self, objective: str, queue: list[str], default: str | None) -> None:
        self.objective, self.queue, self.default = objective, queue, default


class MockResponsesServer:
    """A loopback HTTP server that plays the OpenAI Responses API for codex.

    Use as a context manager, or call `start()` and `stop()`.  Every ``POST /v1/responses`` is
    recorded in `requests` (in memory only) as ``{"model", "user_texts", "assistant_texts",
    "tool_outputs", "headers", "received"}`` (``received``: `time.monotonic()` as it came,
    which the benchmarks use to split a run into its phases).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        if not is_loopback(host):
            raise ValueError(f"MockResponsesServer only listens on loopback, not {host!r}")
        if not 0 <= port <= _MAX_PORT:
            raise ValueError(f"port out of range: {port}")
        # Stored without IPv6 brackets: bind() wants "::1", base_url adds the brackets back.
        self._host = host.strip("[]")
        self._requested_port = port
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._served = 0
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._worker: threading.Thread | None = None
        self._queue: list[str] = []
        self._default: str | None = None
        self._issued_calls: set[str] = set()
        self._lanes: list[_Lane] = []
        # The total tokens each streamed response reported, in order (numbers only).
        self.response_tokens: list[int] = []

    # ------------------------------------------------------------------ scripting

    def script(self, *push: str, default: str | None = None, keep_default: bool = False) -> None:
        """Directives for the next requests, taken in order instead of the user's message
        (a goal-continuation turn has none), then `default` for every request that does not
        answer a call of ours; `keep_default` leaves the current default as it is."""
        with self._lock:
            self._queue.extend(push)
            if not keep_default:
                self._default = default

    def script_goal(self, objective: str, *push: str, default: str | None = None) -> None:
        """Like `script`, for the continuation turns of a goal whose objective contains
        `objective` only (the first such lane wins); other requests never take from it."""
        with self._lock:
            self._lanes.append(_Lane(objective, list(push), default))

    def load_script(self, script: MockScript) -> None:
        """Everything a `MockScript` says, on top of what is scripted already."""
        self.script(*script.requests, default=script.default)
        for lane in script.goals:
            self.script_goal(lane.objective, *lane.requests, default=lane.default)

    def clear_script(self) -> None:
        with self._lock:
            self._queue.clear()
            self._default = None
            self._lanes.clear()

    def _next_scripted(
        self, follow_up: bool, objective: str | None = None
    ) -> tuple[str | None, bool]:
        """The next directive, and whether it is a default (not a pushed one)."""
        with self._lock:
            lane = next(
                (x for x in self._lanes if objective is not None and x.objective in objective),
                None,
            )
            queue, default = (lane.queue, lane.default) if lane else (self._queue, self._default)
            if queue:
                return queue.pop(0), False
            return (None, False) if follow_up else (default, default is not None)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> MockResponsesServer:
        """Bind and serve in a daemon thread; returns self so `srv = Mock().start()` reads well."""
        if self._httpd is not None or self._stopping.is_set():
            raise RuntimeError("MockResponsesServer can only be started once")
        self._httpd = _Server((self._host, self._requested_port), self)
        self._worker = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": _POLL_S},
            name=f"mock-responses:{self.port}",
            daemon=True,
        )
        self._worker.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging and slow streams are abandoned within about _POLL_S."""
        self._stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._worker is not None:
            self._worker.join(timeout=2)

    def __enter__(self) -> MockResponsesServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---------------------------------------------------------------- properties

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("MockResponsesServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}/v1"

    # ------------------------------------------------------------------ internal

    def _served_usage(self, total: int) -> None:
        with self._lock:
            self.response_tokens.append(total)

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        """Store one request summary; returns its 1-based number (the reply counter)."""
        entry = {
            "model": body.get("model"),
            "user_texts": _message_texts(body, "user", "input_text"),
            "assistant_texts": _message_texts(body, "assistant", "output_text"),
            "tool_outputs": _tool_outputs(body),
            "headers": {k.lower(): v for k, v in headers.items()},
            "received": time.monotonic(),
        }
        # Counting and appending under one lock keeps `#N` equal to the entry's position.
        with self._lock:
            self._served += 1
            self.requests.append(entry)
            return self._served


# -------------------------------------------------------------------------- cli


def block_until_signalled() -> None:
    """Block until SIGINT or SIGTERM, then restore the previous handlers."""
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # A timed wait keeps the main thread responsive to signals on every platform.
        while not done.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loopx_chat.model_mock.responses",
        description="Run the loopback mock of the OpenAI Responses API in the foreground.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    args = parser.parse_args(argv)
    try:
        server = MockResponsesServer(args.host, args.port)
    except ValueError as exc:
        parser.error(str(exc))
    with server:
        # The one line a caller needs to configure codex; flushed so a pipe reader sees it at once.
        print(server.base_url, flush=True)
        block_until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main())

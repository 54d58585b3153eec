#!/usr/bin/env python3
"""Test-only fake of the `codex` binary, for faults the real codex 0.171.0 cannot show on demand.

What this script owns:
  * ``codex app-server [-c k=v ...] [--listen stdio://]``: newline-delimited JSON-RPC on stdio,
    framed exactly like the real server (no "jsonrpc" key; ``{"id":N,"result":...}``,
    ``{"id":N,"error":{"code":-32600,"message":...}}``, ``{"method":...,"params":...}``), with the
    methods a chat controller uses: initialize, thread/start, thread/resume, thread/read,
    turn/start, turn/interrupt.
  * ``codex debug models``: a tiny JSON model catalog.
  * Fault injection, chosen by env ``FAKE_CODEX_SCENARIO`` (default ``ok``; see `SCENARIOS`), plus
    ``FAKE_CODEX_DEBUG_MODELS=fail|badjson`` for ``debug models``.
  * An invocation log: every run appends ``{"argv","codex_home","cwd","pid"}`` as one JSON line to
    the file named by env ``FAKE_CODEX_LOG``, and later lines for approval decisions and
    ``debug models`` runs, so a test can assert how the controller spawned and answered it.

What it must never do:
  * talk to the network, start real tools or touch files other than the FAKE_CODEX_LOG file;
  * be shipped in the package or used outside tests: the real binary is the reference, this only
    reproduces message shapes and error texts recorded from it (codex-app-server.md §1-§3, §7).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

VERSION = "0.171.0"
FAKE_MODEL = "mock-model"
INVALID_REQUEST = -32600

SCENARIOS = frozenset(
    {
        "ok",
        "catalog_legacy",
        "catalog_legacy_always",
        "catalog_legacy_always_debug_fail",
        "thread_start_error",
        "config_invalid",
        "active_writer",
        "garbage",
        "hang_turn",
        "hang_read",
        "hang_turn_start",
        "stop_reading",
        "slow_initialize",
        "crash_mid_turn",
        "home_mismatch",
        "approval",
        "exit_early",
        "debug_models_fail",
        "endless_line",
        "endless_line_mid_turn",
    }
)

# Error texts as the real binary prints them; controllers classify errors by message prefix.
CATALOG_LEGACY_ERROR = (
    "failed to load configuration: failed to parse model_catalog_json path `/x/catalog.json` "
    "as JSON: missing field `base_instructions` at line 1 column 2"
)
CONFIG_INVALID_ERROR = (
    "failed to load configuration: /x/config.toml:27:6: key with no value, expected `=`"
)
THREAD_START_ERROR = "thread/start exploded: unrelated failure"
EXIT_EARLY_ERROR = 'Error: CODEX_HOME points to "/x", but that path does not exist'
INVALID_CONFIG_WARNING = "Invalid configuration; using defaults."
NO_SUCH_THREAD = "no-such-thread"
MISMATCHED_HOME = "/somewhere/else"
CRASH_EXIT_CODE = 137

DEBUG_MODELS_CATALOG: dict[str, Any] = {
    "models": [{"slug": "fake-model", "display_name": "Fake", "base_instructions": "You are fake."}]
}

TOKEN_USAGE: dict[str, int] = {
    "totalTokens": 12,
    "inputTokens": 10,
    "outputTokens": 2,
    "cachedInputTokens": 0,
    "reasoningOutputTokens": 0,
}

# Lines the `garbage` scenario writes before every message: a real server never does this, but a
# stray log line on stdout (e.g. from a wrapper) must not break the client's reader.
GARBAGE_LINES = (
    b"not json at all\n",
    b"{broken\n",
    b"\x1b[2mWARN\x1b[0m a log line on stdout\n",
    b'{"id":[1],"result":{}}\n',  # an unhashable id must not take the reader down
)

REPLY_DELTAS = ("fake ", "reply")

KNOWN_METHODS = (
    "initialize",
    "thread/start",
    "thread/resume",
    "thread/read",
    "turn/start",
    "turn/interrupt",
)

# JSON-RPC ids are echoed back as given; the real server accepts ints and strings.
RequestId = int | str

USAGE = "Usage: codex app-server [OPTIONS] [COMMAND]"


# ------------------------------------------------------------------------------ helpers


def log_event(entry: dict[str, Any]) -> None:
    """Append one JSON line to $FAKE_CODEX_LOG; one write() so parallel fakes do not interleave."""
    path = os.environ.get("FAKE_CODEX_LOG")
    if not path:
        return
    data = (json.dumps(entry) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def codex_home() -> str:
    """CODEX_HOME as given; the real binary falls back to ~/.codex when it is unset."""
    home = os.environ.get("CODEX_HOME")
    return home if home is not None else str(Path.home() / ".codex")


def uuid7() -> str:
    """A UUIDv7 string, like the real server's thread and turn ids (time-ordered)."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= secrets.randbits(12) << 64
    value |= 0b10 << 62
    value |= secrets.randbits(62)
    return str(uuid.UUID(int=value))


def die(message: str, code: int) -> NoReturn:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    sys.exit(code)


def parse_toml_scalar(raw: str) -> str:
    """Decode a `-c key=VALUE` string value the way codex does for the cases tests use.

    codex parses VALUE as TOML and falls back to the raw text; a basic string is JSON-compatible
    for paths, a literal string is taken verbatim.
    """
    text = raw.strip()
    if len(text) > 1 and text[0] == text[-1] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    if len(text) > 1 and text[0] == text[-1] == "'":
        return text[1:-1]
    return text


# --------------------------------------------------------------------------------- argv


@dataclass
class Invocation:
    """What the argv asked for, after dropping the options this fake accepts and ignores."""

    command: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    show_version: bool = False


# Options that take a value, and flags, that real codex 0.171.0 accepts on these subcommands.
_VALUE_OPTIONS = frozenset({"-c", "--config", "--enable", "--disable", "--listen"})
_FLAGS = frozenset({"--stdio", "--strict-config", "--analytics-default-enabled", "--bundled"})


def parse_argv(argv: list[str]) -> Invocation:
    """Parse argv like clap would for the subset we fake; exits 2 on what real codex rejects."""
    parsed = Invocation()
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg in _FLAGS:
            continue
        if arg in ("--version", "-V"):
            parsed.show_version = True
            continue
        if arg.startswith("--") and "=" in arg:
            option, value = arg.split("=", 1)
        elif arg in _VALUE_OPTIONS:
            if not rest:
                die(f"error: a value is required for '{arg} <VALUE>' but none was supplied", 2)
            option, value = arg, rest.pop(0)
        elif arg.startswith("-") and arg != "-":
            die(f"error: unexpected argument '{arg}' found\n\n{USAGE}", 2)
        else:
            parsed.command.append(arg)
            continue
        if option not in _VALUE_OPTIONS:
            die(f"error: unexpected argument '{option}' found\n\n{USAGE}", 2)
        if option in ("-c", "--config"):
            parsed.overrides.append(value)
        elif option == "--listen" and value != "stdio://":
            # Only stdio is faked; anything else would need a socket listener.
            die(f"Error: fake codex only supports --listen stdio://, got {value!r}", 1)
        # --enable/--disable FEATURE are accepted and ignored.
    return parsed


def catalog_override_is_usable(overrides: list[str]) -> bool:
    """True if the last `-c model_catalog_json=...` names a file with a non-empty `models` list."""
    values = [o.partition("=")[2] for o in overrides if o.startswith("model_catalog_json=")]
    if not values:
        return False
    path = Path(parse_toml_scalar(values[-1]))
    try:
        catalog = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    models = catalog.get("models") if isinstance(catalog, dict) else None
    return isinstance(models, list) and len(models) > 0


# ---------------------------------------------------------------------------- app-server


class RpcError(Exception):
    """A request that must be answered with a JSON-RPC error carrying this message."""


@dataclass
class PendingApproval:
    request_id: int
    thread_id: str
    turn_id: str


class FakeAppServer:
    """The JSON-RPC loop; single-threaded because every scenario is driven by client input."""

    def __init__(self, scenario: str, overrides: list[str]) -> None:
        self.scenario = scenario
        self.initialized = False
        self.threads: set[str] = set()
        self.active_turns: dict[str, str] = {}  # thread id -> turn id
        self.pending_approval: PendingApproval | None = None
        self.next_server_request_id = 0  # the real server numbers its own requests from 0
        self.out = sys.stdout.buffer
        self.config_error: str | None = None
        # catalog_legacy is curable by passing a usable catalog with -c; the *_always ones are not.
        legacy_catalog = scenario in ("catalog_legacy_always", "catalog_legacy_always_debug_fail")
        if scenario == "catalog_legacy":
            legacy_catalog = not catalog_override_is_usable(overrides)
        if legacy_catalog:
            self.config_error = CATALOG_LEGACY_ERROR
        elif scenario == "config_invalid":
            self.config_error = CONFIG_INVALID_ERROR

    # ----------------------------------------------------------------- output

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        if self.scenario == "garbage":
            data = b"".join(GARBAGE_LINES) + data
        try:
            self.out.write(data)
            self.out.flush()
        except BrokenPipeError:
            # The client is gone; like the real server, just stop.  Point stdout at /dev/null so
            # the interpreter's final flush does not raise again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params, "emittedAtMs": int(time.time() * 1000)})

    def respond(self, request_id: RequestId, result: dict[str, Any]) -> None:
        self.send({"id": request_id, "result": result})

    def fail(self, request_id: RequestId, message: str) -> None:
        self.send({"id": request_id, "error": {"code": INVALID_REQUEST, "message": message}})

    # ------------------------------------------------------------------- loop

    def run(self) -> int:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                return 0  # stdin EOF: the real server exits cleanly too
            try:
                message = json.loads(line)
            except ValueError:
                continue  # the real server drops non-JSON lines silently
            if isinstance(message, dict):
                self.dispatch(message)
                if self.scenario == "stop_reading" and message.get("method") == "thread/start":
                    # Alive but deaf: stdin is never read again, so the client's pipe fills.
                    while True:
                        time.sleep(3600)

    def dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        request_id = message.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            # No usable id: a client notification such as `initialized`, which needs no answer.
            return
        if isinstance(method, str):
            self.handle_request(request_id, method, message.get("params"))
        elif "result" in message or "error" in message:
            self.handle_client_response(message)

    def handle_request(self, request_id: RequestId, method: str, raw_params: object) -> None:
        params = raw_params if isinstance(raw_params, dict) else {}
        handlers = {
            "initialize": self.initialize,
            "thread/start": self.thread_start,
            "thread/resume": self.thread_resume,
            "thread/read": self.thread_read,
            "turn/start": self.turn_start,
            "turn/interrupt": self.turn_interrupt,
        }
        handler = handlers.get(method)
        try:
            if handler is None:
                expected = ", ".join(f"`{m}`" for m in KNOWN_METHODS)
                raise RpcError(
                    f"Invalid request: unknown variant `{method}`, expected one of {expected}"
                )
            if method != "initialize" and not self.initialized:
                raise RpcError("Not initialized")
            handler(request_id, params)
        except RpcError as failure:
            self.fail(request_id, str(failure))

    # ---------------------------------------------------------------- methods

    def endless_line(self) -> NoReturn:
        """A peer that never ends its line: bytes without a newline until the reader hangs up."""
        chunk = b"x" * (1 << 20)
        try:
            while True:
                self.out.write(chunk)
        except (BrokenPipeError, OSError):
            os._exit(0)

    def initialize(self, request_id: RequestId, params: dict[str, Any]) -> None:
        if self.scenario == "endless_line":
            self.endless_line()
        if self.initialized:
            raise RpcError("Already initialized")
        client = params.get("clientInfo")
        if not isinstance(client, dict):
            raise RpcError("Invalid request: missing field `clientInfo`")
        if self.scenario == "slow_initialize":
            time.sleep(3)
        self.initialized = True
        name = str(client.get("name") or "client")
        home = MISMATCHED_HOME if self.scenario == "home_mismatch" else codex_home()
        self.respond(
            request_id,
            {
                "userAgent": f"{name}/{VERSION} (fake; x86_64) unknown ({name}; 0.0.0)",
                "codexHome": home,
                "platformFamily": "unix",
                "platformOs": "linux",
            },
        )
        if self.config_error is not None:
            # The real server starts fine on a bad config and only warns; thread/start then fails.
            self.notify("configWarning", {"summary": INVALID_CONFIG_WARNING, "details": None})

    def thread_payload(self, thread_id: str, params: dict[str, Any]) -> dict[str, Any]:
        cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else os.getcwd()
        return {
            "thread": {
                "id": thread_id,
                "path": None,
                "status": {"type": "idle"},
                "cwd": cwd,
                "model": FAKE_MODEL,
                "cliVersion": VERSION,
                "turns": [],
            },
            "model": FAKE_MODEL,
            "modelProvider": "mock",
            "cwd": cwd,
            "approvalPolicy": "never",
            "sandbox": {"type": "readOnly"},
        }

    def thread_start(self, request_id: RequestId, params: dict[str, Any]) -> None:
        if self.config_error is not None:
            raise RpcError(self.config_error)
        if self.scenario == "thread_start_error":
            raise RpcError(THREAD_START_ERROR)
        thread_id = uuid7()
        self.threads.add(thread_id)
        payload = self.thread_payload(thread_id, params)
        self.respond(request_id, payload)
        self.notify("thread/started", {"thread": payload["thread"]})

    def thread_resume(self, request_id: RequestId, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            raise RpcError("Invalid request: missing field `threadId`")
        if self.config_error is not None:
            raise RpcError(self.config_error)
        if thread_id == NO_SUCH_THREAD:
            raise RpcError(f"no rollout found for thread id {thread_id}")
        if self.scenario == "active_writer":
            raise RpcError(f"thread {thread_id} already has an active writer")
        self.threads.add(thread_id)
        # No thread/started here: the real server sends it only for new threads.
        self.respond(request_id, self.thread_payload(thread_id, params))

    def thread_read(self, request_id: RequestId, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            raise RpcError("Invalid request: missing field `threadId`")
        if self.scenario == "hang_read" and thread_id not in self.threads:
            return  # a read from disk that never answers
        self.respond(request_id, {"thread": {"id": thread_id, "turns": []}})

    def turn_start(self, request_id: RequestId, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            raise RpcError("Invalid request: missing field `threadId`")
        if thread_id not in self.threads:
            raise RpcError(f"thread not found: {thread_id}")
        if self.scenario == "hang_turn_start":
            return  # never answers turn/start
        active = self.active_turns.get(thread_id)
        log_event({"turn_start": True, "steer": active is not None})
        if active is not None:
            # A turn/start during an active turn steers it: same turn id, no new turn events.
            self.respond(request_id, {"turn": self.turn_object(active, "inProgress")})
            return
        turn_id = uuid7()
        self.active_turns[thread_id] = turn_id
        self.respond(request_id, {"turn": self.turn_object(turn_id, "inProgress")})
        self.notify(
            "turn/started", {"threadId": thread_id, "turn": self.turn_object(turn_id, "inProgress")}
        )
        if self.scenario == "hang_turn":
            return  # stays active until turn/interrupt
        if self.scenario == "endless_line_mid_turn":
            self.endless_line()
        if self.scenario == "crash_mid_turn":
            item_id = self.start_agent_message(thread_id, turn_id)
            self.delta(thread_id, turn_id, item_id, REPLY_DELTAS[0])
            # Like a SIGKILLed native binary: no cleanup, no further output.
            os._exit(CRASH_EXIT_CODE)
        if self.scenario == "approval":
            self.request_approval(thread_id, turn_id)
            return  # the turn resumes when the client answers
        self.finish_turn(thread_id, turn_id)

    def turn_interrupt(self, request_id: RequestId, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            raise RpcError("Invalid request: missing field `threadId`")
        active = self.active_turns.get(thread_id)
        if active is None:
            raise RpcError("no active turn to interrupt")
        wanted = params.get("turnId")
        if isinstance(wanted, str) and wanted != active:
            raise RpcError(f"expected active turn id {wanted} but found {active}")
        self.respond(request_id, {})
        pending = self.pending_approval
        if pending is not None and pending.turn_id == active:
            self.pending_approval = None
            self.notify(
                "serverRequest/resolved", {"threadId": thread_id, "requestId": pending.request_id}
            )
        del self.active_turns[thread_id]
        self.notify(
            "turn/completed",
            {"threadId": thread_id, "turn": self.turn_object(active, "interrupted", items=[])},
        )

    # ------------------------------------------------------------------ turns

    @staticmethod
    def turn_object(
        turn_id: str, status: str, items: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return {"id": turn_id, "status": status, "items": items or [], "error": None}

    def start_agent_message(self, thread_id: str, turn_id: str) -> str:
        item_id = f"msg_{uuid.uuid4().hex[:24]}"
        self.notify(
            "item/started",
            {
                "threadId": thread_id,
                "turnId": turn_id,
                "item": {"type": "agentMessage", "id": item_id, "text": ""},
            },
        )
        return item_id

    def delta(self, thread_id: str, turn_id: str, item_id: str, text: str) -> None:
        self.notify(
            "item/agentMessage/delta",
            {"threadId": thread_id, "turnId": turn_id, "itemId": item_id, "delta": text},
        )

    def finish_turn(self, thread_id: str, turn_id: str) -> None:
        """The rest of a normal turn: the reply streamed in two deltas, usage, completion."""
        item_id = self.start_agent_message(thread_id, turn_id)
        for text in REPLY_DELTAS:
            self.delta(thread_id, turn_id, item_id, text)
        message = {"type": "agentMessage", "id": item_id, "text": "".join(REPLY_DELTAS)}
        self.notify("item/completed", {"threadId": thread_id, "turnId": turn_id, "item": message})
        self.notify(
            "thread/tokenUsage/updated",
            {
                "threadId": thread_id,
                "turnId": turn_id,
                "tokenUsage": {"total": dict(TOKEN_USAGE), "last": dict(TOKEN_USAGE)},
            },
        )
        self.active_turns.pop(thread_id, None)
        self.notify(
            "turn/completed",
            {"threadId": thread_id, "turn": self.turn_object(turn_id, "completed", [message])},
        )

    def request_approval(self, thread_id: str, turn_id: str) -> None:
        request_id = self.next_server_request_id
        self.next_server_request_id += 1
        self.pending_approval = PendingApproval(request_id, thread_id, turn_id)
        self.send(
            {
                "id": request_id,
                "method": "item/commandExecution/requestApproval",
                "params": {
                    "kind": "command",
                    "threadId": thread_id,
                    "turnId": turn_id,
                    "itemId": f"call_{uuid.uuid4().hex[:24]}",
                    "command": "/bin/bash -lc 'touch fake-approval'",
                    "cwd": os.getcwd(),
                    "commandActions": [{"type": "unknown", "command": "touch fake-approval"}],
                    "proposedExecpolicyAmendment": ["touch", "fake-approval"],
                    "availableDecisions": [
                        "accept",
                        {
                            "acceptWithExecpolicyAmendment": {
                                "execpolicy_amendment": ["touch", "fake-approval"]
                            }
                        },
                        "cancel",
                    ],
                },
            }
        )

    def handle_client_response(self, message: dict[str, Any]) -> None:
        pending = self.pending_approval
        if pending is None or message.get("id") != pending.request_id:
            return  # an answer to nothing we asked: the real server ignores it as well
        self.pending_approval = None
        result = message.get("result")
        if isinstance(result, dict):
            log_event({"approval_decision": result.get("decision")})
        else:
            log_event({"approval_decision": None, "approval_error": message.get("error")})
        self.notify(
            "serverRequest/resolved",
            {"threadId": pending.thread_id, "requestId": pending.request_id},
        )
        if self.active_turns.get(pending.thread_id) == pending.turn_id:
            self.finish_turn(pending.thread_id, pending.turn_id)


# --------------------------------------------------------------------------------- main


def debug_models(scenario: str) -> int:
    log_event({"debug_models": True, "codex_home": os.environ.get("CODEX_HOME")})
    mode = os.environ.get("FAKE_CODEX_DEBUG_MODELS", "")
    if scenario in ("debug_models_fail", "catalog_legacy_always_debug_fail") or mode == "fail":
        die("Error: failed to load the model catalog (fake failure)", 2)
    if mode == "badjson":
        sys.stdout.write("not json\n")
        return 0
    sys.stdout.write(json.dumps(DEBUG_MODELS_CATALOG) + "\n")
    return 0


def main(argv: list[str]) -> int:
    log_event(
        {
            "argv": argv,
            "codex_home": os.environ.get("CODEX_HOME"),
            "cwd": os.getcwd(),
            "pid": os.getpid(),
        }
    )
    scenario = os.environ.get("FAKE_CODEX_SCENARIO") or "ok"
    if scenario not in SCENARIOS:
        # Exit code 3 is used by nothing the real binary does, so a typo in a test is obvious.
        die(f"fake codex: unknown FAKE_CODEX_SCENARIO {scenario!r}", 3)
    if scenario == "exit_early":
        die(EXIT_EARLY_ERROR, 1)
    invocation = parse_argv(argv)
    if invocation.show_version:
        sys.stdout.write(f"codex-cli {VERSION}\n")
        return 0
    if invocation.command == ["debug", "models"]:
        return debug_models(scenario)
    if invocation.command == ["app-server"]:
        return FakeAppServer(scenario, invocation.overrides).run()
    shown = " ".join(invocation.command) or "(none)"
    die(f"error: unrecognized subcommand '{shown}'\n\n{USAGE}", 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

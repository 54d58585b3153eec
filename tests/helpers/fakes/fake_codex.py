#!/usr/bin/env python3
"""Test-only fake of the `codex` binary, for faults the real codex cannot show on demand.

What this script owns:
  * ``codex app-server [-c k=v ...] [--listen stdio://]``: newline-delimited JSON-RPC on stdio
    that replays transcripts recorded from the pinned real codex
    (tests/fixtures/codex-transcripts/<version>/, written by tools/record-codex-transcripts), in
    the order the client asks for them.
  * ``codex debug models``: the built-in catalog entry the real binary printed when recorded.
  * Fault injection, chosen by env ``FAKE_CODEX_SCENARIO`` (default ``ok``; see `SCENARIOS`), plus
    ``FAKE_CODEX_DEBUG_MODELS=fail|badjson`` for ``debug models``: the faults (a deaf process,
    garbage or an endless line on stdout, a crash at a precise moment, a slow start) are code;
    every message codex would send comes from a recording.
  * An invocation log: every run appends ``{"argv","codex_home","cwd","pid"}`` as one JSON line to
    the file named by env ``FAKE_CODEX_LOG``, and later lines for approval decisions and
    ``debug models`` runs, so a test can assert how the controller spawned and answered it.

What it must never do:
  * talk to the network, start real tools or touch files other than the FAKE_CODEX_LOG file;
  * write message text of its own: behaviour that depends on what codex says is tested on the
    real binary (tests/README.md); this replays it only around injected faults.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from replay import Replayer, load, pinned_version  # beside this script

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

NO_SUCH_THREAD = "no-such-thread"
MISMATCHED_HOME = "/somewhere/else"
CRASH_EXIT_CODE = 137

# Lines the `garbage` scenario writes before every message: a real server never does this, but a
# stray log line on stdout (e.g. from a wrapper) must not break the client's reader.
GARBAGE_LINES = (
    b"not json at all\n",
    b"{broken\n",
    b"\x1b[2mWARN\x1b[0m a log line on stdout\n",
    b'{"id":[1],"result":{}}\n',  # an unhashable id must not take the reader down
)

# Argument errors are clap's wording, for argv this fake does not understand (a test bug).
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


def _method_is(method: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("method") == method


@dataclass
class PendingApproval:
    request_id: int
    thread_id: str
    turn_id: str


class FakeAppServer:
    """Replays recorded exchanges in the order the client asks; faults are the only code here.

    Single-threaded because every scenario is driven by client input.
    """

    def __init__(self, scenario: str, overrides: list[str]) -> None:
        self.scenario = scenario
        self.initialized = False
        self.threads: set[str] = set()
        self.active_turns: dict[str, str] = {}  # thread id -> turn id
        self.pending_approval: PendingApproval | None = None
        self.out = sys.stdout.buffer
        self.replay = Replayer()
        # Which recorded scenario answers thread/start and thread/resume, when not a plain one.
        self.config_error: str | None = None
        legacy_catalog = scenario in ("catalog_legacy_always", "catalog_legacy_always_debug_fail")
        if scenario == "catalog_legacy":
            legacy_catalog = not catalog_override_is_usable(overrides)
        if legacy_catalog:
            self.config_error = "old_catalog"
        elif scenario == "config_invalid":
            self.config_error = "config_invalid"

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

    def play(
        self,
        recorded: str,
        kind: str,
        live: dict[str, Any],
        nth: int = 0,
        *,
        stop_after: Callable[[dict[str, Any]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Send one recorded exchange; track threads and turns it starts and ends."""
        messages = self.replay.exchange(recorded, kind, live, nth)
        for message in messages:
            self.track(message)
            self.send(message)
            if stop_after is not None and stop_after(message):
                break
        return messages

    def track(self, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        result = message.get("result") or {}
        thread = result.get("thread") if isinstance(result, dict) else None
        if isinstance(thread, dict) and isinstance(thread.get("id"), str):
            self.threads.add(thread["id"])
        method = message.get("method")
        if method == "turn/started":
            self.active_turns[params["threadId"]] = params["turn"]["id"]
        elif method == "turn/completed":
            self.active_turns.pop(params.get("threadId"), None)
        elif method is not None and "id" in message:  # a server request: wait for the answer
            self.pending_approval = PendingApproval(
                message["id"], params.get("threadId", ""), params.get("turnId", "")
            )

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
            self.handle_request(message, method)
        elif "result" in message or "error" in message:
            self.handle_client_response(message)

    def handle_request(self, message: dict[str, Any], method: str) -> None:
        handlers: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
            "initialize": self.initialize,
            "thread/start": self.thread_start,
            "thread/resume": self.thread_resume,
            "thread/read": self.thread_read,
            "turn/start": self.turn_start,
            "turn/interrupt": self.turn_interrupt,
        }
        if method != "initialize" and not self.initialized:
            self.play("errors", "thread/start", message)  # recorded: "Not initialized"
            return
        handler = handlers.get(method)
        if handler is None:
            self.play("errors", "no/such/method", message)  # recorded: unknown variant
            return
        params = message.get("params")
        handler(message, params if isinstance(params, dict) else {})

    # ---------------------------------------------------------------- methods

    def initialize(self, message: dict[str, Any], params: dict[str, Any]) -> None:
        if self.initialized:
            self.play("errors", "initialize", message, nth=1)  # recorded: "Already initialized"
            return
        if self.scenario == "endless_line":
            self.endless_line()
        if self.scenario == "slow_initialize":
            time.sleep(3)
        self.initialized = True
        recorded = self.config_error or "turn"
        messages = self.replay.exchange(recorded, "initialize", message)
        for reply in messages:
            if self.scenario == "home_mismatch" and isinstance(reply.get("result"), dict):
                reply["result"]["codexHome"] = MISMATCHED_HOME
            self.send(reply)

    def thread_start(self, message: dict[str, Any], params: dict[str, Any]) -> None:
        if self.config_error is not None:
            self.play(self.config_error, "thread/start", message)
        elif self.scenario == "thread_start_error":
            self.play("errors", "thread/start", message, nth=1)  # an unrelated real refusal
        else:
            self.play("turn", "thread/start", message)

    def thread_resume(self, message: dict[str, Any], params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        if self.config_error is not None:
            self.play(self.config_error, "thread/start", message)
        elif thread_id == NO_SUCH_THREAD:
            self.play("errors", "thread/resume", message)  # recorded: no rollout found
        elif self.scenario == "active_writer":
            self.play("busy_thread", "thread/resume", message)
        else:
            self.play("resume", "thread/resume", message)

    def thread_read(self, message: dict[str, Any], params: dict[str, Any]) -> None:
        if self.scenario == "hang_read" and params.get("threadId") not in self.threads:
            return  # a read from disk that never answers
        self.play("resume", "thread/read", message)

    def turn_start(self, message: dict[str, Any], params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        if thread_id not in self.threads:
            self.play("busy_thread", "turn/start", message)  # recorded: thread not found
            return
        if self.scenario == "hang_turn_start":
            return  # never answers turn/start
        active = self.active_turns.get(str(thread_id))
        log_event({"turn_start": True, "steer": active is not None})
        if active is not None:
            # Recorded: a turn/start during an active turn steers it (same turn id).
            self.play("steer", "turn/start", message, nth=1)
        elif self.scenario == "hang_turn":
            self.play("steer", "turn/start", message)  # stays active until interrupted
        elif self.scenario == "endless_line_mid_turn":
            self.play("turn", "turn/start", message, stop_after=_method_is("turn/started"))
            self.endless_line()
        elif self.scenario == "crash_mid_turn":
            self.play(
                "turn", "turn/start", message, stop_after=_method_is("item/agentMessage/delta")
            )
            # Like a SIGKILLed native binary: no cleanup, no further output.
            os._exit(CRASH_EXIT_CODE)
        elif self.scenario == "approval":
            self.play("approval", "turn/start", message)  # resumes when the client answers
        else:
            self.play("turn", "turn/start", message)

    def turn_interrupt(self, message: dict[str, Any], params: dict[str, Any]) -> None:
        active = self.active_turns.get(str(params.get("threadId")))
        if active is None:
            self.play("interrupt", "turn/interrupt", message, nth=1)  # no active turn
            return
        self.pending_approval = None
        self.play("interrupt", "turn/interrupt", message)

    def endless_line(self) -> NoReturn:
        """A peer that never ends its line: bytes without a newline until the reader hangs up."""
        chunk = b"x" * (1 << 20)
        try:
            while True:
                self.out.write(chunk)
        except (BrokenPipeError, OSError):
            os._exit(0)

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
        if self.active_turns.get(pending.thread_id) == pending.turn_id:
            self.play("approval", "response", message)


# --------------------------------------------------------------------------------- main


def debug_models(scenario: str) -> int:
    log_event({"debug_models": True, "codex_home": os.environ.get("CODEX_HOME")})
    mode = os.environ.get("FAKE_CODEX_DEBUG_MODELS", "")
    if scenario in ("debug_models_fail", "catalog_legacy_always_debug_fail") or mode == "fail":
        sys.exit(2)  # the exit code is what the controller reads; no text needed
    if mode == "badjson":
        sys.stdout.write("not json\n")
        return 0
    (printed,) = load("debug_models")
    sys.stdout.write(json.dumps(printed["message"]) + "\n")
    return 0


def exit_early() -> NoReturn:
    (recorded,) = load("exit_early")
    home = os.environ.get("CODEX_HOME", "")
    die(recorded["message"]["stderr"].replace("<home>", home), recorded["message"]["exit_code"])


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
        exit_early()
    invocation = parse_argv(argv)
    if invocation.show_version:
        sys.stdout.write(f"codex-cli {pinned_version()}\n")
        return 0
    if invocation.command == ["debug", "models"]:
        return debug_models(scenario)
    if invocation.command == ["app-server"]:
        return FakeAppServer(scenario, invocation.overrides).run()
    shown = " ".join(invocation.command) or "(none)"
    die(f"error: unrecognized subcommand '{shown}'\n\n{USAGE}", 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

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
    garbage or an endless line on stdout, a crash at a precise moment, an early exit) are code;
    every message codex would send comes from a recording. Faults that need no process (an
    answer that never comes, a refusal, another home, a slow start) are the in-process
    scripted host's (scripted_host.py), not this program's.
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

from replay import (  # beside this script
    ANSWERS,
    NO_ROLLOUT,
    STEERED,
    Answer,
    Conversation,
    Replayer,
    load,
    pinned_version,
)

SCENARIOS = frozenset(
    {
        "ok",
        "catalog_legacy",
        "catalog_legacy_always",
        "garbage",
        "hang_turn",
        "stop_reading",
        "crash_mid_turn",
        "approval",
        "exit_early",
        "endless_line",
        "endless_line_mid_turn",
    }
)

NO_SUCH_THREAD = "no-such-thread"
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


class FakeAppServer:
    """Replays recorded exchanges in the order the client asks; faults are the only code here.

    Which recording answers what, in which state, is `replay.Conversation` (shared with the
    in-process scripted host). Single-threaded because every scenario is driven by client input.
    """

    def __init__(self, scenario: str, overrides: list[str]) -> None:
        self.scenario = scenario
        self.out = sys.stdout.buffer
        answers: dict[str, Answer] = {}
        legacy_catalog = scenario == "catalog_legacy_always"
        if scenario == "catalog_legacy":
            legacy_catalog = not catalog_override_is_usable(overrides)
        config_error = "old_catalog" if legacy_catalog else None
        if config_error is not None:
            answers = {
                "initialize": Answer(config_error, "initialize"),
                "thread/start": Answer(config_error, "thread/start"),
                "thread/resume": Answer(config_error, "thread/start"),
            }
        elif scenario == "hang_turn":
            answers = {"turn/start": Answer("steer", "turn/start")}  # active until interrupted
        elif scenario == "approval":
            answers = {"turn/start": Answer("approval", "turn/start")}  # waits for our answer
        self.talk = Conversation(Replayer(), answers)

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
        answer: Answer,
        live: dict[str, Any],
        *,
        stop_after: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        for message in self.talk.play(answer, live, stop_after=stop_after):
            self.send(message)

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
        answer = self.talk.answer(message)
        config_error = self.talk.answers["initialize"] != ANSWERS["initialize"]
        params = message.get("params")
        thread_id = params.get("threadId") if isinstance(params, dict) else None
        if answer == self.talk.answers.get(method):
            if method == "initialize":
                self.initialize(message, answer)
                return
            if method == "thread/resume" and thread_id == NO_SUCH_THREAD and not config_error:
                answer = NO_ROLLOUT
            elif method == "turn/start":
                self.turn_start(message, answer)
                return
        if method == "turn/start" and answer == STEERED:
            log_event({"turn_start": True, "steer": True})
        self.play(answer, message)

    # ---------------------------------------------------------------- methods

    def initialize(self, message: dict[str, Any], answer: Answer) -> None:
        if self.scenario == "endless_line":
            self.endless_line()
        self.play(answer, message)

    def turn_start(self, message: dict[str, Any], answer: Answer) -> None:
        log_event({"turn_start": True, "steer": False})
        if self.scenario == "endless_line_mid_turn":
            self.play(answer, message, stop_after=_method_is("turn/started"))
            self.endless_line()
        elif self.scenario == "crash_mid_turn":
            self.play(answer, message, stop_after=_method_is("item/agentMessage/delta"))
            # Like a SIGKILLed native binary: no cleanup, no further output.
            os._exit(CRASH_EXIT_CODE)
        else:
            self.play(answer, message)

    def endless_line(self) -> NoReturn:
        """A peer that never ends its line: bytes without a newline until the reader hangs up."""
        chunk = b"x" * (1 << 20)
        try:
            while True:
                self.out.write(chunk)
        except (BrokenPipeError, OSError):
            os._exit(0)

    def handle_client_response(self, message: dict[str, Any]) -> None:
        pending = self.talk.pending
        if pending is not None and message.get("id") == pending.request_id:
            result = message.get("result")
            if isinstance(result, dict):
                log_event({"approval_decision": result.get("decision")})
            else:
                log_event({"approval_decision": None, "approval_error": message.get("error")})
        for reply in self.talk.respond(message):
            self.send(reply)


# --------------------------------------------------------------------------------- main


def debug_models() -> int:
    log_event({"debug_models": True, "codex_home": os.environ.get("CODEX_HOME")})
    mode = os.environ.get("FAKE_CODEX_DEBUG_MODELS", "")
    if mode == "fail":
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
        return debug_models()
    if invocation.command == ["app-server"]:
        return FakeAppServer(scenario, invocation.overrides).run()
    shown = " ".join(invocation.command) or "(none)"
    die(f"error: unrecognized subcommand '{shown}'\n\n{USAGE}", 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

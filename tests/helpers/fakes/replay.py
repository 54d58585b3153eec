"""Replay of transcripts recorded from the real codex (tests/fixtures/codex-transcripts/).

Owns reading the pinned version's transcripts and turning one recorded exchange (a client
message and the server messages that followed it) into live messages: placeholders bound from
the live request (a thread id the client names), fresh ids for what the exchange introduced,
the live home, work folder and clock. It also owns `Conversation`: which recorded exchange
answers a client message in the state the recordings show codex in (not initialized, a turn
already active, no active turn, an unknown method), shared by the subprocess fake
(fake_codex.py) and the in-process scripted host (scripted_host.py). It never invents message
text: every string it returns comes from a recording, with only normalised placeholders
filled in.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "codex-transcripts"
_PLACEHOLDER = re.compile(r"<(uuid|msg|call):\d+>")


def pinned_version() -> str:
    """The codex version tools/codex/package.json pins: the transcripts of that one are used."""
    package = json.loads((ROOT / "tools" / "codex" / "package.json").read_text())
    return str(package["dependencies"]["@openai/codex"])


def load(scenario: str) -> list[dict[str, Any]]:
    doc = json.loads((FIXTURES / pinned_version() / f"{scenario}.json").read_text())
    return list(doc["transcript"])


def uuid7() -> str:
    """A UUIDv7 string, like the real server's thread and turn ids (time-ordered)."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= secrets.randbits(12) << 64
    value |= 0b10 << 62
    value |= secrets.randbits(62)
    return str(uuid.UUID(int=value))


def _fresh(placeholder: str) -> str:
    kind = placeholder[1:].split(":", 1)[0]
    if kind == "uuid":
        return uuid7()
    return f"{kind}_{secrets.token_hex(12)}"


def _placeholders(value: Any) -> set[str]:
    return {m.group(0) for m in _PLACEHOLDER.finditer(json.dumps(value))}


class Replayer:
    """Exchanges of the recorded scenarios, replayed with ids that stay consistent per scenario."""

    def __init__(self, cwd: str | None = None, home: str | None = None) -> None:
        self._files: dict[str, list[dict[str, Any]]] = {}
        self._bound: dict[str, dict[str, str]] = {}  # scenario -> placeholder -> live value
        self.cwd = cwd or os.getcwd()
        # The home codex reports: its own CODEX_HOME (the fake's env) unless given.
        self.home = home

    def transcript(self, scenario: str) -> list[dict[str, Any]]:
        if scenario not in self._files:
            self._files[scenario] = load(scenario)
        return self._files[scenario]

    def client_index(self, scenario: str, kind: str, nth: int = 0) -> int:
        """Index of the `nth` client message of `kind` (a method, or `response`)."""
        seen = 0
        for index, entry in enumerate(self.transcript(scenario)):
            if entry["from"] != "client":
                continue
            message = entry["message"]
            if message.get("method", "response") == kind:
                if seen == nth:
                    return index
                seen += 1
        raise LookupError(f"no client {kind} #{nth} recorded in {scenario}")

    def request(self, scenario: str, method: str, nth: int = 0) -> dict[str, Any]:
        return self.transcript(scenario)[self.client_index(scenario, method, nth)]["message"]

    def exchange(
        self, scenario: str, kind: str, live: dict[str, Any], nth: int = 0
    ) -> list[dict[str, Any]]:
        """The server messages that followed the recorded client message, made live.

        A response to the recorded request gets the live request's id; placeholders the
        recorded request shares with `live` take the live values.
        """
        entries = self.transcript(scenario)
        start = self.client_index(scenario, kind, nth)
        recorded = entries[start]["message"]
        earlier = _placeholders([e["message"] for e in entries[:start]])
        bound = self._bound.setdefault(scenario, {})
        binding: dict[str, str] = {}
        _bind(recorded.get("params"), live.get("params"), binding)
        out: list[dict[str, Any]] = []
        for entry in entries[start + 1 :]:
            if entry["from"] == "client":
                break
            message = dict(entry["message"])
            if "method" not in message and message.get("id") == recorded.get("id"):
                message["id"] = live.get("id")
            out.append(self._fill(message, binding, bound, earlier))
        bound.update(binding)
        return out

    def _fill(
        self, value: Any, binding: dict[str, str], bound: dict[str, str], earlier: set[str]
    ) -> Any:
        def live(match: re.Match[str]) -> str:
            key = match.group(0)
            if key not in binding:
                binding[key] = bound[key] if key in earlier and key in bound else _fresh(key)
            return binding[key]

        def walk(item: Any, key: str | None = None) -> Any:
            if item == "<time>":
                now = time.time()
                return int(now * 1000) if key and key.endswith("Ms") else int(now)
            if isinstance(item, dict):
                return {k: walk(v, k) for k, v in item.items()}
            if isinstance(item, list):
                return [walk(v) for v in item]
            if isinstance(item, str):
                text = _PLACEHOLDER.sub(live, item)
                home = self.home or os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
                return (
                    text.replace("<home>", home)
                    .replace("<cwd>", self.cwd)
                    .replace("<user-agent>", f"loopx_chat/{pinned_version()} (fake codex)")
                    .replace("<host>", "fake-host")
                )
            return item

        return walk(value)


def _bind(recorded: Any, live: Any, binding: dict[str, str]) -> None:
    if isinstance(recorded, str) and isinstance(live, str):
        if _PLACEHOLDER.fullmatch(recorded):
            binding[recorded] = live
    elif isinstance(recorded, dict) and isinstance(live, dict):
        for key, value in recorded.items():
            if key in live:
                _bind(value, live[key], binding)
    elif isinstance(recorded, list) and isinstance(live, list):
        for a, b in zip(recorded, live, strict=False):
            _bind(a, b, binding)


def recorded_reply(scenario: str = "turn") -> str:
    """The agent text of the scenario's first turn, as codex streamed it (for assertions)."""
    deltas = [
        e["message"]["params"]["delta"]
        for e in load(scenario)
        if e["message"].get("method") == "item/agentMessage/delta"
    ]
    return "".join(deltas)


def recorded_turn_tokens(scenario: str = "turn") -> int:
    """The total tokens codex reported for the scenario's first turn."""
    for entry in load(scenario):
        if entry["message"].get("method") == "thread/tokenUsage/updated":
            return int(entry["message"]["params"]["tokenUsage"]["total"]["totalTokens"])
    raise LookupError(f"no token usage recorded in {scenario}")


@dataclass(frozen=True)
class Answer:
    """A recorded exchange: what codex said after the `nth` client message `kind` (a method,
    or `response`) of the recording `scenario`."""

    scenario: str
    kind: str
    nth: int = 0


# The plain answer to each request the client sends, as the pinned codex gave it.
ANSWERS: Mapping[str, Answer] = {
    "initialize": Answer("turn", "initialize"),
    "thread/start": Answer("turn", "thread/start"),
    "thread/resume": Answer("resume", "thread/resume"),
    "thread/read": Answer("resume", "thread/read"),
    "turn/start": Answer("turn", "turn/start"),
    "turn/interrupt": Answer("interrupt", "turn/interrupt"),
}
# Answers that depend on the state codex is in, each recorded.
NOT_INITIALIZED = Answer("errors", "thread/start")  # "Not initialized"
ALREADY_INITIALIZED = Answer("errors", "initialize", 1)  # "Already initialized"
UNKNOWN_METHOD = Answer("errors", "no/such/method")  # "unknown variant"
NO_ROLLOUT = Answer("errors", "thread/resume")  # "no rollout found for thread id"
THREAD_NOT_FOUND = Answer("busy_thread", "turn/start")  # a turn on a thread never loaded
STEERED = Answer("steer", "turn/start", 1)  # a turn/start during an active turn: same id
NO_ACTIVE_TURN = Answer("interrupt", "turn/interrupt", 1)
APPROVAL_ANSWERED = Answer("approval", "response")  # the turn goes on once answered


@dataclass(frozen=True)
class PendingRequest:
    """A server request (an approval) codex sent and waits on."""

    request_id: int
    thread_id: str
    turn_id: str


class Conversation:
    """One app-server's side of the protocol, as the recordings show codex holding it.

    Picks the recorded answer to each client message (`answers` replaces the plain answer of
    a method: a fault scenario's recording) and tracks what the replayed messages create: the
    loaded threads, the active turn of each, the server request waiting for an answer.
    """

    def __init__(self, replay: Replayer, answers: Mapping[str, Answer] | None = None) -> None:
        self.replay = replay
        self.answers = {**ANSWERS, **(answers or {})}
        self.initialized = False
        self.threads: set[str] = set()
        self.active_turns: dict[str, str] = {}  # thread id -> turn id
        self.pending: PendingRequest | None = None

    def answer(self, message: Mapping[str, Any]) -> Answer:
        """The recorded answer to a client request in the current state."""
        method = message.get("method")
        raw = message.get("params")
        params: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        if method == "initialize":
            return ALREADY_INITIALIZED if self.initialized else self.answers["initialize"]
        if not self.initialized:
            return NOT_INITIALIZED
        thread_id = str(params.get("threadId"))
        if method == "turn/start":
            if thread_id not in self.threads:
                return THREAD_NOT_FOUND
            if thread_id in self.active_turns:
                return STEERED
        if method == "turn/interrupt" and thread_id not in self.active_turns:
            return NO_ACTIVE_TURN
        return self.answers.get(str(method), UNKNOWN_METHOD)

    def play(
        self,
        answer: Answer,
        live: dict[str, Any],
        *,
        stop_after: Callable[[dict[str, Any]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """The recorded exchange made live, up to `stop_after`'s first match (a truncation)."""
        if live.get("method") == "initialize":
            self.initialized = True
        if live.get("method") == "turn/interrupt":
            self.pending = None
        out: list[dict[str, Any]] = []
        for message in self.replay.exchange(answer.scenario, answer.kind, live, answer.nth):
            self._track(message)
            out.append(message)
            if stop_after is not None and stop_after(message):
                break
        return out

    def respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """What codex says after the client answers its pending server request."""
        pending = self.pending
        if pending is None or message.get("id") != pending.request_id:
            return []  # an answer to nothing asked: codex ignores it as well
        self.pending = None
        if self.active_turns.get(pending.thread_id) != pending.turn_id:
            return []
        return self.play(APPROVAL_ANSWERED, message)

    def _track(self, message: Mapping[str, Any]) -> None:
        params = message.get("params") or {}
        result = message.get("result")
        thread = result.get("thread") if isinstance(result, dict) else None
        if isinstance(thread, dict) and isinstance(thread.get("id"), str):
            self.threads.add(thread["id"])
        method = message.get("method")
        if method == "turn/started":
            self.active_turns[params["threadId"]] = params["turn"]["id"]
        elif method == "turn/completed":
            self.active_turns.pop(params.get("threadId"), None)
        elif method is not None and "id" in message:  # a server request: it waits for us
            self.pending = PendingRequest(
                message["id"], params.get("threadId", ""), params.get("turnId", "")
            )

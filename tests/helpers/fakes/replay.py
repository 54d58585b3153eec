"""Replay of transcripts recorded from the real codex (tests/fixtures/codex-transcripts/).

Owns reading the pinned version's transcripts and turning one recorded exchange (a client
message and the server messages that followed it) into live messages: placeholders bound from
the live request (a thread id the client names), fresh ids for what the exchange introduced,
the live home, work folder and clock. It never invents message text: every string it returns
comes from a recording, with only normalised placeholders filled in.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import uuid
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

    def __init__(self, cwd: str | None = None) -> None:
        self._files: dict[str, list[dict[str, Any]]] = {}
        self._bound: dict[str, dict[str, str]] = {}  # scenario -> placeholder -> live value
        self.cwd = cwd or os.getcwd()

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
                home = os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
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

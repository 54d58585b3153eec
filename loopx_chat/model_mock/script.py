"""What the mock model answers, as data: a script a person writes in JSON, no Python.

Owns `MockScript` and `GoalLane` (frozen records) and `parse_script` (PURE: a parsed JSON
document → a script, or `ScriptRefused` saying which key is wrong and why). A script is

    {
      "requests": ["mock:text=first answer", "..."],   # the next requests, in order
      "default": "mock:text=what every later request gets",
      "goals": [                                        # continuation turns of a goal run,
        {"objective": "Count to three",                 # by words of its objective
         "requests": ["mock:call=update_goal {\\"status\\": \\"complete\\"}", "mock:text=done"],
         "default": "mock:text=working on it"}
      ]
    }

Each entry is what one model request answers, written as the directives the mock reads in a
user's message (`mock:text=`, `mock:shell=`, `mock:call=NAME {json}`, `mock:slow=`,
`mock:error=`, `mock:fail`, `mock:hang`, `mock:usage_limit=`; `responses.py` lists them).
Every key is optional; without a script the mock answers each message's own directives.

What it must never do: read a file, touch the network, or accept a key it does not know
(a typo would otherwise be a script that silently does nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_ENTRIES = 1000
MAX_ENTRY_CHARS = 4000
_TOP_KEYS = frozenset({"requests", "default", "goals"})
_LANE_KEYS = frozenset({"objective", "requests", "default"})


class ScriptRefused(ValueError):
    """The document is not a script; the message names the key and what is wrong."""


@dataclass(frozen=True)
class GoalLane:
    """The continuation turns of a goal whose objective contains `objective`."""

    objective: str
    requests: tuple[str, ...] = ()
    default: str | None = None


@dataclass(frozen=True)
class MockScript:
    requests: tuple[str, ...] = ()
    default: str | None = None
    goals: tuple[GoalLane, ...] = ()


def _entry(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ScriptRefused(f"{where} must be a non-empty string (directives such as mock:text=…)")
    if len(value) > MAX_ENTRY_CHARS:
        raise ScriptRefused(f"{where} is longer than {MAX_ENTRY_CHARS} characters")
    return value


def _entries(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ScriptRefused(f"{where} must be a list of strings")
    if len(value) > MAX_ENTRIES:
        raise ScriptRefused(f"{where} has more than {MAX_ENTRIES} entries")
    return tuple(_entry(item, f"{where}[{i}]") for i, item in enumerate(value))


def _keys(doc: Any, allowed: frozenset[str], where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ScriptRefused(f"{where} must be a JSON object")
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise ScriptRefused(
            f"{where} has unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})"
        )
    return doc


def _default(value: Any, where: str) -> str | None:
    return None if value is None else _entry(value, where)


def parse_script(doc: Any) -> MockScript:
    """The script a parsed JSON document describes, or `ScriptRefused`."""
    top = _keys(doc, _TOP_KEYS, "the script")
    lanes_doc = top.get("goals", [])
    if not isinstance(lanes_doc, list) or len(lanes_doc) > MAX_ENTRIES:
        raise ScriptRefused(f"goals must be a list of at most {MAX_ENTRIES} objects")
    lanes = []
    for i, lane_doc in enumerate(lanes_doc):
        lane = _keys(lane_doc, _LANE_KEYS, f"goals[{i}]")
        lanes.append(
            GoalLane(
                objective=_entry(lane.get("objective"), f"goals[{i}].objective"),
                requests=_entries(lane.get("requests"), f"goals[{i}].requests"),
                default=_default(lane.get("default"), f"goals[{i}].default"),
            )
        )
    return MockScript(
        requests=_entries(top.get("requests"), "requests"),
        default=_default(top.get("default"), "default"),
        goals=tuple(lanes),
    )

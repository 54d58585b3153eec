"""Field pickers: the privacy boundary between an untrusted rollout value and a kept fact.

What this module owns:
  * the narrow patterns (ids, enum-like kinds, timestamps, model names) a value must match to
    be kept, the token-total keys, and the `_pick_*` functions that return a value only if it
    may be kept (a model named by a path comes back as "path-redacted");
  * the `_need*` / `_opt` checks that turn a picked value into a ValueError when an index
    (or a stored position) holds a shape we did not write.

What it must never do:
  * return free text, a message, or a path: anything not matching its pattern is None;
  * do I/O or keep state: every answer is a function of its argument.
"""

from __future__ import annotations

import re
from typing import Any

# What we are willing to keep from a rollout: ids, enum-like kinds and timestamps, each checked
# against a narrow pattern so that no free text (or path) can ride along in a fact.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")
_TIMESTAMP = re.compile(r"[0-9T:.Z+\-]{1,40}")
_MODEL = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")

_TOKEN_KEYS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)


def _pick_id(value: object) -> str | None:
    return value if isinstance(value, str) and _ID.fullmatch(value) else None


def _pick_kind(value: object) -> str | None:
    return value if isinstance(value, str) and _KIND.fullmatch(value) else None


def _pick_time(value: object) -> str | None:
    return value if isinstance(value, str) and _TIMESTAMP.fullmatch(value) else None


def _pick_int(value: object) -> int | None:
    # bool is an int in Python; a JSON true is not a count.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pick_model(value: object) -> str | None:
    if not isinstance(value, str) or not _MODEL.fullmatch(value):
        return None
    # A local provider may name its model by file path; facts never carry a path.
    if value.startswith(("/", "~", "\\", "./", "../")) or _DRIVE.match(value):
        return "path-redacted"
    return value


def _pick_error_code(error: object) -> str | None:
    """The compact kind of a turn error: `codex_error_info` or its first key. Never the message."""
    if not isinstance(error, dict):
        return None
    info = error.get("codex_error_info")
    if isinstance(info, dict):
        info = next(iter(info), None)
    if info is None:
        return None
    return _pick_kind(info) or "unrecognized"


def _pick_tokens(usage: object) -> tuple[int, ...] | None:
    if not isinstance(usage, dict):
        return None
    return tuple(_pick_int(usage.get(key)) or 0 for key in _TOKEN_KEYS)


def _need(value: Any) -> Any:
    if value is None:
        raise ValueError("missing or invalid value")
    return value


def _need_int(value: Any) -> int:
    picked = _pick_int(value)
    if picked is None or picked < 0:
        raise ValueError("not a count")
    return picked


def _opt(value: Any, picker: Any) -> Any:
    return None if value is None else _need(picker(value))

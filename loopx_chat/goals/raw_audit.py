"""Raw material on a goal's own record files, found by key name at any depth.

Owns one rule: a key the projection core's classifier calls raw material (a transcript, a
credential, a log, a local path, raw output) anywhere in a goal's records. loopx-chat's own
writers refuse such records (`raw_material_refused`), so this finds what reached the files
another way: a hand edit, another tool, an older loopx-chat. `goal run` refuses on it
(`raw_material_detected`) and the status row and quota say so, so the two never disagree.

A raw-named key that carries nothing (true/false, null, empty) is a flag, not material: the
host gate's `secret` says whether a question was secret, and the OpenViking contract's
`raw_memory_copied: false` is its promise. It reports file names and key paths only, never
a value, and it never changes a record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

MAX_FOUND = 5  # enough to name what to fix; the rest is the same kind of finding


def raw_key_paths(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Dotted paths of raw-material keys in `records`, first-seen order, at most MAX_FOUND."""
    from loopx_chat.session_runtime.keys import KeyState, classify_session_runtime_key

    found: list[str] = []
    for record in records:
        for path, key, value in _keys(record, ""):
            if not _carries(value):
                continue
            if classify_session_runtime_key(key).state is KeyState.RAW_MATERIAL:
                if path not in found:
                    found.append(path)
                if len(found) >= MAX_FOUND:
                    return found
    return found


def _carries(value: object) -> bool:
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, str | bytes | Mapping | list | tuple):
        return len(value) > 0
    return True


def _keys(value: object, prefix: str) -> Iterator[tuple[str, str, object]]:
    if isinstance(value, Mapping):
        for key, child in value.items():
            name = str(key)
            path = f"{prefix}.{name}" if prefix else name
            yield path, name, child
            yield from _keys(child, path)
    elif isinstance(value, list | tuple):
        for child in value:
            yield from _keys(child, f"{prefix}[]")

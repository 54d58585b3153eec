"""The pure, read-only session-runtime projection core.

Owns turning compact host facts (sessions, events, outcomes, gates, artifacts, decision
results) into the ``session_runtime_readonly_projection_v0`` first screen, classifying key
names as compact or raw material, and compacting the projection for run history and status.
It must never do I/O, read a clock or the environment, start a process, write back to the
host, or import anything else from ``loopx_chat``: every answer is a function of its
arguments alone.
"""

from __future__ import annotations

from loopx_chat.session_runtime.compact import (
    compact_session_runtime_projection_from_run,
    compact_session_runtime_readonly_projection,
    session_runtime_projection_attention,
    session_runtime_status_waiting_on,
)
from loopx_chat.session_runtime.keys import (
    KeyClassification,
    KeyState,
    RawMaterialCategory,
    classify_session_runtime_key,
    split_key_words,
)
from loopx_chat.session_runtime.projection import (
    SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
    UNCLASSIFIED_KEY_LIMIT,
    build_session_runtime_readonly_projection,
)

__all__ = [
    "SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION",
    "UNCLASSIFIED_KEY_LIMIT",
    "KeyClassification",
    "KeyState",
    "RawMaterialCategory",
    "build_session_runtime_readonly_projection",
    "classify_session_runtime_key",
    "compact_session_runtime_projection_from_run",
    "compact_session_runtime_readonly_projection",
    "session_runtime_projection_attention",
    "session_runtime_status_waiting_on",
    "split_key_words",
]

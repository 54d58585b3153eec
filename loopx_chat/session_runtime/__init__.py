"""The pure, read-only session-runtime projection core.

Owns turning compact host facts (sessions, events, outcomes, gates, artifacts, decision
results) into the ``session_runtime_readonly_projection_v0`` first screen, classifying key
names as compact or raw material, and compacting the projection for run history and status.
It must never do I/O, read a clock or the environment, start a process, write back to the
host, or import anything else from ``loopx_chat``: every answer is a function of its
arguments alone.
"""

from __future__ import annotations

from loopx_chat.session_runtime._text import unsafe_text_class
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
from loopx_chat.session_runtime.openviking import (
    OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
    assert_valid_openviking_session_memory_adapter,
    build_openviking_session_memory_adapter,
    validate_openviking_session_memory_adapter,
)
from loopx_chat.session_runtime.projection import (
    SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
    UNCLASSIFIED_KEY_LIMIT,
    build_session_runtime_readonly_projection,
)
from loopx_chat.session_runtime.writeback import (
    WRITEBACK_RESULT_SCHEMA_VERSION,
    WRITEBACK_SCHEMA_VERSION,
    EntryFacts,
    WritebackPlan,
    build_writeback,
    check_entry_criteria,
    idempotency_key,
    validate_writeback_document,
    writeback_result,
)

__all__ = [
    "OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION",
    "SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION",
    "UNCLASSIFIED_KEY_LIMIT",
    "WRITEBACK_RESULT_SCHEMA_VERSION",
    "WRITEBACK_SCHEMA_VERSION",
    "EntryFacts",
    "KeyClassification",
    "KeyState",
    "RawMaterialCategory",
    "WritebackPlan",
    "assert_valid_openviking_session_memory_adapter",
    "build_openviking_session_memory_adapter",
    "build_session_runtime_readonly_projection",
    "build_writeback",
    "check_entry_criteria",
    "classify_session_runtime_key",
    "compact_session_runtime_projection_from_run",
    "compact_session_runtime_readonly_projection",
    "idempotency_key",
    "session_runtime_projection_attention",
    "session_runtime_status_waiting_on",
    "split_key_words",
    "unsafe_text_class",
    "validate_openviking_session_memory_adapter",
    "validate_writeback_document",
    "writeback_result",
]

"""The pure, read-only session-runtime projection core.

Owns turning compact host facts (sessions, events, outcomes, gates, artifacts, decision
results) into the ``session_runtime_readonly_projection_v0`` first screen, classifying key
names as compact or raw material, and compacting the projection for run history and status.
It must never do I/O, read a clock or the environment, start a process, write back to the
host, or import anything else from ``loopx_chat``: every answer is a function of its
arguments alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopx_chat.session_runtime._text import unsafe_text_class
    from loopx_chat.session_runtime.compact import (
        compact_session_runtime_projection_from_run,
        compact_session_runtime_readonly_projection,
        session_runtime_projection_attention,
        session_runtime_status_waiting_on,
    )
    from loopx_chat.session_runtime.contract import build_session_runtime_readonly_contract
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

# Importing one submodule (say `_text`) must not import them all: each name loads its
# module on first use, so a command that needs one rule pays for that rule only.
_EXPORTS: dict[str, str] = {
    "unsafe_text_class": "loopx_chat.session_runtime._text",
    "compact_session_runtime_projection_from_run": "loopx_chat.session_runtime.compact",
    "compact_session_runtime_readonly_projection": "loopx_chat.session_runtime.compact",
    "session_runtime_projection_attention": "loopx_chat.session_runtime.compact",
    "session_runtime_status_waiting_on": "loopx_chat.session_runtime.compact",
    "build_session_runtime_readonly_contract": "loopx_chat.session_runtime.contract",
    "KeyClassification": "loopx_chat.session_runtime.keys",
    "KeyState": "loopx_chat.session_runtime.keys",
    "RawMaterialCategory": "loopx_chat.session_runtime.keys",
    "classify_session_runtime_key": "loopx_chat.session_runtime.keys",
    "split_key_words": "loopx_chat.session_runtime.keys",
    "OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION": "loopx_chat.session_runtime.openviking",
    "assert_valid_openviking_session_memory_adapter": "loopx_chat.session_runtime.openviking",
    "build_openviking_session_memory_adapter": "loopx_chat.session_runtime.openviking",
    "validate_openviking_session_memory_adapter": "loopx_chat.session_runtime.openviking",
    "SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION": "loopx_chat.session_runtime.projection",
    "UNCLASSIFIED_KEY_LIMIT": "loopx_chat.session_runtime.projection",
    "build_session_runtime_readonly_projection": "loopx_chat.session_runtime.projection",
    "WRITEBACK_RESULT_SCHEMA_VERSION": "loopx_chat.session_runtime.writeback",
    "WRITEBACK_SCHEMA_VERSION": "loopx_chat.session_runtime.writeback",
    "EntryFacts": "loopx_chat.session_runtime.writeback",
    "WritebackPlan": "loopx_chat.session_runtime.writeback",
    "build_writeback": "loopx_chat.session_runtime.writeback",
    "check_entry_criteria": "loopx_chat.session_runtime.writeback",
    "idempotency_key": "loopx_chat.session_runtime.writeback",
    "validate_writeback_document": "loopx_chat.session_runtime.writeback",
    "writeback_result": "loopx_chat.session_runtime.writeback",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # The builtin `__import__`, so the pure core imports nothing beyond its allowed modules.
    value = getattr(__import__(module, fromlist=(name,)), name)
    globals()[name] = value
    return value


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
    "build_session_runtime_readonly_contract",
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

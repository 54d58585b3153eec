"""Controlled writeback's document validator.

Owns deciding whether any document is a valid ``session_runtime_controlled_writeback_v0``
(``validate_writeback_document``), including one the I/O side applied after its preview
(``writeback.mode`` ``apply``). It must never build, repair or apply a document, never
raise, never quote a value in a problem (``"<code>: <path>"`` only), never do I/O, read a
clock or the environment, and never import from the rest of ``loopx_chat``. The rules it
checks live in writeback_contract.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopx_chat.session_runtime.writeback_contract import (
    BOUNDARY_FLAGS,
    RESULT_STATUSES,
    SOURCE_EVENT_CLASSES,
    SOURCE_ID_FIELDS,
    WRITE_CLASSES,
    WRITEBACK_MODES,
    WRITEBACK_SCHEMA_VERSION,
    _check_payload,
    _is_identity,
    _is_ref,
    _names,
    _run_part,
    _shown,
    idempotency_key,
)

TOP_LEVEL_FIELDS: tuple[str, ...] = (
    "schema_version",
    "goal_id",
    "agent_id",
    "runtime",
    "loopx_source",
    "writeback",
    "boundary",
    "result",
)
SECTION_FIELDS: Mapping[str, tuple[str, ...]] = {
    "runtime": ("runtime_id", "session_id"),
    "loopx_source": ("source_run_id", "source_todo_id", "source_event_class"),
    "writeback": ("write_class", "mode", "idempotency_key", "payload"),
    "boundary": BOUNDARY_FLAGS,
    "result": ("status", "runtime_event_id", "loopx_writeback_run_id"),
}


def _closed(obj: Mapping[Any, Any], path: str, fields: tuple[str, ...], out: list[str]) -> None:
    for key in obj:
        if key not in fields:
            out.append(f"unknown_field: {path}{_shown(key)}")
    for key in fields:
        if key not in obj:
            out.append(f"missing_field: {path}{key}")


def validate_writeback_document(doc: object) -> list[str]:
    """Problems with ``doc`` as a ``session_runtime_controlled_writeback_v0``; [] if valid.

    Never raises and never quotes a value: each problem is ``"<code>: <path>"``.
    """
    out: list[str] = []
    if not isinstance(doc, Mapping):
        return ["not_an_object: <document>"]
    _closed(doc, "", TOP_LEVEL_FIELDS, out)
    if "schema_version" in doc and doc["schema_version"] != WRITEBACK_SCHEMA_VERSION:
        out.append("wrong_schema_version: schema_version")
    sections: dict[str, Mapping[Any, Any]] = {}
    for name, fields in SECTION_FIELDS.items():
        value = doc.get(name)
        if name not in doc:
            continue
        if not isinstance(value, Mapping):
            out.append(f"invalid_section: {name}")
            continue
        _closed(value, f"{name}.", fields, out)
        sections[name] = value

    for name in ("goal_id", "agent_id"):
        if name in doc and not _is_identity(doc[name]):
            out.append(f"invalid_id: {name}")
    runtime = sections.get("runtime", {})
    for name in ("runtime_id", "session_id"):
        if name in runtime and not _is_identity(runtime[name]):
            out.append(f"invalid_id: runtime.{name}")
    source = sections.get("loopx_source", {})
    for name in SOURCE_ID_FIELDS:
        if source.get(name) is not None and not _is_identity(source[name]):
            out.append(f"invalid_id: loopx_source.{name}")
    if source and source.get("source_run_id") is None and source.get("source_todo_id") is None:
        out.append("missing_source_id: loopx_source (a run id or a todo id)")

    writeback = sections.get("writeback", {})
    write_class = writeback.get("write_class")
    known_class = (
        write_class if isinstance(write_class, str) and write_class in WRITE_CLASSES else None
    )
    if "write_class" in writeback and known_class is None:
        out.append("unknown_enum: writeback.write_class")
    if "mode" in writeback and writeback["mode"] not in WRITEBACK_MODES:
        out.append("unknown_enum: writeback.mode")
    event_class = source.get("source_event_class")
    if "source_event_class" in source and not _is_identity(event_class):
        out.append("invalid_id: loopx_source.source_event_class")
    elif known_class and event_class not in SOURCE_EVENT_CLASSES[known_class]:
        out.append("source_event_mismatch: loopx_source.source_event_class")
    if known_class and "payload" in writeback:
        check = _check_payload(known_class, writeback["payload"])
        if check.reason_code is not None:
            out.append(f"{check.reason_code}: writeback.payload ({_names(check.key_names)})")
    if "idempotency_key" in writeback:
        run_part = _run_part(source.get("source_run_id"), source.get("source_todo_id"))
        expected = (
            idempotency_key(str(doc.get("goal_id")), str(run_part), known_class)
            if known_class and run_part
            else None
        )
        if expected is None or writeback["idempotency_key"] != expected:
            out.append("inconsistent_idempotency_key: writeback.idempotency_key")

    boundary = sections.get("boundary", {})
    for name in BOUNDARY_FLAGS:
        if name in boundary and boundary[name] is not False:
            out.append(f"boundary_flag_not_false: boundary.{name}")
    result = sections.get("result", {})
    if "status" in result and result["status"] not in RESULT_STATUSES:
        out.append("unknown_enum: result.status")
    for name in ("runtime_event_id", "loopx_writeback_run_id"):
        if result.get(name) is not None and not _is_ref(result[name]):
            out.append(f"invalid_id: result.{name}")
    return out

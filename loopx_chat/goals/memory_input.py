"""A goal's OpenViking memory input, and the compact `memory` field of its status row.

Owns `<state>/goals/<goal>/openviking_memory.jsonl` (append-only, the latest record wins, the
history is kept; a `cleared` record removes the field). Each record holds what the read-only
OpenViking session-memory adapter made of the owner's input, never the input itself: the
adapter's `issue_projection` (provider, repo, issue number, a title summary) and its
`memory_projection` (namespace, retrieval mode, a query summary, at most a few candidate
refs with a public-safe summary each). Raw material is refused by key name, at any depth,
before anything is written (`raw_material_refused`). The status row's `memory` is rebuilt
from the stored record through the same builder, so it is exactly what the adapter
validates. It never retrieves, never writes memory anywhere, never reads an issue body.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from loopx_chat.errors import UsageError
from loopx_chat.goals.goal_ledger import GoalLedger, refuse_raw_keys
from loopx_chat.session_runtime.openviking import (
    OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
    build_openviking_session_memory_adapter,
)
from loopx_chat.session_runtime.openviking_contract import FLAG_NAMES, FLAG_SUFFIXES
from loopx_chat.state.jsonl import append_record, read_records

MEMORY_INPUT_SCHEMA = "loopx_chat_openviking_memory_input_v1"
MEMORY_INPUT_FILE = "openviking_memory.jsonl"
INPUT_SECTIONS = ("issue", "memory")


def _adapter(goal_id: str, issue: object, memory: object) -> dict[str, Any]:
    return build_openviking_session_memory_adapter(
        goal_id=goal_id,
        issue=issue if isinstance(issue, Mapping) else {},
        sessions=[],
        memory=memory if isinstance(memory, Mapping) else {},
        status={},
        evidence={},
    )


def _refuse_raw(value: object, what: str) -> None:
    """Raw keys anywhere in the input. The contract's own flags (`raw_memory_copied`...) are
    not raw material when false, its promise; true would claim a copy or a live action."""
    if isinstance(value, Mapping):
        flags = {k for k in value if isinstance(k, str) and _is_flag(k)}
        claimed = sorted(k for k in flags if value[k] is not False)
        if claimed:
            raise UsageError(
                f"{what} refused: {', '.join(claimed)} must be false (the adapter never "
                "copies raw material or retrieves); nothing was written",
                error_code="raw_material_refused",
            )
        refuse_raw_keys({k: v for k, v in value.items() if k not in flags}, what)
        for child in value.values():
            _refuse_raw(child, what)
    elif isinstance(value, list | tuple):
        for child in value:
            _refuse_raw(child, what)


def _is_flag(key: str) -> bool:
    return key in FLAG_NAMES or key.endswith(FLAG_SUFFIXES)


def set_memory_input(
    records: GoalLedger, goal_id: str, doc: object, *, actor: str = "owner"
) -> dict[str, Any]:
    """Store the adapter's reading of `{"issue": {...}, "memory": {...}}` for the goal."""
    if not isinstance(doc, Mapping) or sorted(doc) != sorted(INPUT_SECTIONS):
        raise UsageError(
            'the OpenViking memory input is a JSON object {"issue": {...}, "memory": {...}}: '
            "the issue (provider, repo, issue_number, title_summary) and the memory preview "
            "(namespace, retrieval_mode, query_summary, top_k_preview, candidate_refs)",
            error_code="input_invalid",
        )
    _refuse_raw(doc, "OpenViking memory input")
    try:
        adapter = _adapter(goal_id, doc["issue"], doc["memory"])
    except ValueError as exc:  # codes and field paths only, never values
        raise UsageError(
            f"the OpenViking memory input makes no valid adapter ({exc}); nothing was written",
            error_code="input_invalid",
        ) from None
    return _append(
        records,
        goal_id,
        actor,
        cleared=False,
        issue=adapter["issue_projection"],
        memory=adapter["memory_projection"],
    )


def clear_memory_input(
    records: GoalLedger, goal_id: str, *, actor: str = "owner"
) -> dict[str, Any]:
    return _append(records, goal_id, actor, cleared=True)


def _append(records: GoalLedger, goal_id: str, actor: str, **fields: Any) -> dict[str, Any]:
    record = {
        "schema_version": MEMORY_INPUT_SCHEMA,
        "record_id": "memory-" + uuid.uuid4().hex[:12],
        "goal_id": goal_id,
        "created_at": records.goals.now(),
        "actor": actor,
        **fields,
    }
    with records.goals.locked(goal_id) as folder:
        append_record(folder / MEMORY_INPUT_FILE, record)
    return record


def memory_input(records: GoalLedger, goal_id: str) -> dict[str, Any] | None:
    """The record in force, or None (never set, or cleared)."""
    return current_memory_input(
        read_records(records.goals.goal_dir(goal_id) / MEMORY_INPUT_FILE, MEMORY_INPUT_SCHEMA)
    )


def current_memory_input(history: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The last record of `openviking_memory.jsonl` unless it clears the input (pure)."""
    latest = history[-1] if history else None
    return latest if latest and not latest.get("cleared") else None


def memory_field(records: GoalLedger, goal_id: str) -> dict[str, Any] | None:
    """The status row's `memory`: the adapter's memory section for the goal, or None."""
    return memory_field_from(goal_id, memory_input(records, goal_id))


def memory_field_from(goal_id: str, stored: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`memory_field` of the record in force (`current_memory_input`), pure."""
    if stored is None:
        return None
    try:
        adapter = _adapter(goal_id, stored.get("issue"), stored.get("memory"))
    except ValueError:
        # Edited by hand into something the adapter refuses: say so, show nothing of it.
        return {
            "schema_version": OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
            "error_code": "input_invalid",
        }
    return {
        "schema_version": OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
        "issue_ref_id": adapter["issue_projection"]["issue_ref_id"],
        "memory_state": adapter["status_projection"]["memory_state"],
        **adapter["memory_projection"],
    }

"""The spec's first public contract: ``session_runtime_readonly_projection_v0`` as a product
surface reads it.

Owns the contract document (``source``, ``session_facts``, ``goal_projection``), built from
the same compact facts as the first screen: the builder (projection.py) decides, its compact
form (compact.py) makes every text public-safe, and this module only reshapes and adds two
closed summaries of the inputs (``outcome_status``, ``approval_state``). The JSON Schema of the
document ships beside it (``CONTRACT_SCHEMA_FILE``, package data). It must never do I/O, carry
a source id (``source_ids_redacted`` is always true: ids become counts), copy a value that
sits under a raw-material key, or raise on JSON-shaped input.

Open points resolved here (the spec shapes the document, and is silent on these):
- ``goal_id`` is added at the top (a product surface reads many goals); ``source`` adds
  ``source_ref_counts`` (the compact source pointers of the spec's Phase 1); ``goal_projection``
  adds ``latest_blocker``, ``gate_state`` and ``agent_can_continue`` (the first screen's
  "validation or blocker", "gate state" and "can the agent continue now").
- ``waiting_on`` is in the status vocabulary (``codex``, ``user_or_controller``,
  ``external_evidence``, ``monitor_signal``), as the spec's sample shows ``codex``.
- ``next_action`` is never null: the recommended action, else the status layer's default.
- ``outcome_status`` reads the latest outcome (the projection's "latest" rule): blocked wins
  over validated when one outcome says both; ``none`` without outcomes; ``other`` otherwise.
- ``source_ids_redacted`` holds for texts too: an input's source id (``SOURCE_ID_KEYS``)
  standing alone in a text ("turn 7f3a... completed") is replaced by ``<id>``. An id is
  matched whole, never inside a longer word or id.
- ``approval_state`` is ``pending`` while a blocking gate holds the goal, else the decision
  of the most recently decided gate (``approved`` / ``rejected``), else ``none``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from loopx_chat.session_runtime.compact import (
    ATTENTION_DEFAULT_ACTION,
    compact_session_runtime_readonly_projection,
    session_runtime_status_waiting_on,
)
from loopx_chat.session_runtime.keys import TIMESTAMP_KEYS
from loopx_chat.session_runtime.projection import (
    BLOCKED_STATUSES,
    BLOCKER_KIND,
    BLOCKER_SIGNAL_KEYS,
    HOST_KIND,
    KIND_KEYS,
    OPEN_GATE_STATUSES,
    SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
    SOURCE_GROUPS,
    SOURCE_ID_KEYS,
    STATUS_KEYS,
    VALIDATED_STATUSES,
    VALIDATION_SIGNAL_KEYS,
    build_session_runtime_readonly_projection,
)
from loopx_chat.session_runtime.projection import _items as builder_items

CONTRACT_SCHEMA_FILE = "session_runtime_readonly_projection_v0.schema.json"
CONTRACT_SCHEMA_ID = "urn:loopx-chat:session_runtime_readonly_projection_v0"

OUTCOME_STATUSES = ("none", "validated", "blocked", "other")
APPROVAL_STATES = ("none", "pending", "approved", "rejected")
GATE_STATES = ("none", *sorted(OPEN_GATE_STATUSES))
WAITING_ON = ("codex", "user_or_controller", "external_evidence", "monitor_signal")
# A decided gate's status word → the approval state it records.
DECIDED_GATE_STATES: Mapping[str, str] = {
    **dict.fromkeys(("approved", "approve", "accepted", "granted"), "approved"),
    **dict.fromkeys(("rejected", "reject", "declined", "denied"), "rejected"),
}
DECIDED_AT_KEYS = ("updated_at", "created_at", "event_at", "timestamp")
REDACTED_ID = "<id>"
ID_EDGE = "A-Za-z0-9_-"  # an id next to one of these is part of a longer word: left alone
PROJECTION_TEXTS = ("first_user_todo", "first_agent_todo", "latest_validation", "latest_blocker")


def _word(item: Mapping[Any, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = item.get(key)
        if type(value) is str and value.strip():
            return value.strip().lower()
    return ""


def _stamp(item: Mapping[Any, Any], keys: tuple[str, ...]) -> str:
    return next((v for k in keys if type(v := item.get(k)) is str and v), "")


def _signal(item: Mapping[Any, Any], keys: tuple[str, ...]) -> bool:
    return any((type(v := item.get(k)) is str and v.strip()) or v is True for k in keys)


def source_ids(groups: Mapping[str, object]) -> frozenset[str]:
    """Every source id the inputs name (the values a contract never carries)."""
    return frozenset(
        value
        for group in groups.values()
        for item in builder_items(group)
        for key in SOURCE_ID_KEYS
        if type(value := item.get(key)) is str and value
    )


def redact_ids(text: str | None, ids: frozenset[str]) -> str | None:
    """``text`` with each whole occurrence of an id replaced by ``REDACTED_ID``."""
    if text is None or not ids:
        return text
    present = sorted((i for i in ids if i in text), key=len, reverse=True)
    if not present:
        return text
    pattern = "|".join(re.escape(i) for i in present)
    return re.sub(f"(?<![{ID_EDGE}])(?:{pattern})(?![{ID_EDGE}])", REDACTED_ID, text)


def outcome_status(outcomes: object) -> str:
    """The latest outcome's class (``OUTCOME_STATUSES``); the first of equal times wins."""
    latest: Mapping[Any, Any] | None = None
    latest_at = ""
    for item in builder_items(outcomes):
        at = _stamp(item, TIMESTAMP_KEYS)
        if latest is None or at > latest_at:
            latest, latest_at = item, at
    if latest is None:
        return "none"
    status = _word(latest, STATUS_KEYS)
    if (
        status in BLOCKED_STATUSES
        or _word(latest, KIND_KEYS) == BLOCKER_KIND
        or _signal(latest, BLOCKER_SIGNAL_KEYS)
    ):
        return "blocked"
    if status in VALIDATED_STATUSES or _signal(latest, VALIDATION_SIGNAL_KEYS):
        return "validated"
    return "other"


def approval_state(gates: object, blocking_gate: bool) -> str:
    """``pending`` while a blocking gate holds the goal, else the latest decision."""
    if blocking_gate:
        return "pending"
    decided = [
        (_stamp(item, DECIDED_AT_KEYS), state)
        for item in builder_items(gates)
        if (state := DECIDED_GATE_STATES.get(_word(item, STATUS_KEYS))) is not None
    ]
    if not decided:
        return "none"
    return max(decided, key=lambda pair: pair[0])[1]


def build_session_runtime_readonly_contract(*, goal_id: object, **groups: object) -> dict[str, Any]:
    """The v0 public contract of one goal, from the builder's inputs (``sessions``,
    ``events``, ``outcomes``, ``gates``, ``artifacts``, ``decision_results``). Pure."""
    projection = build_session_runtime_readonly_projection(goal_id=goal_id, **groups)
    outcomes, gates = groups.get("outcomes"), groups.get("gates")
    compact = compact_session_runtime_readonly_projection(projection)
    assert compact is not None  # the builder always emits a v0 projection
    first = compact.get("first_screen", {})
    lane = compact.get("work_lane_contract", {})
    source = compact.get("source", {})
    counts = source.get("source_ref_counts", {})
    blocking = first.get("user_action_required") is True
    ids = source_ids(groups)
    return {
        "schema_version": SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
        "goal_id": compact.get("goal_id", ""),
        "source": {
            "host_kind": HOST_KIND,
            "source_ids_redacted": True,
            "source_ref_counts": {name: counts.get(name, 0) for name, _ in SOURCE_GROUPS},
        },
        "session_facts": {
            "session_count": len(projection["source"]["source_refs"]["sessions"]),
            "latest_event_at": source.get("latest_fact_at"),
            "outcome_status": outcome_status(outcomes),
            "approval_state": approval_state(gates, blocking),
            "raw_transcript_copied": False,
        },
        "goal_projection": {
            "waiting_on": session_runtime_status_waiting_on(
                first.get("waiting_on"), monitor_only=lane.get("monitor_only") is True
            ),
            "next_action": redact_ids(
                first.get("recommended_action") or ATTENTION_DEFAULT_ACTION, ids
            ),
            **{name: redact_ids(first.get(name), ids) for name in PROJECTION_TEXTS},
            "gate_state": first.get("gate_state", "none"),
            "agent_can_continue": first.get("agent_can_continue") is True,
        },
    }

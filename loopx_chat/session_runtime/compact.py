"""Compaction of a read-only projection, and the status layer's view of it.

Owns the compact form kept in run history (refs reduced to counts, lists capped at 8,
every text public-safe), the status vocabulary for ``waiting_on`` (the builder says
``agent``, status says ``codex``), and the status attention item. It must never add facts
the projection did not hold, never carry a source ref or a text that looks like a local
path or a secret, and never raise on any input.

Open points resolved here (the reference is silent):
- Fields whose value is missing, not of the expected type, or withheld as unsafe are
  omitted rather than written as null; a section left with no fields is omitted too.
- Booleans are copied only when they are real booleans: a flag like
  ``runtime_writeback_allowed`` must never become true by coercing a string.
- An already compact projection compacts to the same counts, so ``from_run`` may find
  either form in a run.
- In the status mapping, the named values are matched before ``monitor_only``: a human gate
  must stay visible even if a caller marks the lane monitor-only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from loopx_chat.session_runtime._text import collapse, public_safe_list, public_safe_text
from loopx_chat.session_runtime.projection import (
    MODE,
    SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
    SOURCE_GROUPS,
)

COMPACT_LIST_LIMIT = 8
COMPACT_LIST_ITEM_LIMIT = 160
GOAL_ID_LIMIT = 120
SOURCE_TEXT_LIMIT = 80
FIRST_SCREEN_TEXT_LIMIT = 260
WORK_LANE_TEXT_LIMIT = 80
ATTENTION_TEXT_LIMIT = 220

BOUNDARY_FLAGS = (
    "raw_transcript_copied",
    "raw_logs_copied",
    "credentials_copied",
    "runtime_writeback_allowed",
    "runtime_mutation_allowed",
    "raw_material_detected",
)
BOUNDARY_LISTS = ("raw_material_key_names", "raw_material_categories", "unclassified_key_names")
FIRST_SCREEN_TEXTS = (
    "waiting_on",
    "first_user_todo",
    "first_agent_todo",
    "latest_validation",
    "latest_blocker",
    "gate_state",
    "recommended_action",
)
FIRST_SCREEN_FLAGS = ("user_action_required", "agent_can_continue")
WORK_LANE_FLAGS = ("must_attempt_work", "user_gate_blocks_delivery", "monitor_only")
ATTENTION_TEXTS = ("kind", "priority", "title", "waiting_on")
RUN_PROJECTION_KEYS = ("session_runtime_readonly_projection", "session_runtime_projection")

MONITOR_SIGNAL = "monitor_signal"
STATUS_WAITING_ON: MappingProxyType[str, str] = MappingProxyType(
    {
        **dict.fromkeys(("agent", "codex"), "codex"),
        **dict.fromkeys(
            ("controller", "human", "operator", "owner", "user", "user_or_controller"),
            "user_or_controller",
        ),
        **dict.fromkeys(("runtime", "external_evidence"), "external_evidence"),
        **dict.fromkeys(("none", "monitor", MONITOR_SIGNAL), MONITOR_SIGNAL),
    }
)
STATUS_WAITING_ON_DEFAULT = "codex"
WATCH_WAITING_ON = frozenset({"external_evidence", MONITOR_SIGNAL})
ATTENTION_SOURCE = "session_runtime_projection"
ATTENTION_DEFAULT_ACTION = "inspect the session-runtime projection and choose the next safe action"

CompactText = Callable[[object, int], str | None]


class CompactList(Protocol):
    def __call__(self, values: object, *, item_limit: int, max_items: int) -> list[str]: ...


def _section(value: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    found = value.get(name)
    return found if isinstance(found, Mapping) else {}


def _flags(section: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, bool]:
    return {name: section[name] for name in names if type(section.get(name)) is bool}


def _texts(
    section: Mapping[str, Any], names: tuple[str, ...], limit: int, safe_text: CompactText
) -> dict[str, str]:
    found = {name: safe_text(section.get(name), limit) for name in names}
    return {name: text for name, text in found.items() if text is not None}


def _ref_counts(source: Mapping[str, Any]) -> dict[str, int]:
    refs = source.get("source_refs")
    if isinstance(refs, Mapping):
        counts = {group: refs.get(group) for group, _ in SOURCE_GROUPS}
        return {g: len(r) for g, r in counts.items() if isinstance(r, list | tuple) and r}
    already = source.get("source_ref_counts")
    if isinstance(already, Mapping):
        counts = {group: already.get(group) for group, _ in SOURCE_GROUPS}
        return {g: n for g, n in counts.items() if type(n) is int and n > 0}
    return {}


def compact_session_runtime_readonly_projection(
    value: object,
    *,
    public_safe_compact_text: CompactText = public_safe_text,
    public_safe_compact_list: CompactList = public_safe_list,
) -> dict[str, Any] | None:
    """The compact, public-safe form of a v0 projection; None if ``value`` is not one."""
    if not isinstance(value, Mapping):
        return None
    if value.get("schema_version") != SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION:
        return None
    safe_text = public_safe_compact_text

    source_in = _section(value, "source")
    source: dict[str, Any] = _texts(
        source_in, ("host_kind", "latest_fact_at"), SOURCE_TEXT_LIMIT, safe_text
    )
    counts = _ref_counts(source_in)
    if counts:
        source["source_ref_counts"] = counts

    boundary_in = _section(value, "boundary")
    boundary: dict[str, Any] = _flags(boundary_in, BOUNDARY_FLAGS)
    for name in BOUNDARY_LISTS:
        if isinstance(boundary_in.get(name), list | tuple):
            boundary[name] = public_safe_compact_list(
                boundary_in[name], item_limit=COMPACT_LIST_ITEM_LIMIT, max_items=COMPACT_LIST_LIMIT
            )

    first_in = _section(value, "first_screen")
    first_screen: dict[str, Any] = {
        **_texts(first_in, FIRST_SCREEN_TEXTS, FIRST_SCREEN_TEXT_LIMIT, safe_text),
        **_flags(first_in, FIRST_SCREEN_FLAGS),
    }
    lane_in = _section(value, "work_lane_contract")
    work_lane: dict[str, Any] = {
        **_texts(lane_in, ("lane",), WORK_LANE_TEXT_LIMIT, safe_text),
        **_flags(lane_in, WORK_LANE_FLAGS),
    }
    attention = _texts(
        _section(value, "attention_item"), ATTENTION_TEXTS, ATTENTION_TEXT_LIMIT, safe_text
    )

    compact: dict[str, Any] = {
        "schema_version": SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
        "mode": MODE,
    }
    goal_id = safe_text(value.get("goal_id"), GOAL_ID_LIMIT)
    if goal_id is not None:
        compact["goal_id"] = goal_id
    sections = (
        ("source", source),
        ("boundary", boundary),
        ("first_screen", first_screen),
        ("work_lane_contract", work_lane),
        ("attention_item", attention),
    )
    compact.update((name, section) for name, section in sections if section)
    return compact


def compact_session_runtime_projection_from_run(run: object) -> dict[str, Any] | None:
    """The compact projection a run carries, wherever the run keeps it; None if none."""
    if not isinstance(run, Mapping):
        return None
    for key in RUN_PROJECTION_KEYS:
        compact = compact_session_runtime_readonly_projection(run.get(key))
        if compact is not None:
            return compact
    return compact_session_runtime_readonly_projection(run)


def session_runtime_status_waiting_on(
    value: object,
    monitor_signal_waiting_on: str = MONITOR_SIGNAL,
    monitor_only: bool = False,
) -> str:
    """Map a builder ``waiting_on`` to the status vocabulary (``agent`` -> ``codex``)."""
    word = (collapse(value) or "").lower()
    mapped = STATUS_WAITING_ON.get(word)
    if mapped == MONITOR_SIGNAL or (mapped is None and monitor_only is True):
        return monitor_signal_waiting_on
    return mapped or STATUS_WAITING_ON_DEFAULT


def session_runtime_projection_attention(run: object) -> dict[str, Any] | None:
    """The status attention item for a run's projection; None if the run carries none."""
    compact = compact_session_runtime_projection_from_run(run)
    if compact is None:
        return None
    first_screen = compact.get("first_screen", {})
    lane_contract = compact.get("work_lane_contract", {})
    lane = lane_contract.get("lane")
    waiting_on = session_runtime_status_waiting_on(
        first_screen.get("waiting_on") or compact.get("attention_item", {}).get("waiting_on"),
        monitor_only=lane_contract.get("monitor_only") is True,
    )
    if compact.get("boundary", {}).get("raw_material_detected") is True:
        severity = "high"
    elif waiting_on in WATCH_WAITING_ON:
        severity = "watch"
    else:
        severity = "action"
    run_map: Mapping[str, Any] = run if isinstance(run, Mapping) else {}
    recommended_action = (
        first_screen.get("recommended_action")
        or public_safe_text(run_map.get("recommended_action"), ATTENTION_TEXT_LIMIT)
        or ATTENTION_DEFAULT_ACTION
    )
    return {
        "source": ATTENTION_SOURCE,
        "status": f"session_runtime_{lane}" if lane else "session_runtime_projection",
        "severity": severity,
        "waiting_on": waiting_on,
        "recommended_action": recommended_action,
        "session_runtime_projection": compact,
        # An equal but separate copy: a consumer editing one place must not edit the other.
        "project_asset": {
            "session_runtime_projection": compact_session_runtime_projection_from_run(run)
        },
    }

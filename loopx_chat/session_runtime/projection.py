"""The read-only projection: compact host facts in, a goal-level first screen out.

Owns ``session_runtime_readonly_projection_v0``: its output shape, the derivation rules of
the first screen (tables at the top, code below only applies them) and the raw-material
boundary report. It must never write back, read a clock or the environment, do I/O, copy a
value that sits under a raw-material key, or raise on JSON-shaped input.

Theory of operation. Only top-level keys of each item are classified (keys.py), and only
values under compact keys are ever read, always as scalars: a container under a compact key
reads as "no text" rather than being stringified, which keeps nested raw material out and
makes nesting depth irrelevant. Raw keys never change who the goal waits on; they only stop
the agent (``agent_can_continue``) and replace the recommended action.

Open points resolved here (the reference is silent):
- A group that is a single mapping is read as a one-item list: dropping it would hide a
  blocking gate passed without its list. Strings, bytes and non-iterables read as empty.
- Items are read, never copied or kept, so no copy is needed for purity.
- A gate whose rule fields hold an unexpected type (``GATE_FIELD_TYPES``: a number for
  ``status``, a string for ``blocking``) fails closed as a blocking gate. The peer reads
  ``status: 0, state: "pending"`` as pending because ``0`` is falsy; we block on any such
  record, whatever its other fields say, and never skip it.
- ``status``, ``actor`` and ``kind`` take the first of their keys with non-blank text,
  trimmed and lowercased.
- Timestamps compare as the plain string of the first non-empty timestamp key.
- ``goal_id`` is ``str(goal_id)`` for scalars; a container becomes "" (never stringified).
- A non-string key is reported in ``unclassified_key_names`` by its JSON spelling (``1``,
  ``true``, ``null``), or ``<typename>`` when JSON has none.
- ``evidence_refs`` is an equal copy of ``source_refs``, not the same objects, so a
  consumer editing one section cannot silently change the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loopx_chat.session_runtime._text import PROJECTED_TEXT_LIMIT, collapse, scalar_str, text
from loopx_chat.session_runtime.keys import (
    SOURCE_ID_KEYS,
    TIMESTAMP_KEYS,
    KeyState,
    classify_session_runtime_key,
)

SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION = "session_runtime_readonly_projection_v0"
UNCLASSIFIED_KEY_LIMIT = 24
HOST_KIND = "session_runtime"
MODE = "read_only"

# Input groups in output order, with the ref kind used when an item names none.
SOURCE_GROUPS: tuple[tuple[str, str], ...] = (
    ("sessions", "session"),
    ("events", "event"),
    ("outcomes", "outcome"),
    ("gates", "gate"),
    ("artifacts", "artifact"),
    ("decision_results", "decision_result"),
)

OPEN_GATE_STATUSES = frozenset(
    {"blocked", "needs_decision", "open", "pending", "requested", "requires_decision", "waiting"}
)
HUMAN_GATE_ACTORS = frozenset({"controller", "human", "operator", "owner", "user"})
BLOCKED_STATUSES = frozenset({"blocked", "error", "failed", "timed_out"})
VALIDATED_STATUSES = frozenset({"ok", "passed", "success", "validated"})
VALIDATION_KINDS = frozenset({"validation", "outcome"})
BLOCKER_KIND = "blocker"

STATUS_KEYS = ("status", "state")
ACTOR_KEYS = ("actor", "required_actor", "decision_actor", "channel")
KIND_KEYS = ("kind", "type")
HUMAN_DECISION_FLAGS = ("requires_human_decision", "action_required")
# The types each gate field the rules read may have (None counts as absent). A gate with any
# other type under one of these keys (a number for `status`, a string for `blocking`) is a
# record we do not understand, so it fails closed: it is a blocking gate, never ignored.
GATE_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys((*STATUS_KEYS, *ACTOR_KEYS), (str,)),
    **dict.fromkeys((*HUMAN_DECISION_FLAGS, "advisory", "blocking"), (bool,)),
    **dict.fromkeys(("question", "requested_decision", "title", "summary", "next_action"), (str,)),
}
MALFORMED_GATE_STATE = "blocked"  # the gate state of a malformed gate with no open status
MALFORMED_GATE_TODO = (
    "a gate record has fields of unexpected types: check it before the agent goes on"
)
# `message` is deliberately absent from every text list: it is raw transcript material.
USER_TODO_KEYS = ("question", "requested_decision", "title", "summary", "next_action")
AGENT_TODO_KEYS = ("recommended_action", "agent_next_action", "next_action", "handoff", "summary")
AGENT_TODO_GROUPS = ("decision_results", "sessions", "events", "outcomes")
VALIDATION_SIGNAL_KEYS = ("validation_summary", "validated", "result")
VALIDATION_TEXT_KEYS = (*VALIDATION_SIGNAL_KEYS, "summary")
BLOCKER_SIGNAL_KEYS = ("blocker", "blocker_summary")
BLOCKER_TEXT_KEYS = (*BLOCKER_SIGNAL_KEYS, "summary", "title")
FACT_GROUPS = frozenset({"sessions", "events", "outcomes"})
VALIDATION_GROUPS = frozenset({"outcomes", "events"})
BLOCKER_GROUPS = frozenset({"gates", "outcomes", "events"})
DATED_GROUPS = FACT_GROUPS | BLOCKER_GROUPS
# Processing order only (output order is SOURCE_GROUPS): gates, outcomes, events is the
# candidate order of both "latest" rules, so a strict ">" keeps the first maximal item.
SCAN_ORDER = ("gates", "outcomes", "events", "sessions", "artifacts", "decision_results")
DEFAULT_REF_KINDS = dict(SOURCE_GROUPS)

REF_KIND_LIMIT = 60
REF_ID_LIMIT = 120
TIMESTAMP_LIMIT = 80

LANE_USER_GATE = "user_gate"
LANE_ADVANCEMENT = "advancement_task"
LANE_BLOCKER = "blocker"
LANE_MONITOR = "monitor"
P0_LANES = frozenset({LANE_USER_GATE, LANE_BLOCKER})

RECOMMEND_WITHOUT_RAW = "provide compact summaries without raw material before projection"
RECOMMEND_MONITOR = "monitor for a material transition"
RAW_FACT_SOURCE = "host_session_log"
COMPACT_PROJECTION_SOURCE = "loopx_run_projection"
CONFLICT_POLICY = (
    "recompute projection from compact source refs; do not copy raw transcripts, raw logs, "
    "credentials, billing records, or sandbox internals into LoopX state"
)

Item = Mapping[Any, Any]


# ---- Reading items ----------------------------------------------------------------------


def _items(group: object) -> list[Item]:
    if group is None or isinstance(group, str | bytes | bytearray):
        return []
    if isinstance(group, Mapping):
        return [group]
    if not isinstance(group, Iterable):
        return []
    return [item for item in group if type(item) is dict or isinstance(item, Mapping)]


def _first_text(item: Item, keys: tuple[str, ...], limit: int = PROJECTED_TEXT_LIMIT) -> str | None:
    for key in keys:
        value = item.get(key)
        if value is not None:
            found = text(value, limit)
            if found is not None:
                return found
    return None


def _word(item: Item, keys: tuple[str, ...]) -> str:
    """The first non-blank scalar under ``keys``, trimmed and lowercased ("" if none)."""
    get = item.get
    for key in keys:
        value = get(key)
        if value is not None:
            raw = value if type(value) is str else scalar_str(value)
            if raw:
                word = raw.strip()
                if word:
                    return word.lower()
    return ""


def _timestamp(item: Item) -> str:
    get = item.get
    for key in TIMESTAMP_KEYS:
        value = get(key)
        # Only a string is a timestamp: False, 0 or 1e9 would compare as "False", "0"... and
        # could win as the latest fact.
        if isinstance(value, str) and value:
            return value if type(value) is str else str.__str__(value)
    return ""


# ---- First-screen predicates --------------------------------------------------------------


def _is_malformed_gate(gate: Item) -> bool:
    """A field the gate rules read holds a type they do not expect (bool is not an int)."""
    get = gate.get
    for key, types in GATE_FIELD_TYPES.items():
        value = get(key)
        if value is not None and type(value) not in types:
            return True
    return False


def _is_blocking_gate(gate: Item) -> bool:
    if _is_malformed_gate(gate):
        return True
    if _word(gate, STATUS_KEYS) not in OPEN_GATE_STATUSES:
        return False
    human = _word(gate, ACTOR_KEYS) in HUMAN_GATE_ACTORS or any(
        bool(gate.get(flag)) for flag in HUMAN_DECISION_FLAGS
    )
    return human and gate.get("advisory") is not True and gate.get("blocking", True) is not False


def _gate_state(gate: Item) -> str:
    """The blocking gate's open status; a malformed gate's first open status among its
    status keys (the peer reads `status: 0, state: pending` as pending), else "blocked"."""
    word = _word(gate, STATUS_KEYS)
    if word in OPEN_GATE_STATUSES:
        return word
    for key in STATUS_KEYS:
        value = gate.get(key)
        if type(value) is str and value.strip().lower() in OPEN_GATE_STATUSES:
            return value.strip().lower()
    return MALFORMED_GATE_STATE


def _has_text(item: Item, keys: tuple[str, ...]) -> bool:
    if item.keys().isdisjoint(keys):
        return False
    get = item.get
    for key in keys:
        value = get(key)
        if value is not None:
            if type(value) is str:
                if value and not value.isspace():
                    return True
            elif type(value) is bool:
                if value:  # `validated: false` says it was not validated
                    return True
            elif collapse(value) is not None:
                return True
    return False


# ---- Sections -----------------------------------------------------------------------------


def _key_name(key: object) -> str:
    """How a key is reported: itself if a string, else its JSON spelling or ``<type>``."""
    if isinstance(key, str):
        return key if type(key) is str else str.__str__(key)
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        if key != key:
            return "NaN"
        if key in (float("inf"), float("-inf")):
            return "Infinity" if key > 0 else "-Infinity"
        return float.__repr__(key)
    if isinstance(key, int):
        try:
            return int.__repr__(key)
        except ValueError:
            return "<int>"
    return f"<{type(key).__name__}>"


def _boundary(keys: set[Any]) -> dict[str, Any]:
    raw_names: set[str] = set()
    categories: set[str] = set()
    unclassified: set[str] = set()
    for key in keys:
        state, category = classify_session_runtime_key(key)
        if state is KeyState.RAW_MATERIAL and category is not None:
            raw_names.add(_key_name(key))
            categories.add(category.value)
        elif state is KeyState.UNCLASSIFIED:
            unclassified.add(_key_name(key))
    return {
        "raw_transcript_copied": False,
        "raw_logs_copied": False,
        "credentials_copied": False,
        "runtime_writeback_allowed": False,
        "runtime_mutation_allowed": False,
        "raw_material_detected": bool(raw_names),
        "raw_material_key_names": sorted(raw_names),
        "raw_material_categories": sorted(categories),
        "unclassified_key_names": sorted(unclassified)[:UNCLASSIFIED_KEY_LIMIT],
    }


def _as_is(value: object, limit: int) -> bool:
    """True when `text(value, limit)` would return `value` unchanged: a non-empty plain str
    within the limit, printable (no control character) and without a space, hence without
    any whitespace `str.split` collapses. The usual id or kind: no split and join for it."""
    return (
        type(value) is str
        and len(value) <= limit
        and value.isprintable()
        and " " not in value
        and value != ""
    )


def _ref(item: Item, default_kind: str) -> dict[str, str]:
    get = item.get
    ref = {"kind": default_kind}
    for key in KIND_KEYS:
        value = get(key)
        found = value if _as_is(value, REF_KIND_LIMIT) else text(value, REF_KIND_LIMIT)
        if found is not None:
            ref["kind"] = found  # `_as_is` passes only a str
            break
    for key in SOURCE_ID_KEYS:
        value = get(key)
        if value is None:
            continue
        # `_as_is`, inlined: this runs for every id of every item.
        if (
            type(value) is str
            and len(value) <= REF_ID_LIMIT
            and value.isprintable()
            and " " not in value
            and value != ""
        ):
            ref[key] = value
        elif (found := text(value, REF_ID_LIMIT)) is not None:
            ref[key] = found
    return ref


def _goal_id(goal_id: object) -> str:
    if goal_id is None:
        return "None"
    found = scalar_str(goal_id)
    return "" if found is None else found


@dataclass(frozen=True)
class _Facts:
    """What one pass over the input yields; everything else is derived from it."""

    refs: dict[str, list[dict[str, str]]]
    keys: set[Any]
    blocking_gate: Item | None
    agent_todos: dict[str, str | None]
    validation: Item | None
    blocker: Item | None
    latest_fact_at: str


def _scan(given: Mapping[str, object]) -> _Facts:
    # One pass, each item touched once while it is hot in cache: on 10,000 items the
    # memory traffic of repeated passes costs more than the rules themselves. A
    # "latest" predicate is evaluated only for an item newer than the best candidate so
    # far, which cannot change the result (a strictly newer item is needed to win).
    keys: set[Any] = set()
    refs: dict[str, list[dict[str, str]]] = {}
    todos: dict[str, str | None] = {}
    blocking_gate: Item | None = None
    validation: Item | None = None
    blocker: Item | None = None
    validation_at = blocker_at = latest = ""
    for name in SCAN_ORDER:
        default_kind = DEFAULT_REF_KINDS[name]
        group_refs: list[dict[str, str]] = []
        add_ref = group_refs.append
        todo: str | None = None
        wants_todo = name in AGENT_TODO_GROUPS
        is_gates = name == "gates"
        dated = name in DATED_GROUPS
        is_fact = name in FACT_GROUPS
        wants_validation = name in VALIDATION_GROUPS
        wants_blocker = name in BLOCKER_GROUPS
        for item in _items(given[name]):
            keys.update(item)
            add_ref(_ref(item, default_kind))
            if wants_todo and todo is None:
                todo = _first_text(item, AGENT_TODO_KEYS)
            if is_gates and blocking_gate is None and _is_blocking_gate(item):
                blocking_gate = item
            if not dated:
                continue
            at = _timestamp(item)
            if is_fact and at > latest:
                latest = at
            check_validation = wants_validation and (validation is None or at > validation_at)
            check_blocker = wants_blocker and (blocker is None or at > blocker_at)
            if not (check_validation or check_blocker):
                continue
            # _word() inlined for the usual plain-str `kind`/`status`; anything else takes
            # the full rule. Two calls per item are a tenth of the worst-case build time.
            raw_kind, raw_status = item.get(KIND_KEYS[0]), item.get(STATUS_KEYS[0])
            kind = raw_kind.strip().lower() if type(raw_kind) is str else ""
            status = raw_status.strip().lower() if type(raw_status) is str else ""
            kind = kind or _word(item, KIND_KEYS)
            status = status or _word(item, STATUS_KEYS)
            if check_validation and (
                (kind in VALIDATION_KINDS and status in VALIDATED_STATUSES)
                or _has_text(item, VALIDATION_SIGNAL_KEYS)
            ):
                validation, validation_at = item, at
            if check_blocker and (
                kind == BLOCKER_KIND
                or status in BLOCKED_STATUSES
                or _has_text(item, BLOCKER_SIGNAL_KEYS)
            ):
                blocker, blocker_at = item, at
        refs[name] = group_refs
        todos[name] = todo
    return _Facts(
        refs={name: refs[name] for name, _ in SOURCE_GROUPS},
        keys=keys,
        blocking_gate=blocking_gate,
        agent_todos=todos,
        validation=validation,
        blocker=blocker,
        latest_fact_at=latest,
    )


def build_session_runtime_readonly_projection(
    *,
    goal_id: object,
    sessions: object = None,
    events: object = None,
    outcomes: object = None,
    gates: object = None,
    artifacts: object = None,
    decision_results: object = None,
) -> dict[str, Any]:
    """Project compact session-runtime facts into the v0 read-only first screen. Pure."""
    facts = _scan(
        {
            "sessions": sessions,
            "events": events,
            "outcomes": outcomes,
            "gates": gates,
            "artifacts": artifacts,
            "decision_results": decision_results,
        }
    )
    boundary = _boundary(facts.keys)
    raw_detected: bool = boundary["raw_material_detected"]
    blocking_gate = facts.blocking_gate
    agent_todo = next(
        (todo for name in AGENT_TODO_GROUPS if (todo := facts.agent_todos[name]) is not None),
        None,
    )
    latest_validation = (
        None if facts.validation is None else _first_text(facts.validation, VALIDATION_TEXT_KEYS)
    )
    latest_blocker = (
        None if facts.blocker is None else _first_text(facts.blocker, BLOCKER_TEXT_KEYS)
    )
    latest_fact_at = text(facts.latest_fact_at, TIMESTAMP_LIMIT)

    if blocking_gate is not None:
        gate_actor = _word(blocking_gate, ACTOR_KEYS)
        waiting_on = gate_actor if gate_actor in HUMAN_GATE_ACTORS else "operator"
        lane = LANE_USER_GATE
        user_todo = _first_text(blocking_gate, USER_TODO_KEYS)
        gate_state = _gate_state(blocking_gate)
        if user_todo is None and _is_malformed_gate(blocking_gate):
            user_todo = MALFORMED_GATE_TODO
    else:
        if latest_blocker is not None and agent_todo is None:
            waiting_on, lane = "runtime", LANE_BLOCKER
        elif agent_todo is not None:
            waiting_on, lane = "agent", LANE_ADVANCEMENT
        else:
            waiting_on, lane = "none", LANE_MONITOR
        user_todo = None
        gate_state = "none"

    agent_can_continue = agent_todo is not None and blocking_gate is None and not raw_detected
    if raw_detected:
        recommended_action: str | None = RECOMMEND_WITHOUT_RAW
    elif blocking_gate is not None:
        recommended_action = user_todo
    elif agent_todo is not None:
        recommended_action = agent_todo
    else:
        recommended_action = RECOMMEND_MONITOR

    source_refs = facts.refs
    return {
        "schema_version": SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
        "goal_id": _goal_id(goal_id),
        "mode": MODE,
        "source": {
            "host_kind": HOST_KIND,
            "source_refs": source_refs,
            "latest_fact_at": latest_fact_at,
        },
        "boundary": boundary,
        "first_screen": {
            "waiting_on": waiting_on,
            "user_action_required": blocking_gate is not None,
            "agent_can_continue": agent_can_continue,
            "first_user_todo": user_todo,
            "first_agent_todo": agent_todo if blocking_gate is None else None,
            "latest_validation": latest_validation,
            "latest_blocker": latest_blocker,
            "gate_state": gate_state,
            "recommended_action": recommended_action,
        },
        "work_lane_contract": {
            "lane": lane,
            "must_attempt_work": agent_can_continue,
            "user_gate_blocks_delivery": blocking_gate is not None,
            "monitor_only": lane == LANE_MONITOR,
        },
        "attention_item": {
            "kind": lane,
            "priority": "P0" if lane in P0_LANES else "P1",
            "title": recommended_action,
            "waiting_on": waiting_on,
            "evidence_refs": {
                name: [dict(ref) for ref in refs] for name, refs in source_refs.items()
            },
        },
        "reconcile_rule": {
            "raw_fact_source": RAW_FACT_SOURCE,
            "compact_projection_source": COMPACT_PROJECTION_SOURCE,
            "conflict_policy": CONFLICT_POLICY,
        },
    }

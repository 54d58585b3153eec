"""Controlled writeback's contract: the fixed words and checks of the v0 write classes.

Owns what ``session_runtime_controlled_writeback_v0`` allows: the five write classes, their
payload specs and required keys, the source events each class fits, the mode, plan and
result enums, the boundary flags, the reason codes, the entry criteria
(``EntryFacts``, ``check_entry_criteria``), the idempotency key, and the payload and
identity checks that both the plan builder (writeback.py) and the validator
(writeback_validate.py) apply. It must never build a plan or a result, never do I/O, touch
the host, read a clock or the environment, mutate an input, or echo a payload value (only
key names leave these checks), and never import from the rest of ``loopx_chat``.

Open points resolved here (the contract is silent):
- The reference's example payload for ``handoff_packet_pointer`` (``decision_label``,
  ``summary``) is illustrative; v0 follows the write-class table: ``handoff_id``,
  ``next_action``, ``stop_condition``, ``evidence_pointer_count``.
- Each class requires its id and its label (see ``REQUIRED_PAYLOAD_KEYS``); the other
  allowed keys are optional. A ``None`` value means "absent" and is dropped.
- Floats are not compact scalars here (the contract names strings, ints and bools); ints
  must fit a JSON double exactly (|n| <= 2**53).
- The idempotency key's run part is ``source_run_id``, or ``source_todo_id`` when the
  source names only a todo (entry criterion 1 accepts either).
- Identity ids use the owner-local id alphabet (``A-Z a-z 0-9 . _ -``, 1-160 chars), so
  the ``:``-joined idempotency key can always be split back.
- ``source_event_class`` must fit the write class (``SOURCE_EVENT_CLASSES``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# openviking_contract's private_value_code is the package's one list of private-value
# patterns (home paths, internal URLs, credentials), so both contracts reject the same values.
from loopx_chat.session_runtime.keys import KeyState, classify_session_runtime_key
from loopx_chat.session_runtime.openviking_contract import (
    QUOTA_STATE_VALUES,
    private_value_code,
)

WRITEBACK_SCHEMA_VERSION = "session_runtime_controlled_writeback_v0"
WRITEBACK_RESULT_SCHEMA_VERSION = "session_runtime_controlled_writeback_result_v0"

OPERATOR_GATE_DECISION = "operator_gate_decision"
HUMAN_REWARD_OVERLAY = "human_reward_overlay"
QUOTA_DECISION_HINT = "quota_decision_hint"
HANDOFF_PACKET_POINTER = "handoff_packet_pointer"
ARTIFACT_POINTER = "artifact_pointer"
WRITE_CLASSES: tuple[str, ...] = (
    OPERATOR_GATE_DECISION,
    HUMAN_REWARD_OVERLAY,
    QUOTA_DECISION_HINT,
    HANDOFF_PACKET_POINTER,
    ARTIFACT_POINTER,
)

DECISION_LABELS: tuple[str, ...] = ("requested", "approved", "rejected")
REWARD_LABELS: tuple[str, ...] = ("good", "bad", "mixed")
QUOTA_HINTS: tuple[str, ...] = QUOTA_STATE_VALUES  # the same closed set the adapter reports

# Value kinds: "id" (a compact reference), "token" (a short code word), "text" (a short
# public-safe summary), "count" (an int >= 0), or a tuple of the allowed labels.
PayloadSpec = Mapping[str, str | tuple[str, ...]]
PAYLOAD_SPECS: Mapping[str, PayloadSpec] = {
    OPERATOR_GATE_DECISION: {
        "decision_id": "id",
        "decision_label": DECISION_LABELS,
        "actor_class": "token",
        "reason_summary": "text",
        "source_run_id": "id",
    },
    HUMAN_REWARD_OVERLAY: {
        "reward_id": "id",
        "judged_run_id": "id",
        "label": REWARD_LABELS,
        "reason_summary": "text",
    },
    QUOTA_DECISION_HINT: {
        "hint": QUOTA_HINTS,
        "window_id": "id",
        "reason_code": "token",
    },
    HANDOFF_PACKET_POINTER: {
        "handoff_id": "id",
        "next_action": "text",
        "stop_condition": "text",
        "evidence_pointer_count": "count",
    },
    ARTIFACT_POINTER: {
        "artifact_id": "id",
        "validation_label": "token",
        "outcome_class": "token",
    },
}
REQUIRED_PAYLOAD_KEYS: Mapping[str, tuple[str, ...]] = {
    OPERATOR_GATE_DECISION: ("decision_id", "decision_label"),
    HUMAN_REWARD_OVERLAY: ("reward_id", "judged_run_id", "label"),
    QUOTA_DECISION_HINT: ("hint",),
    HANDOFF_PACKET_POINTER: ("handoff_id", "next_action"),
    ARTIFACT_POINTER: ("artifact_id",),
}
# The LoopX source event each class reflects (its CLI-equivalent source); the class name
# itself is accepted too.
SOURCE_EVENT_CLASSES: Mapping[str, tuple[str, ...]] = {
    OPERATOR_GATE_DECISION: ("operator_gate", OPERATOR_GATE_DECISION),
    HUMAN_REWARD_OVERLAY: ("human_reward", HUMAN_REWARD_OVERLAY),
    QUOTA_DECISION_HINT: ("quota_decision", QUOTA_DECISION_HINT),
    HANDOFF_PACKET_POINTER: ("handoff_packet", HANDOFF_PACKET_POINTER),
    ARTIFACT_POINTER: ("artifact", "run_projection", "run_pointer", ARTIFACT_POINTER),
}

MODE_DRY_RUN = "dry_run"
MODE_APPLY = "apply"
WRITEBACK_MODES: tuple[str, ...] = (MODE_DRY_RUN, MODE_APPLY)

PLAN_PREVIEWED = "previewed"
PLAN_REJECTED = "rejected"
PLAN_BLOCKED = "blocked"
PLAN_STATUSES: tuple[str, ...] = (PLAN_PREVIEWED, PLAN_REJECTED, PLAN_BLOCKED)
RESULT_STATUSES: tuple[str, ...] = ("applied", "skipped", "rejected", "failed", "previewed")
# What a plan document's result says for each plan status (the result enum has no blocked).
DOCUMENT_RESULT_STATUS: Mapping[str, str] = {
    PLAN_PREVIEWED: "previewed",
    PLAN_REJECTED: "rejected",
    PLAN_BLOCKED: "skipped",
}

BOUNDARY_FLAGS: tuple[str, ...] = (
    "raw_transcripts_copied",
    "raw_tool_outputs_copied",
    "credentials_copied",
    "private_paths_copied",
    "launch_authority_granted",
)

REASON_UNKNOWN_WRITE_CLASS = "unknown_write_class"
REASON_UNSAFE_PAYLOAD = "unsafe_payload"
REASON_UNKNOWN_PAYLOAD_KEY = "unknown_payload_key"
REASON_INVALID_PAYLOAD_VALUE = "invalid_payload_value"
REASON_MISSING_PAYLOAD_KEY = "missing_payload_key"
REASON_INVALID_IDENTITY = "invalid_identity"
REASON_SOURCE_EVENT_MISMATCH = "source_event_mismatch"
REASON_NO_PROJECTION = "no_projection"
REASON_NO_SOURCE_EVENT = "no_source_event"
REASON_NO_DRY_RUN_SUPPORT = "no_dry_run_support"
REASON_RUNTIME_UNAVAILABLE = "runtime_unavailable"
REJECTED_REASONS: tuple[str, ...] = (
    REASON_UNKNOWN_WRITE_CLASS,
    REASON_UNSAFE_PAYLOAD,
    REASON_UNKNOWN_PAYLOAD_KEY,
    REASON_INVALID_PAYLOAD_VALUE,
    REASON_MISSING_PAYLOAD_KEY,
    REASON_INVALID_IDENTITY,
    REASON_SOURCE_EVENT_MISMATCH,
)
BLOCKED_REASONS: tuple[str, ...] = (
    REASON_NO_PROJECTION,
    REASON_NO_SOURCE_EVENT,
    REASON_NO_DRY_RUN_SUPPORT,
    REASON_RUNTIME_UNAVAILABLE,
)

MAX_TEXT_LENGTH = 280
MAX_INT = 2**53
MAX_SHOWN_KEYS = 8

_IDENTITY = re.compile(r"[A-Za-z0-9._-]{1,160}")
_PAYLOAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#@+-]{0,159}")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SHOWN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_LINE_BREAK = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
# Any absolute path of two or more segments, beyond the home and private roots that
# private_value_code already knows: a payload is metadata, and no path is metadata.
_ABSOLUTE_PATH = re.compile(r"(?:^|[\s'\"(=,\[])/[A-Za-z0-9._-]+/")

IDENTITY_FIELDS: tuple[str, ...] = ("goal_id", "agent_id", "runtime_id", "session_id")
SOURCE_ID_FIELDS: tuple[str, ...] = ("source_run_id", "source_todo_id")


# ---- Entry criteria -------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryFacts:
    """The host facts behind entry criteria 1-3 and 5 (criterion 4 is the payload check)."""

    projection_present: bool
    source_event_recorded: bool
    runtime_supports_dry_run: bool
    runtime_available: bool


ENTRY_CRITERIA: tuple[tuple[str, str], ...] = (
    ("projection_present", REASON_NO_PROJECTION),
    ("source_event_recorded", REASON_NO_SOURCE_EVENT),
    ("runtime_supports_dry_run", REASON_NO_DRY_RUN_SUPPORT),
    ("runtime_available", REASON_RUNTIME_UNAVAILABLE),
)


def check_entry_criteria(entry: object) -> tuple[str, ...]:
    """The reason codes of every unmet entry criterion, in contract order; () when all hold.

    Fails closed: a fact counts as met only when it is exactly ``True``, so a missing
    attribute, a non-``EntryFacts`` object or a truthy string never opens the gate.
    """
    return tuple(code for name, code in ENTRY_CRITERIA if getattr(entry, name, None) is not True)


def idempotency_key(goal_id: str, run_id: str, write_class: str) -> str:
    """``<goal>:<run>:<write_class>``: the same decision never lands twice on the host."""
    return f"{goal_id}:{run_id}:{write_class}"


# ---- Payload ------------------------------------------------------------------------------


def _shown(key: object) -> str:
    # A key name can itself be a secret; show it only when it looks like a plain identifier.
    if isinstance(key, str) and _SHOWN_KEY.fullmatch(key) and private_value_code(key) is None:
        return key
    return "<unnamed key>"


def _plain(value: object) -> object:
    """A str/int subclass as its plain value; anything else unchanged."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    return value


def _unsafe_value(value: object) -> bool:
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not -MAX_INT <= value <= MAX_INT
    if not isinstance(value, str):
        # Floats, containers, bytes, objects: not a short scalar, so not compact metadata.
        return True
    text = str.__str__(value)
    return (
        len(text) > MAX_TEXT_LENGTH
        or _LINE_BREAK.search(text) is not None
        or private_value_code(text) is not None
        or _ABSOLUTE_PATH.search(text) is not None
    )


def _fits(value: object, kind: str | tuple[str, ...]) -> bool:
    if isinstance(kind, tuple):
        return isinstance(value, str) and value in kind
    if kind == "count":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if not isinstance(value, str):
        return False
    if kind == "id":
        return _PAYLOAD_ID.fullmatch(value) is not None
    if kind == "token":
        return _TOKEN.fullmatch(value) is not None
    return bool(value.strip())  # "text"


@dataclass(frozen=True)
class _PayloadCheck:
    reason_code: str | None
    key_names: tuple[str, ...]
    payload: dict[str, Any]


def _check_payload(write_class: str, payload: object) -> _PayloadCheck:
    """Reason code, offending key names and the compact payload (empty unless it passed)."""
    if payload is None:
        payload = {}
    if not isinstance(payload, Mapping):
        return _PayloadCheck(REASON_UNSAFE_PAYLOAD, (), {})
    spec = PAYLOAD_SPECS[write_class]
    unsafe: list[str] = []
    unknown: list[str] = []
    invalid: list[str] = []
    for key, value in payload.items():
        if (
            not isinstance(key, str)
            or classify_session_runtime_key(key).state is KeyState.RAW_MATERIAL
            or _unsafe_value(value)
        ):
            unsafe.append(_shown(key))
        elif key not in spec:
            unknown.append(_shown(key))
        elif value is not None and not _fits(_plain(value), spec[key]):
            invalid.append(key)
    missing = [k for k in REQUIRED_PAYLOAD_KEYS[write_class] if payload.get(k) is None]
    for code, names in (
        (REASON_UNSAFE_PAYLOAD, unsafe),
        (REASON_UNKNOWN_PAYLOAD_KEY, unknown),
        (REASON_INVALID_PAYLOAD_VALUE, invalid),
        (REASON_MISSING_PAYLOAD_KEY, missing),
    ):
        if names:
            return _PayloadCheck(code, tuple(sorted(set(names))), {})
    compact = {k: _plain(payload[k]) for k in spec if payload.get(k) is not None}
    return _PayloadCheck(None, (), compact)


# ---- Identity -----------------------------------------------------------------------------


def _is_identity(value: object) -> bool:
    return (
        isinstance(value, str)
        and _IDENTITY.fullmatch(value) is not None
        and value not in (".", "..")
        and private_value_code(value) is None
    )


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _identity(values: Mapping[str, object]) -> tuple[dict[str, str | None], list[str]]:
    """Each id kept only when well-formed (else None); the names of the malformed ones."""
    kept: dict[str, str | None] = {}
    malformed: list[str] = []
    for name, value in values.items():
        if _is_missing(value):
            kept[name] = None
        elif _is_identity(value):
            kept[name] = str.__str__(value)
        else:
            kept[name] = None
            malformed.append(name)
    return kept, malformed


def _run_part(source_run_id: str | None, source_todo_id: str | None) -> str | None:
    return source_run_id or source_todo_id


def _names(keys: tuple[str, ...] | list[str]) -> str:
    shown = list(keys[:MAX_SHOWN_KEYS])
    more = len(keys) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "") if shown else "(none)"


def _is_ref(value: object) -> bool:
    return (
        isinstance(value, str)
        and _PAYLOAD_ID.fullmatch(value) is not None
        and private_value_code(value) is None
    )

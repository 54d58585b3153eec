"""Controlled writeback, the pure part: plan, validate and record compact host writes.

Owns ``session_runtime_controlled_writeback_v0``: the five write classes and their allowed
payload keys, the idempotency key, the entry criteria, the dry-run plan document (with its
status, reason code and public-safe blocker), the document validator, and the compact
``session_runtime_controlled_writeback_result_v0`` record. The I/O side (the host adapter,
the CLI and the result log) lives outside this package and calls these functions.

It must never do I/O, touch the host, read a clock or the environment, mutate an input,
grant launch, billing or permission authority, or copy a payload value it has not proved
compact (the value of an unsafe key never appears in a plan, a blocker or a result; only
key names do). These functions only describe: a rejected or failed writeback never changes
the LoopX decision it came from, because nothing here can reach that decision.

Theory of operation. ``build_writeback`` checks, in this order, and stops at the first
failure: the write class; the payload (raw-material key names via keys.py, non-scalar or
over-long or multi-line or path- or credential-looking values, unknown keys, values outside
the class contract, missing required keys); the identity fields (malformed ids, a source
event class that does not fit the write class); then the entry criteria (projection, source
event, dry-run support, runtime availability). Structural problems give ``rejected`` (the
input must change); unmet entry criteria give ``blocked`` (the world must change). Only a
plan that passes everything is ``previewed``, which is the only status that may be applied.

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
  the ``:``-joined idempotency key can always be split back. A missing id means the
  projection does not identify the write (``no_projection``, blocked); a malformed one is
  ``invalid_identity`` (rejected) and is written as null, never echoed.
- ``source_event_class`` must fit the write class (``SOURCE_EVENT_CLASSES``): a quota hint
  written from a handoff event is ``source_event_mismatch``; a missing one is
  ``no_source_event``.
- The plan document's ``result.status`` is ``previewed`` only for a previewed plan; a
  rejected plan says ``rejected`` and a blocked one ``skipped`` (the result enum has no
  ``blocked``). Its ``writeback.mode`` is always ``dry_run``; ``apply`` is accepted by the
  validator for a document the I/O side applied after its preview.
- ``writeback_result`` raises ``ValueError`` for a status outside the enum, ``applied`` for
  a plan that was not previewed, or a reason code or runtime event id that is not a compact
  token: recording a wrong result is a caller bug, not bad input. It never reads ``prior``
  (the host's prior value, which the I/O side stores on its own).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# openviking's private_value_code is the package's one list of private-value patterns (home
# paths, internal URLs, credentials), so both contracts reject the same values.
from loopx_chat.session_runtime.keys import KeyState, classify_session_runtime_key
from loopx_chat.session_runtime.openviking import private_value_code

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
QUOTA_HINTS: tuple[str, ...] = (
    "eligible",
    "throttled",
    "monitor_quiet_skip",
    "operator_gate",
    "blocked",
)

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
            kept[name] = str.__str__(value)  # type: ignore[arg-type]
        else:
            kept[name] = None
            malformed.append(name)
    return kept, malformed


def _run_part(source_run_id: str | None, source_todo_id: str | None) -> str | None:
    return source_run_id or source_todo_id


# ---- The plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WritebackPlan:
    """A dry-run plan: the §5 document plus whether it may be applied, and why not.

    ``status`` is ``previewed`` (may be applied), ``rejected`` (the input must change) or
    ``blocked`` (an entry criterion is unmet). ``blocker`` is a public-safe one-line text for
    the goal when not previewed, else None. The document is a fresh dict the caller owns.
    """

    document: dict[str, Any]
    status: str
    reason_code: str | None
    blocker: str | None

    @property
    def may_apply(self) -> bool:
        return self.status == PLAN_PREVIEWED

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason_code": self.reason_code,
            "blocker": self.blocker,
            "document": self.document,
        }


def _names(keys: tuple[str, ...] | list[str]) -> str:
    shown = list(keys[:MAX_SHOWN_KEYS])
    more = len(keys) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "") if shown else "(none)"


def blocker_text(
    reason_code: str, *, write_class: str | None = None, key_names: tuple[str, ...] = ()
) -> str:
    """The public-safe one-line blocker for a reason code (key names only, never values)."""
    cls = write_class or "this write class"
    keys = _names(key_names)
    texts = {
        REASON_UNKNOWN_WRITE_CLASS: "unknown write class; use one of " + ", ".join(WRITE_CLASSES),
        REASON_UNSAFE_PAYLOAD: (
            f"payload key(s) {keys} carry raw material or non-compact values (nested, "
            f"over {MAX_TEXT_LENGTH} chars, multi-line, path- or credential-like); send ids, "
            "labels and short summaries only"
        ),
        REASON_UNKNOWN_PAYLOAD_KEY: f"payload key(s) {keys} are not allowed for {cls}",
        REASON_INVALID_PAYLOAD_VALUE: (
            f"payload key(s) {keys} have values outside the {cls} contract"
        ),
        REASON_MISSING_PAYLOAD_KEY: f"payload is missing {keys}, required for {cls}",
        REASON_INVALID_IDENTITY: (f"{keys} must be compact ids (1-160 of A-Z a-z 0-9 . _ -)"),
        REASON_SOURCE_EVENT_MISMATCH: (
            f"the source event class does not fit {cls}; use "
            + " or ".join(SOURCE_EVENT_CLASSES.get(cls, ("a matching source event",)))
        ),
        REASON_NO_PROJECTION: (
            "no read-only projection identifies the goal, agent, runtime, session and a run or "
            "todo; build the projection first"
        ),
        REASON_NO_SOURCE_EVENT: "the LoopX source event is not recorded; record it first",
        REASON_NO_DRY_RUN_SUPPORT: (
            "the runtime has no dry-run or preview path; the CLI stays the source of truth"
        ),
        REASON_RUNTIME_UNAVAILABLE: (
            "the runtime is unavailable; record the write as failed or skipped, never as an "
            "approval"
        ),
    }
    verb = "rejected" if reason_code in REJECTED_REASONS else "blocked"
    return f"controlled writeback {verb}: " + texts.get(reason_code, "not previewed")


def build_writeback(
    *,
    goal_id: object,
    agent_id: object,
    runtime_id: object,
    session_id: object,
    source_run_id: object,
    source_todo_id: object,
    source_event_class: object,
    write_class: object,
    payload: object,
    entry: object,
) -> WritebackPlan:
    """The dry-run plan for one compact writeback. Never raises; never mutates an input."""
    known_class = (
        write_class if isinstance(write_class, str) and write_class in WRITE_CLASSES else None
    )
    ids, malformed = _identity(
        {
            "goal_id": goal_id,
            "agent_id": agent_id,
            "runtime_id": runtime_id,
            "session_id": session_id,
            "source_run_id": source_run_id,
            "source_todo_id": source_todo_id,
            "source_event_class": source_event_class,
        }
    )
    check = _check_payload(known_class, payload) if known_class else None

    reason: str | None = None
    key_names: tuple[str, ...] = ()
    if known_class is None:
        reason = REASON_UNKNOWN_WRITE_CLASS
    elif check is not None and check.reason_code is not None:
        reason, key_names = check.reason_code, check.key_names
    elif malformed:
        reason, key_names = REASON_INVALID_IDENTITY, tuple(malformed)
    elif ids["source_event_class"] is None:
        reason = REASON_NO_SOURCE_EVENT
    elif ids["source_event_class"] not in SOURCE_EVENT_CLASSES[known_class]:
        reason = REASON_SOURCE_EVENT_MISMATCH
    elif any(ids[name] is None for name in IDENTITY_FIELDS) or (
        _run_part(ids["source_run_id"], ids["source_todo_id"]) is None
    ):
        reason = REASON_NO_PROJECTION
    else:
        unmet = check_entry_criteria(entry)
        reason = unmet[0] if unmet else None

    if reason is None:
        status = PLAN_PREVIEWED
    elif reason in REJECTED_REASONS:
        status = PLAN_REJECTED
    else:
        status = PLAN_BLOCKED

    run_part = _run_part(ids["source_run_id"], ids["source_todo_id"])
    key = (
        idempotency_key(ids["goal_id"], run_part, known_class)
        if known_class and ids["goal_id"] and run_part
        else None
    )
    document: dict[str, Any] = {
        "schema_version": WRITEBACK_SCHEMA_VERSION,
        "goal_id": ids["goal_id"],
        "agent_id": ids["agent_id"],
        "runtime": {"runtime_id": ids["runtime_id"], "session_id": ids["session_id"]},
        "loopx_source": {
            "source_run_id": ids["source_run_id"],
            "source_todo_id": ids["source_todo_id"],
            "source_event_class": ids["source_event_class"],
        },
        "writeback": {
            "write_class": known_class,
            "mode": MODE_DRY_RUN,
            "idempotency_key": key,
            # Only a payload that passed every check is copied, so no unsafe value can ride
            # along in a rejected plan.
            "payload": dict(check.payload) if check is not None else {},
        },
        "boundary": dict.fromkeys(BOUNDARY_FLAGS, False),
        "result": {
            "status": DOCUMENT_RESULT_STATUS[status],
            "runtime_event_id": None,
            "loopx_writeback_run_id": None,
        },
    }
    blocker = (
        None
        if reason is None
        else blocker_text(reason, write_class=known_class, key_names=key_names)
    )
    return WritebackPlan(document=document, status=status, reason_code=reason, blocker=blocker)


# ---- Validation ---------------------------------------------------------------------------

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


def _is_ref(value: object) -> bool:
    return (
        isinstance(value, str)
        and _PAYLOAD_ID.fullmatch(value) is not None
        and private_value_code(value) is None
    )


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


# ---- Results ------------------------------------------------------------------------------


def writeback_result(
    plan_or_document: WritebackPlan | Mapping[str, Any],
    *,
    status: str,
    reason_code: str | None = None,
    runtime_event_id: str | None = None,
    prior: object = None,
    loopx_writeback_run_id: str | None = None,
) -> dict[str, Any]:
    """The compact result record for one writeback attempt: ids and codes, no payload.

    ``prior`` (the host's value before an apply) is accepted so the I/O side can pass what
    it has, but it is never read or copied: it is host data the I/O side stores itself.
    Raises ``ValueError`` on a status outside the enum, ``applied`` for a plan that was not
    previewed, or a reason code or id that is not compact.
    """
    del prior  # deliberately unused, see above
    if isinstance(plan_or_document, WritebackPlan):
        document: Mapping[str, Any] = plan_or_document.document
        previewed = plan_or_document.status == PLAN_PREVIEWED
        default_reason = plan_or_document.reason_code
    elif isinstance(plan_or_document, Mapping):
        document = plan_or_document
        result_in = document.get("result")
        previewed = isinstance(result_in, Mapping) and result_in.get("status") == PLAN_PREVIEWED
        default_reason = None
    else:
        raise ValueError("writeback_result needs a WritebackPlan or its document")
    if not isinstance(status, str) or status not in RESULT_STATUSES:
        raise ValueError("status must be one of " + ", ".join(RESULT_STATUSES))
    if status == "applied" and not previewed:
        raise ValueError("cannot record applied for a writeback that was not previewed")
    if reason_code is None and status not in ("applied", "previewed"):
        reason_code = default_reason
    if reason_code is not None and not (
        isinstance(reason_code, str) and _TOKEN.fullmatch(reason_code)
    ):
        raise ValueError("reason_code must be a compact code (A-Z a-z 0-9 _ . -, 1-64 chars)")
    for name, value in (
        ("runtime_event_id", runtime_event_id),
        ("loopx_writeback_run_id", loopx_writeback_run_id),
    ):
        if value is not None and not _is_ref(value):
            raise ValueError(f"{name} must be a compact id")

    writeback = document.get("writeback")
    writeback = writeback if isinstance(writeback, Mapping) else {}
    goal_id = document.get("goal_id")
    write_class = writeback.get("write_class")
    key = writeback.get("idempotency_key")
    return {
        "schema_version": WRITEBACK_RESULT_SCHEMA_VERSION,
        # Copied only when they are what the contract says they are, so a hand-made
        # document cannot smuggle text into the result log.
        "goal_id": goal_id if _is_identity(goal_id) else None,
        "write_class": write_class if write_class in WRITE_CLASSES else None,
        "idempotency_key": key if _is_ref(key) and isinstance(key, str) else None,
        "status": status,
        "reason_code": reason_code,
        "runtime_event_id": runtime_event_id,
        "loopx_writeback_run_id": loopx_writeback_run_id,
    }

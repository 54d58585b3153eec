"""Controlled writeback, the pure part: plan and record compact host writes.

Owns building the ``session_runtime_controlled_writeback_v0`` dry-run plan document (with
its status, reason code and public-safe blocker) and the compact
``session_runtime_controlled_writeback_result_v0`` record. The write-class tables, entry
criteria, idempotency key and payload and identity checks live in writeback_contract.py and
the document validator in writeback_validate.py; this module re-exports their public names,
so every name importable from here before the split still is. The I/O side (the host
adapter, the CLI and the result log) lives outside this package and calls these functions.

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

Open points resolved here (the contract is silent; the payload and identity ones are in
writeback_contract.py):
- A missing identity id means the projection does not identify the write
  (``no_projection``, blocked); a malformed one is ``invalid_identity`` (rejected) and is
  written as null, never echoed. A source event class that does not fit the write class is
  ``source_event_mismatch``; a missing one is ``no_source_event``.
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopx_chat.session_runtime.writeback_contract import (
    _TOKEN,
    ARTIFACT_POINTER,
    BLOCKED_REASONS,
    BOUNDARY_FLAGS,
    DECISION_LABELS,
    DOCUMENT_RESULT_STATUS,
    ENTRY_CRITERIA,
    HANDOFF_PACKET_POINTER,
    HUMAN_REWARD_OVERLAY,
    IDENTITY_FIELDS,
    MAX_INT,
    MAX_SHOWN_KEYS,
    MAX_TEXT_LENGTH,
    MODE_APPLY,
    MODE_DRY_RUN,
    OPERATOR_GATE_DECISION,
    PAYLOAD_SPECS,
    PLAN_BLOCKED,
    PLAN_PREVIEWED,
    PLAN_REJECTED,
    PLAN_STATUSES,
    QUOTA_DECISION_HINT,
    QUOTA_HINTS,
    REASON_INVALID_IDENTITY,
    REASON_INVALID_PAYLOAD_VALUE,
    REASON_MISSING_PAYLOAD_KEY,
    REASON_NO_DRY_RUN_SUPPORT,
    REASON_NO_PROJECTION,
    REASON_NO_SOURCE_EVENT,
    REASON_RUNTIME_UNAVAILABLE,
    REASON_SOURCE_EVENT_MISMATCH,
    REASON_UNKNOWN_PAYLOAD_KEY,
    REASON_UNKNOWN_WRITE_CLASS,
    REASON_UNSAFE_PAYLOAD,
    REJECTED_REASONS,
    REQUIRED_PAYLOAD_KEYS,
    RESULT_STATUSES,
    REWARD_LABELS,
    SOURCE_EVENT_CLASSES,
    SOURCE_ID_FIELDS,
    WRITE_CLASSES,
    WRITEBACK_MODES,
    WRITEBACK_RESULT_SCHEMA_VERSION,
    WRITEBACK_SCHEMA_VERSION,
    EntryFacts,
    PayloadSpec,
    _check_payload,
    _identity,
    _is_identity,
    _is_ref,
    _names,
    _run_part,
    check_entry_criteria,
    idempotency_key,
)
from loopx_chat.session_runtime.writeback_validate import (
    SECTION_FIELDS,
    TOP_LEVEL_FIELDS,
    validate_writeback_document,
)

__all__ = [
    "ARTIFACT_POINTER",
    "BLOCKED_REASONS",
    "BOUNDARY_FLAGS",
    "DECISION_LABELS",
    "DOCUMENT_RESULT_STATUS",
    "ENTRY_CRITERIA",
    "HANDOFF_PACKET_POINTER",
    "HUMAN_REWARD_OVERLAY",
    "IDENTITY_FIELDS",
    "MAX_INT",
    "MAX_SHOWN_KEYS",
    "MAX_TEXT_LENGTH",
    "MODE_APPLY",
    "MODE_DRY_RUN",
    "OPERATOR_GATE_DECISION",
    "PAYLOAD_SPECS",
    "PLAN_BLOCKED",
    "PLAN_PREVIEWED",
    "PLAN_REJECTED",
    "PLAN_STATUSES",
    "QUOTA_DECISION_HINT",
    "QUOTA_HINTS",
    "REASON_INVALID_IDENTITY",
    "REASON_INVALID_PAYLOAD_VALUE",
    "REASON_MISSING_PAYLOAD_KEY",
    "REASON_NO_DRY_RUN_SUPPORT",
    "REASON_NO_PROJECTION",
    "REASON_NO_SOURCE_EVENT",
    "REASON_RUNTIME_UNAVAILABLE",
    "REASON_SOURCE_EVENT_MISMATCH",
    "REASON_UNKNOWN_PAYLOAD_KEY",
    "REASON_UNKNOWN_WRITE_CLASS",
    "REASON_UNSAFE_PAYLOAD",
    "REJECTED_REASONS",
    "REQUIRED_PAYLOAD_KEYS",
    "RESULT_STATUSES",
    "REWARD_LABELS",
    "SECTION_FIELDS",
    "SOURCE_EVENT_CLASSES",
    "SOURCE_ID_FIELDS",
    "TOP_LEVEL_FIELDS",
    "WRITEBACK_MODES",
    "WRITEBACK_RESULT_SCHEMA_VERSION",
    "WRITEBACK_SCHEMA_VERSION",
    "WRITE_CLASSES",
    "EntryFacts",
    "PayloadSpec",
    "WritebackPlan",
    "blocker_text",
    "build_writeback",
    "check_entry_criteria",
    "idempotency_key",
    "validate_writeback_document",
    "writeback_result",
]


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
        previewed = plan_or_document.may_apply
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

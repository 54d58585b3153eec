"""The controlled-writeback contract (pure part): plans, entry criteria, payloads, results."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loopx_chat.session_runtime import (
    WRITEBACK_RESULT_SCHEMA_VERSION,
    WRITEBACK_SCHEMA_VERSION,
    EntryFacts,
    KeyState,
    WritebackPlan,
    build_writeback,
    check_entry_criteria,
    classify_session_runtime_key,
    idempotency_key,
    validate_writeback_document,
    writeback_result,
)
from loopx_chat.session_runtime import writeback as wb

READY = EntryFacts(
    projection_present=True,
    source_event_recorded=True,
    runtime_supports_dry_run=True,
    runtime_available=True,
)

VALID_PAYLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    "operator_gate_decision": (
        "operator_gate",
        {
            "decision_id": "gate-0a1b2c3d4e5f",
            "decision_label": "approved",
            "actor_class": "operator",
            "reason_summary": "the public smoke passed",
            "source_run_id": "gate-0a1b2c3d4e5f.approved",
        },
    ),
    "human_reward_overlay": (
        "human_reward",
        {
            "reward_id": "reward_7",
            "judged_run_id": "run_123",
            "label": "mixed",
            "reason_summary": "right route, slow",
        },
    ),
    "quota_decision_hint": (
        "quota_decision",
        {"hint": "monitor_quiet_skip", "window_id": "win_2026_01", "reason_code": "quiet_window"},
    ),
    "handoff_packet_pointer": (
        "handoff_packet",
        {
            "handoff_id": "handoff-42",
            "next_action": "continue the validated next action",
            "stop_condition": "the smoke prints ok",
            "evidence_pointer_count": 2,
        },
    ),
    "artifact_pointer": (
        "artifact",
        {"artifact_id": "art_9", "validation_label": "passed", "outcome_class": "validated"},
    ),
}


def args(write_class: str = "handoff_packet_pointer", **overrides: Any) -> dict[str, Any]:
    event_class, payload = VALID_PAYLOADS[write_class]
    base: dict[str, Any] = {
        "goal_id": "loopx-meta",
        "agent_id": "codex",
        "runtime_id": "codex_app_server",
        "session_id": "public-safe-session-handle",
        "source_run_id": "run_123",
        "source_todo_id": "todo_123",
        "source_event_class": event_class,
        "write_class": write_class,
        "payload": copy.deepcopy(payload),
        "entry": READY,
    }
    base.update(overrides)
    return base


def plan_text(plan: WritebackPlan) -> str:
    return json.dumps(plan.to_dict())


def with_payload(**changes: Any) -> dict[str, Any]:
    payload = copy.deepcopy(VALID_PAYLOADS["handoff_packet_pointer"][1])
    payload.update(changes)
    return args(payload=payload)


# ---- Idempotency and valid plans ----------------------------------------------------------


def test_idempotency_key_format() -> None:
    assert idempotency_key("loopx-meta", "run_123", "handoff_packet_pointer") == (
        "loopx-meta:run_123:handoff_packet_pointer"
    )
    assert idempotency_key("g", "r", "artifact_pointer") != idempotency_key(
        "g", "r2", "artifact_pointer"
    )


@pytest.mark.parametrize("write_class", wb.WRITE_CLASSES)
def test_valid_plan_is_previewed_and_validates(write_class: str) -> None:
    plan = build_writeback(**args(write_class))
    assert (plan.status, plan.reason_code, plan.blocker, plan.may_apply) == (
        "previewed",
        None,
        None,
        True,
    )
    doc = plan.document
    assert validate_writeback_document(doc) == []
    assert doc["schema_version"] == WRITEBACK_SCHEMA_VERSION
    assert doc["writeback"]["mode"] == "dry_run"
    assert doc["writeback"]["write_class"] == write_class
    assert doc["writeback"]["idempotency_key"] == f"loopx-meta:run_123:{write_class}"
    assert doc["writeback"]["payload"] == VALID_PAYLOADS[write_class][1]
    assert doc["boundary"] == dict.fromkeys(wb.BOUNDARY_FLAGS, False)
    assert doc["boundary"]["launch_authority_granted"] is False
    assert doc["result"] == {
        "status": "previewed",
        "runtime_event_id": None,
        "loopx_writeback_run_id": None,
    }
    assert doc["runtime"] == {
        "runtime_id": "codex_app_server",
        "session_id": "public-safe-session-handle",
    }
    assert doc["loopx_source"]["source_event_class"] == VALID_PAYLOADS[write_class][0]


def test_todo_only_source_keys_on_the_todo() -> None:
    plan = build_writeback(**args(source_run_id=None))
    assert plan.status == "previewed"
    assert plan.document["writeback"]["idempotency_key"] == (
        "loopx-meta:todo_123:handoff_packet_pointer"
    )
    assert validate_writeback_document(plan.document) == []


def test_optional_payload_keys_may_be_absent_or_null() -> None:
    plan = build_writeback(
        **args(payload={"handoff_id": "handoff-1", "next_action": "go", "stop_condition": None})
    )
    assert plan.status == "previewed"
    assert plan.document["writeback"]["payload"] == {"handoff_id": "handoff-1", "next_action": "go"}


def test_write_class_name_is_accepted_as_its_own_source_event() -> None:
    plan = build_writeback(**args(source_event_class="handoff_packet_pointer"))
    assert plan.status == "previewed"


def test_allowed_payload_keys_are_never_raw_material() -> None:
    keys = {key for spec in wb.PAYLOAD_SPECS.values() for key in spec}
    raw = [k for k in keys if classify_session_runtime_key(k).state is KeyState.RAW_MATERIAL]
    assert raw == []
    for write_class, required in wb.REQUIRED_PAYLOAD_KEYS.items():
        assert set(required) <= set(wb.PAYLOAD_SPECS[write_class])


# ---- Entry criteria -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "code"),
    [
        ("projection_present", "no_projection"),
        ("source_event_recorded", "no_source_event"),
        ("runtime_supports_dry_run", "no_dry_run_support"),
        ("runtime_available", "runtime_unavailable"),
    ],
)
def test_each_unmet_entry_criterion_blocks_with_its_code(field: str, code: str) -> None:
    entry = dataclasses.replace(READY, **{field: False})
    assert check_entry_criteria(entry) == (code,)
    plan = build_writeback(**args(entry=entry))
    assert (plan.status, plan.reason_code, plan.may_apply) == ("blocked", code, False)
    assert plan.blocker and plan.blocker.startswith("controlled writeback blocked: ")
    assert "\n" not in plan.blocker
    assert plan.document["result"]["status"] == "skipped"
    # Blocked is not rejected: the compact payload is still previewed for the record.
    assert plan.document["writeback"]["payload"] == VALID_PAYLOADS["handoff_packet_pointer"][1]


def test_entry_criteria_report_every_unmet_code_in_contract_order() -> None:
    none_met = EntryFacts(False, False, False, False)
    assert check_entry_criteria(none_met) == (
        "no_projection",
        "no_source_event",
        "no_dry_run_support",
        "runtime_unavailable",
    )
    assert check_entry_criteria(READY) == ()
    assert build_writeback(**args(entry=none_met)).reason_code == "no_projection"


@pytest.mark.parametrize("entry", [None, object(), {"projection_present": True}, "ready"])
def test_entry_criteria_fail_closed_on_anything_but_entry_facts(entry: object) -> None:
    assert len(check_entry_criteria(entry)) == 4
    assert build_writeback(**args(entry=entry)).status == "blocked"


def test_truthy_non_bool_facts_do_not_count() -> None:
    entry = EntryFacts(True, True, "yes", True)  # type: ignore[arg-type]
    assert check_entry_criteria(entry) == ("no_dry_run_support",)


@pytest.mark.parametrize(
    "overrides",
    [
        {"goal_id": None},
        {"agent_id": ""},
        {"runtime_id": "  "},
        {"session_id": None},
        {"source_run_id": None, "source_todo_id": None},
    ],
)
def test_missing_identity_means_no_projection(overrides: dict[str, Any]) -> None:
    plan = build_writeback(**args(**overrides))
    assert (plan.status, plan.reason_code) == ("blocked", "no_projection")


def test_missing_source_event_class_means_no_source_event() -> None:
    plan = build_writeback(**args(source_event_class=None))
    assert (plan.status, plan.reason_code) == ("blocked", "no_source_event")


@pytest.mark.parametrize(
    ("write_class", "event_class"),
    [("quota_decision_hint", "handoff_packet"), ("operator_gate_decision", "human_reward")],
)
def test_source_event_must_fit_the_write_class(write_class: str, event_class: str) -> None:
    plan = build_writeback(**args(write_class, source_event_class=event_class))
    assert (plan.status, plan.reason_code) == ("rejected", "source_event_mismatch")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("goal_id", "CANARY goal with spaces"),
        ("agent_id", "/Users/alice/CANARY/"),
        ("session_id", "CANARY:colon"),
        ("runtime_id", "sk-CANARYabcdefghijklmnop"),
        ("source_run_id", {"CANARY": 1}),
        ("source_todo_id", ".."),
    ],
)
def test_malformed_identity_is_rejected_and_not_echoed(field: str, value: object) -> None:
    plan = build_writeback(**args(**{field: value}))
    assert (plan.status, plan.reason_code) == ("rejected", "invalid_identity")
    assert "CANARY" not in plan_text(plan)
    assert field in (plan.blocker or "")


# ---- Payload rules ------------------------------------------------------------------------

CANARY = "CANARY-value-9e41"

UNSAFE_PAYLOADS: list[tuple[str, str, object]] = [
    ("transcript key", "transcript", CANARY),
    ("tool output key", "tool_output", CANARY),
    ("api key", "api_key", CANARY),
    ("log path key", "log_path", CANARY),
    ("body key", "body", CANARY),
    ("message key", "message", CANARY),
    ("stdout key", "stdout_tail", CANARY),
    ("raw key with bool", "raw_dump", True),
    ("nested object", "next_action", {"text": CANARY}),
    ("nested list", "stop_condition", [CANARY]),
    ("float", "evidence_pointer_count", 2.5),
    ("bytes", "next_action", CANARY.encode()),
    ("huge int", "evidence_pointer_count", 2**60),
    ("long text", "next_action", CANARY + "x" * 300),
    ("multi-line text", "next_action", f"line one\n{CANARY}"),
    ("users path", "next_action", f"read /Users/alice/{CANARY}/notes"),
    ("home path", "stop_condition", f"/home/bob/{CANARY}/"),
    ("absolute path", "next_action", f"open /etc/{CANARY}/conf"),
    ("tilde path", "next_action", f"edit ~/{CANARY}"),
    ("windows path", "next_action", f"C:\\work\\{CANARY}"),
    ("file url", "next_action", f"file:///{CANARY}"),
    ("bearer token", "next_action", f"Bearer {CANARY}abcdef"),
    ("aws key id", "handoff_id", "AKIAABCDEFGHIJKLMNOP"),
    ("sk key", "next_action", "sk-CANARYabcdefghijklmnop"),
    ("github token", "next_action", "ghp_CANARYabcdefghijklmnopqrstuvwx"),
    ("password assignment", "next_action", f"password={CANARY}"),
    ("internal url", "next_action", f"https://corp-only.example/{CANARY}"),
]


@pytest.mark.parametrize(
    ("key", "value"),
    [(k, v) for _, k, v in UNSAFE_PAYLOADS],
    ids=[n for n, _, _ in UNSAFE_PAYLOADS],
)
def test_unsafe_payload_is_rejected_and_the_value_never_appears(key: str, value: object) -> None:
    plan = build_writeback(**with_payload(**{key: value}))
    assert (plan.status, plan.reason_code, plan.may_apply) == ("rejected", "unsafe_payload", False)
    text = plan_text(plan)
    for marker in ("CANARY", "AKIAABCDEFGHIJKLMNOP", str(2**60)):
        assert marker not in text
    assert plan.document["writeback"]["payload"] == {}
    assert plan.document["result"]["status"] == "rejected"
    assert key in (plan.blocker or "")
    assert plan.blocker and plan.blocker.startswith("controlled writeback rejected: ")
    result = writeback_result(plan, status="rejected")
    assert result["reason_code"] == "unsafe_payload"
    assert "CANARY" not in json.dumps(result)


@pytest.mark.parametrize("payload", [[CANARY], CANARY, 42, (CANARY,)])
def test_a_payload_that_is_not_an_object_is_unsafe(payload: object) -> None:
    plan = build_writeback(**args(payload=payload))
    assert (plan.status, plan.reason_code) == ("rejected", "unsafe_payload")
    assert "CANARY" not in plan_text(plan)


def test_a_secret_looking_key_name_is_not_shown() -> None:
    plan = build_writeback(**with_payload(**{"sk-CANARYabcdefghijklmnop": 1}))
    assert plan.status == "rejected"
    assert "CANARY" not in plan_text(plan)
    assert "<unnamed key>" in (plan.blocker or "")


def test_unknown_write_class_is_rejected_without_echo() -> None:
    plan = build_writeback(**{**args(), "write_class": "CANARY_shell_exec"})
    assert (plan.status, plan.reason_code) == ("rejected", "unknown_write_class")
    assert plan.document["writeback"]["write_class"] is None
    assert plan.document["writeback"]["idempotency_key"] is None
    assert "CANARY" not in plan_text(plan)


@pytest.mark.parametrize("write_class", [None, 3, ["handoff_packet_pointer"], {"x": 1}])
def test_non_string_write_class_is_unknown(write_class: object) -> None:
    assert (
        build_writeback(**{**args(), "write_class": write_class}).reason_code
        == "unknown_write_class"
    )


def test_unknown_payload_key_is_rejected_without_its_value() -> None:
    plan = build_writeback(**with_payload(priority_hint=CANARY))
    assert (plan.status, plan.reason_code) == ("rejected", "unknown_payload_key")
    assert "priority_hint" in (plan.blocker or "")
    assert "CANARY" not in plan_text(plan)


def test_a_key_from_another_class_is_unknown() -> None:
    plan = build_writeback(**with_payload(decision_label="approved"))
    assert plan.reason_code == "unknown_payload_key"


@pytest.mark.parametrize(
    ("write_class", "key", "value"),
    [
        ("operator_gate_decision", "decision_label", "maybe"),
        ("human_reward_overlay", "label", "great"),
        ("quota_decision_hint", "hint", "launch_now"),
        ("handoff_packet_pointer", "evidence_pointer_count", -1),
        ("handoff_packet_pointer", "evidence_pointer_count", True),
        ("handoff_packet_pointer", "evidence_pointer_count", "2"),
        ("handoff_packet_pointer", "handoff_id", "handoff with spaces"),
        ("handoff_packet_pointer", "next_action", "   "),
        ("artifact_pointer", "validation_label", "Passed!"),
        ("operator_gate_decision", "actor_class", 7),
    ],
)
def test_values_outside_the_class_contract_are_invalid(
    write_class: str, key: str, value: object
) -> None:
    payload = copy.deepcopy(VALID_PAYLOADS[write_class][1])
    payload[key] = value
    plan = build_writeback(**args(write_class, payload=payload))
    assert (plan.status, plan.reason_code) == ("rejected", "invalid_payload_value")
    assert key in (plan.blocker or "")


@pytest.mark.parametrize(
    ("write_class", "missing"),
    [(c, k) for c, keys in wb.REQUIRED_PAYLOAD_KEYS.items() for k in keys],
)
def test_missing_required_payload_key_is_rejected(write_class: str, missing: str) -> None:
    payload = copy.deepcopy(VALID_PAYLOADS[write_class][1])
    del payload[missing]
    plan = build_writeback(**args(write_class, payload=payload))
    assert (plan.status, plan.reason_code) == ("rejected", "missing_payload_key")
    assert missing in (plan.blocker or "")


def test_payload_rejection_outranks_entry_criteria() -> None:
    plan = build_writeback(
        **{**with_payload(transcript=CANARY), "entry": EntryFacts(False, False, False, False)}
    )
    assert plan.reason_code == "unsafe_payload"


def test_build_never_mutates_its_inputs() -> None:
    call = with_payload(transcript=CANARY)
    before = copy.deepcopy(call)
    build_writeback(**call)
    assert call == before
    good = args()
    before = copy.deepcopy(good)
    plan = build_writeback(**good)
    plan.document["writeback"]["payload"]["next_action"] = "edited"
    assert good == before


def test_plan_is_frozen() -> None:
    plan = build_writeback(**args())
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.status = "applied"  # type: ignore[misc]


# ---- Document validation ------------------------------------------------------------------


def valid_doc() -> dict[str, Any]:
    return build_writeback(**args()).document


def _set(path: str, value: object) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[part]
        node[last] = value

    return mutate


def _delete(path: str) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[part]
        del node[last]

    return mutate


DOC_REJECTIONS = (
    [
        (
            "schema",
            _set("schema_version", "session_runtime_controlled_writeback_v1"),
            "wrong_schema_version",
        ),
        ("missing section", _delete("boundary"), "missing_field"),
        ("invalid section", _set("runtime", "codex"), "invalid_section"),
        ("unknown field", _set("writeback.priority", 1), "unknown_field"),
        ("missing field", _delete("loopx_source.source_event_class"), "missing_field"),
        ("write class", _set("writeback.write_class", "shell_exec"), "unknown_enum"),
        ("mode", _set("writeback.mode", "force_apply"), "unknown_enum"),
        (
            "idempotency key",
            _set("writeback.idempotency_key", "loopx-meta:run_999:x"),
            "inconsistent_idempotency_key",
        ),
        ("key after goal change", _set("goal_id", "other-goal"), "inconsistent_idempotency_key"),
        (
            "unsafe payload",
            _set("writeback.payload.next_action", "/Users/alice/x/"),
            "unsafe_payload",
        ),
        ("unknown payload key", _set("writeback.payload.extra", "x"), "unknown_payload_key"),
        (
            "invalid payload value",
            _set("writeback.payload.evidence_pointer_count", -2),
            "invalid_payload_value",
        ),
        ("missing payload key", _delete("writeback.payload.handoff_id"), "missing_payload_key"),
        (
            "source mismatch",
            _set("loopx_source.source_event_class", "quota_decision"),
            "source_event_mismatch",
        ),
        ("bad goal id", _set("goal_id", "a goal"), "invalid_id"),
        ("bad session id", _set("runtime.session_id", "/home/bob/x/"), "invalid_id"),
        ("result status", _set("result.status", "approved"), "unknown_enum"),
        ("result id", _set("result.runtime_event_id", "evt with spaces"), "invalid_id"),
        (
            "no run or todo",
            lambda d: d["loopx_source"].update(source_run_id=None, source_todo_id=None),
            "missing_source_id",
        ),
    ]
    + [
        (f"boundary {flag}", _set(f"boundary.{flag}", True), "boundary_flag_not_false")
        for flag in wb.BOUNDARY_FLAGS
    ]
    + [("boundary string", _set("boundary.credentials_copied", "false"), "boundary_flag_not_false")]
)


@pytest.mark.parametrize(
    ("mutate", "code"),
    [(m, c) for _, m, c in DOC_REJECTIONS],
    ids=[n for n, _, _ in DOC_REJECTIONS],
)
def test_validator_rejects(mutate: Any, code: str) -> None:
    doc = valid_doc()
    assert validate_writeback_document(doc) == []
    mutate(doc)
    problems = validate_writeback_document(doc)
    assert code in {p.split(":", 1)[0] for p in problems}, problems
    assert "/Users/alice" not in " ".join(problems)


def test_validator_accepts_apply_mode_and_rejects_non_objects() -> None:
    doc = valid_doc()
    doc["writeback"]["mode"] = "apply"
    assert validate_writeback_document(doc) == []
    assert validate_writeback_document(["x"]) == ["not_an_object: <document>"]


# ---- Results ------------------------------------------------------------------------------

RESULT_KEYS = {
    "schema_version",
    "goal_id",
    "write_class",
    "idempotency_key",
    "status",
    "reason_code",
    "runtime_event_id",
    "loopx_writeback_run_id",
}


@pytest.mark.parametrize("status", wb.RESULT_STATUSES)
def test_result_record_carries_ids_and_codes_only(status: str) -> None:
    plan = build_writeback(**args())
    result = writeback_result(
        plan,
        status=status,
        reason_code=None if status in ("applied", "previewed") else "host_declined",
        runtime_event_id="thread-goal:public-safe-session-handle",
        prior={"objective": "CANARY prior host objective"},
        loopx_writeback_run_id="wb_run_1",
    )
    assert set(result) == RESULT_KEYS
    assert result["schema_version"] == WRITEBACK_RESULT_SCHEMA_VERSION
    assert (result["goal_id"], result["write_class"], result["status"]) == (
        "loopx-meta",
        "handoff_packet_pointer",
        status,
    )
    assert result["idempotency_key"] == "loopx-meta:run_123:handoff_packet_pointer"
    text = json.dumps(result)
    for value in VALID_PAYLOADS["handoff_packet_pointer"][1].values():
        if isinstance(value, str):
            assert value not in text
    assert "CANARY" not in text


def test_result_defaults_to_the_plans_reason_code() -> None:
    plan = build_writeback(**args(entry=EntryFacts(True, True, True, False)))
    result = writeback_result(plan, status="skipped")
    assert (result["status"], result["reason_code"]) == ("skipped", "runtime_unavailable")


def test_result_accepts_the_document_too() -> None:
    plan = build_writeback(**args())
    result = writeback_result(plan.document, status="applied", runtime_event_id="evt_1")
    assert result["idempotency_key"] == plan.document["writeback"]["idempotency_key"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"status": "approved"},
        {"status": "applied", "reason_code": "bad code with spaces"},
        {"status": "failed", "reason_code": "x" * 65},
        {"status": "applied", "runtime_event_id": "/Users/alice/x/"},
        {"status": "applied", "loopx_writeback_run_id": "run id"},
    ],
)
def test_result_rejects_what_is_not_compact(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        writeback_result(build_writeback(**args()), **kwargs)


def test_applied_requires_a_previewed_plan() -> None:
    rejected = build_writeback(**with_payload(transcript=CANARY))
    with pytest.raises(ValueError, match="not previewed"):
        writeback_result(rejected, status="applied")
    with pytest.raises(ValueError, match="not previewed"):
        writeback_result(rejected.document, status="applied")
    assert writeback_result(rejected, status="rejected")["reason_code"] == "unsafe_payload"


def test_result_never_copies_a_hand_made_documents_text() -> None:
    doc = valid_doc()
    doc["goal_id"] = "CANARY goal text"
    doc["writeback"]["write_class"] = "CANARY class"
    doc["writeback"]["idempotency_key"] = "CANARY key text"
    result = writeback_result(doc, status="failed", reason_code="host_error")
    assert "CANARY" not in json.dumps(result)


# ---- Properties ---------------------------------------------------------------------------

RAW_KEYS = ["transcript", "tool_output", "api_key", "log_path", "body", "message", "raw"]
json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=60)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=10,
)
allowed_keys = sorted({k for spec in wb.PAYLOAD_SPECS.values() for k in spec})
payload_keys = st.sampled_from(allowed_keys) | st.text(max_size=20)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    payload=st.dictionaries(payload_keys, json_values, max_size=6),
    write_class=st.sampled_from([*wb.WRITE_CLASSES, "nope"]),
    raw_key=st.sampled_from(RAW_KEYS),
)
def test_build_never_raises_and_never_echoes_a_raw_keys_value(
    payload: dict[str, Any], write_class: str, raw_key: str
) -> None:
    marker = "CANARY-raw-f00d"
    payload = {**payload, raw_key: marker}
    plan = build_writeback(**{**args(), "write_class": write_class, "payload": payload})
    assert plan.status in wb.PLAN_STATUSES
    assert plan.status == "rejected"
    text = json.dumps(plan.to_dict())
    assert marker not in text


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    payload=json_values,
    ids=st.lists(json_values, min_size=7, max_size=7),
    entry=st.sampled_from([READY, None, EntryFacts(False, True, True, True)]),
)
# Random arguments are always refused; this one is valid, so the previewed branch runs too.
@example(
    payload=VALID_PAYLOADS["handoff_packet_pointer"][1],
    ids=[
        "loopx-meta",
        "codex",
        "codex_app_server",
        "public-safe-session-handle",
        "run_123",
        "todo_123",
        "handoff_packet",
    ],
    entry=READY,
)
def test_build_never_raises_on_arbitrary_arguments(
    payload: object, ids: list[object], entry: object
) -> None:
    names = [
        "goal_id",
        "agent_id",
        "runtime_id",
        "session_id",
        "source_run_id",
        "source_todo_id",
        "source_event_class",
    ]
    plan = build_writeback(
        **dict(zip(names, ids, strict=True)),
        write_class="handoff_packet_pointer",
        payload=payload,
        entry=entry,
    )
    assert plan.status in wb.PLAN_STATUSES
    json.dumps(plan.to_dict())  # always serializable
    if plan.status == "previewed":
        assert validate_writeback_document(plan.document) == []
    else:
        assert plan.blocker and "\n" not in plan.blocker

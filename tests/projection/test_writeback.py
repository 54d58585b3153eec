"""One test per rule of the writeback plan and result (`session_runtime/writeback.py`).

What each reason means and which way it fails is written here from the reference
(`loopx-behaviour.md` §5, "Failure semantics (fail closed)": no projection, no source event,
no dry-run support and an unavailable runtime block; an unsafe payload is rejected; the
result's status is one of applied, skipped, rejected, failed), never read from the module.
"""

from __future__ import annotations

from typing import Any

import pytest

from loopx_chat.session_runtime import EntryFacts, build_writeback, writeback_result
from loopx_chat.session_runtime.writeback import WritebackPlan, blocker_text
from tests.helpers.writeback import HANDOFF

READY = EntryFacts(
    projection_present=True,
    source_event_recorded=True,
    runtime_supports_dry_run=True,
    runtime_available=True,
)


def plan(**changes: Any) -> WritebackPlan:
    args: dict[str, Any] = {
        "goal_id": "loopx-meta",
        "agent_id": "codex",
        "runtime_id": "codex_app_server",
        "session_id": "sess-1",
        "source_run_id": "run_123",
        "source_todo_id": "todo_123",
        "source_event_class": "handoff_packet",
        "write_class": "handoff_packet_pointer",
        "payload": dict(HANDOFF),
        "entry": READY,
    }
    args.update(changes)
    return build_writeback(**args)


def outcome(p: WritebackPlan) -> tuple[str, str | None, str]:
    return p.status, p.reason_code, p.document["result"]["status"]


def test_a_valid_plan_is_previewed_and_may_be_applied() -> None:
    p = plan()
    assert outcome(p) == ("previewed", None, "previewed")
    assert p.may_apply and p.blocker is None
    assert p.document["writeback"]["idempotency_key"] == "loopx-meta:run_123:handoff_packet_pointer"
    assert p.document["writeback"]["mode"] == "dry_run"
    assert p.document["writeback"]["payload"] == HANDOFF
    assert p.to_dict() == {
        "status": "previewed",
        "reason_code": None,
        "blocker": None,
        "document": p.document,
    }


# Blocked: the world must change (reference: request a projection, record the event first,
# block when there is no dry run, never approve when the runtime is away).
@pytest.mark.parametrize(
    ("fact", "reason", "words"),
    [
        ("projection_present", "no_projection", "build the projection first"),
        ("source_event_recorded", "no_source_event", "record it first"),
        ("runtime_supports_dry_run", "no_dry_run_support", "the CLI stays the source of truth"),
        ("runtime_available", "runtime_unavailable", "never as an approval"),
    ],
)
def test_each_unmet_entry_criterion_blocks(fact: str, reason: str, words: str) -> None:
    facts = {
        "projection_present": True,
        "source_event_recorded": True,
        "runtime_supports_dry_run": True,
        "runtime_available": True,
        fact: False,
    }
    p = plan(entry=EntryFacts(**facts))
    assert outcome(p) == ("blocked", reason, "skipped")
    assert not p.may_apply
    assert p.blocker is not None
    assert p.blocker.startswith("controlled writeback blocked: ") and words in p.blocker


def test_entry_criteria_are_reported_in_contract_order() -> None:
    nothing = EntryFacts(
        projection_present=False,
        source_event_recorded=False,
        runtime_supports_dry_run=False,
        runtime_available=False,
    )
    assert plan(entry=nothing).reason_code == "no_projection"
    assert plan(entry="ready").reason_code == "no_projection"  # not EntryFacts: fails closed


# Rejected: the input must change.
@pytest.mark.parametrize(
    ("changes", "reason", "words"),
    [
        ({"write_class": "shell_exec"}, "unknown_write_class", "use one of"),
        ({"write_class": None}, "unknown_write_class", "use one of"),
        (
            {"payload": {**HANDOFF, "next_action": "/Users/alice/x/"}},
            "unsafe_payload",
            "payload key(s) next_action carry raw material",
        ),
        (
            {"payload": {**HANDOFF, "extra": "x"}},
            "unknown_payload_key",
            "payload key(s) extra are not allowed for handoff_packet_pointer",
        ),
        (
            {"payload": {**HANDOFF, "evidence_pointer_count": -1}},
            "invalid_payload_value",
            "have values outside the handoff_packet_pointer contract",
        ),
        (
            {"payload": {k: v for k, v in HANDOFF.items() if k != "handoff_id"}},
            "missing_payload_key",
            "payload is missing handoff_id, required for handoff_packet_pointer",
        ),
        ({"session_id": "a b"}, "invalid_identity", "session_id must be compact ids"),
        (
            {"source_event_class": "quota_decision"},
            "source_event_mismatch",
            "does not fit handoff_packet_pointer; use handoff_packet",
        ),
    ],
)
def test_each_structural_problem_rejects(changes: dict[str, Any], reason: str, words: str) -> None:
    p = plan(**changes)
    assert outcome(p) == ("rejected", reason, "rejected")
    assert not p.may_apply
    assert p.blocker is not None
    assert p.blocker.startswith("controlled writeback rejected: ") and words in p.blocker
    assert "alice" not in str(p.to_dict())  # an unsafe value never rides along
    if reason in ("unsafe_payload", "unknown_payload_key", "invalid_payload_value"):
        assert p.document["writeback"]["payload"] == {}


def test_a_missing_source_event_is_blocked_not_rejected() -> None:
    p = plan(source_event_class=None)
    assert outcome(p) == ("blocked", "no_source_event", "skipped")


@pytest.mark.parametrize("missing", ["goal_id", "agent_id", "runtime_id", "session_id"])
def test_a_missing_identity_means_no_projection(missing: str) -> None:
    assert outcome(plan(**{missing: None})) == ("blocked", "no_projection", "skipped")


def test_no_run_and_no_todo_means_no_projection_and_no_key() -> None:
    p = plan(source_run_id=None, source_todo_id=None)
    assert outcome(p) == ("blocked", "no_projection", "skipped")
    assert p.document["writeback"]["idempotency_key"] is None


def test_the_key_uses_the_todo_when_there_is_no_run() -> None:
    p = plan(source_run_id=None)
    assert p.document["writeback"]["idempotency_key"] == (
        "loopx-meta:todo_123:handoff_packet_pointer"
    )
    assert plan(goal_id=None).document["writeback"]["idempotency_key"] is None
    assert plan(write_class="shell_exec").document["writeback"]["idempotency_key"] is None


def test_checks_run_in_order_class_payload_identity_event_projection_entry() -> None:
    everything_wrong = {
        "write_class": "shell_exec",
        "session_id": "a b",
        "source_event_class": None,
        "entry": None,
    }
    assert plan(**everything_wrong).reason_code == "unknown_write_class"
    del everything_wrong["write_class"]
    bad_payload = {**HANDOFF, "extra": "x"}
    assert plan(**everything_wrong, payload=bad_payload).reason_code == "unknown_payload_key"
    assert plan(**everything_wrong).reason_code == "invalid_identity"
    del everything_wrong["session_id"]
    assert plan(**everything_wrong).reason_code == "no_source_event"
    assert plan(entry=None, goal_id=None).reason_code == "no_projection"


def test_a_malformed_id_is_written_as_null_never_echoed() -> None:
    p = plan(session_id="/home/bob/secret")
    assert p.document["runtime"]["session_id"] is None
    assert "bob" not in str(p.to_dict())


def test_the_boundary_is_all_false_in_every_plan() -> None:
    for p in (plan(), plan(write_class="shell_exec"), plan(entry=None)):
        assert set(p.document["boundary"].values()) == {False}
        assert len(p.document["boundary"]) == 5


def test_blocker_text_for_an_unknown_reason_says_not_previewed() -> None:
    assert blocker_text("something_else") == "controlled writeback blocked: not previewed"
    text = blocker_text("source_event_mismatch")
    assert "does not fit this write class; use a matching source event" in text


# ---- results ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["applied", "skipped", "rejected", "failed", "previewed"])
def test_a_result_records_ids_and_codes_only(status: str) -> None:
    record = writeback_result(plan(), status=status, runtime_event_id="evt_1")
    assert record == {
        "schema_version": "session_runtime_controlled_writeback_result_v0",
        "goal_id": "loopx-meta",
        "write_class": "handoff_packet_pointer",
        "idempotency_key": "loopx-meta:run_123:handoff_packet_pointer",
        "status": status,
        "reason_code": None,
        "runtime_event_id": "evt_1",
        "loopx_writeback_run_id": None,
    }


def test_a_result_takes_the_plans_reason_unless_applied_or_previewed() -> None:
    blocked = plan(entry=None)
    assert writeback_result(blocked, status="skipped")["reason_code"] == "no_projection"
    assert writeback_result(blocked, status="failed", reason_code="x_1")["reason_code"] == "x_1"
    assert writeback_result(blocked.document, status="skipped")["reason_code"] is None
    assert writeback_result(plan(), status="previewed")["reason_code"] is None
    # A preview carries no reason, even one recorded for a plan that was blocked.
    assert writeback_result(blocked, status="previewed")["reason_code"] is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: writeback_result(plan(), status="approved"), "status must be one of"),
        (lambda: writeback_result(plan(), status=3), "status must be one of"),
        (
            lambda: writeback_result(plan(entry=None), status="applied"),
            "cannot record applied for a writeback that was not previewed",
        ),
        (
            lambda: writeback_result(plan(entry=None).document, status="applied"),
            "cannot record applied",
        ),
        (
            lambda: writeback_result(plan(), status="failed", reason_code="has space"),
            "reason_code must be a compact code",
        ),
        (
            lambda: writeback_result(plan(), status="failed", reason_code=7),
            "reason_code must be a compact code",
        ),
        (
            lambda: writeback_result(plan(), status="applied", runtime_event_id="a b"),
            "runtime_event_id must be a compact id",
        ),
        (
            lambda: writeback_result(plan(), status="applied", loopx_writeback_run_id="a b"),
            "loopx_writeback_run_id must be a compact id",
        ),
        (lambda: writeback_result(["doc"], status="failed"), "needs a WritebackPlan"),
    ],
)
def test_a_wrong_result_is_a_caller_bug(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_a_previewed_document_may_be_recorded_applied() -> None:
    record = writeback_result(plan().document, status="applied", loopx_writeback_run_id="lw_1")
    assert (record["status"], record["loopx_writeback_run_id"]) == ("applied", "lw_1")


def test_a_hand_made_document_cannot_smuggle_text_into_a_result() -> None:
    doc = plan().document
    doc["goal_id"] = "a goal with spaces"
    doc["writeback"] = {"write_class": "shell_exec", "idempotency_key": "has spaces /Users/x"}
    record = writeback_result(doc, status="failed", prior={"secret": "hunter2"})
    assert (record["goal_id"], record["write_class"], record["idempotency_key"]) == (
        None,
        None,
        None,
    )
    assert "hunter2" not in str(record)
    doc["writeback"] = "not a section"
    assert writeback_result(doc, status="failed")["write_class"] is None
    doc["writeback"] = {"idempotency_key": 12345}
    assert writeback_result(doc, status="failed")["idempotency_key"] is None


# ---- each class's payload, written from the reference's write-class table ---------------
# (class, its LoopX source events, a full valid payload, the keys a plan cannot go without,
# and for a closed label its allowed values). Which keys are required is our reading of
# "allowed payload": the id and the label or next action that make the write mean anything.
CLASSES: dict[str, tuple[tuple[str, ...], dict[str, Any], tuple[str, ...], tuple[str, ...]]] = {
    "operator_gate_decision": (
        ("operator_gate", "operator_gate_decision"),
        {
            "decision_id": "gate-1",
            "decision_label": "approved",
            "actor_class": "operator",
            "reason_summary": "smoke passed",
            "source_run_id": "run_1",
        },
        ("decision_id", "decision_label"),
        ("requested", "approved", "rejected"),
    ),
    "human_reward_overlay": (
        ("human_reward", "human_reward_overlay"),
        {"reward_id": "rw_1", "judged_run_id": "run_1", "label": "mixed", "reason_summary": "ok"},
        ("reward_id", "judged_run_id", "label"),
        ("good", "bad", "mixed"),
    ),
    "quota_decision_hint": (
        ("quota_decision", "quota_decision_hint"),
        {"hint": "throttled", "window_id": "win_1", "reason_code": "quiet"},
        ("hint",),
        ("eligible", "throttled", "monitor_quiet_skip", "operator_gate", "blocked"),
    ),
    "handoff_packet_pointer": (
        ("handoff_packet", "handoff_packet_pointer"),
        dict(HANDOFF),
        ("handoff_id", "next_action"),
        (),
    ),
    "artifact_pointer": (
        ("artifact", "run_projection", "run_pointer", "artifact_pointer"),
        {"artifact_id": "art_1", "validation_label": "passed", "outcome_class": "validated"},
        ("artifact_id",),
        (),
    ),
}
LABEL_KEY = {
    "operator_gate_decision": "decision_label",
    "human_reward_overlay": "label",
    "quota_decision_hint": "hint",
}


def class_plan(
    write_class: str, payload: dict[str, Any], event: str | None = None
) -> WritebackPlan:
    events = CLASSES[write_class][0]
    return plan(write_class=write_class, source_event_class=event or events[0], payload=payload)


@pytest.mark.parametrize("write_class", list(CLASSES))
def test_each_class_previews_its_full_payload_from_each_of_its_source_events(
    write_class: str,
) -> None:
    events, payload, _, _ = CLASSES[write_class]
    for event in events:
        p = class_plan(write_class, payload, event)
        assert outcome(p) == ("previewed", None, "previewed"), event
        assert p.document["writeback"]["payload"] == payload
    other = next(e for c, (es, *_) in CLASSES.items() if c != write_class for e in es)
    assert class_plan(write_class, payload, other).reason_code == "source_event_mismatch"


@pytest.mark.parametrize("write_class", list(CLASSES))
def test_each_class_requires_exactly_its_required_keys(write_class: str) -> None:
    _, payload, required, _ = CLASSES[write_class]
    for key in payload:
        without = {k: v for k, v in payload.items() if k != key}
        expected = "missing_payload_key" if key in required else None
        assert class_plan(write_class, without).reason_code == expected, key


@pytest.mark.parametrize("write_class", list(LABEL_KEY))
def test_each_closed_label_takes_exactly_its_values(write_class: str) -> None:
    _, payload, _, labels = CLASSES[write_class]
    key = LABEL_KEY[write_class]
    for label in labels:
        assert class_plan(write_class, {**payload, key: label}).status == "previewed", label
    for wrong in ("unknown", "", 1, "APPROVED"):
        p = class_plan(write_class, {**payload, key: wrong})
        assert p.reason_code == "invalid_payload_value", wrong


def test_blocked_and_rejected_are_told_apart_in_the_blocker() -> None:
    blocked = ("no_projection", "no_source_event", "no_dry_run_support", "runtime_unavailable")
    for reason in blocked:
        assert blocker_text(reason).startswith("controlled writeback blocked: "), reason
    rejected = (
        "unknown_write_class",
        "unsafe_payload",
        "unknown_payload_key",
        "invalid_payload_value",
        "missing_payload_key",
        "invalid_identity",
        "source_event_mismatch",
    )
    for reason in rejected:
        assert blocker_text(reason).startswith("controlled writeback rejected: "), reason


def test_every_reason_is_either_blocked_or_rejected_never_both() -> None:
    from loopx_chat.session_runtime.writeback import BLOCKED_REASONS, REJECTED_REASONS

    # The reference's fail-closed list: these wait for the world, the rest for new input.
    assert set(BLOCKED_REASONS) == {
        "no_projection",
        "no_source_event",
        "no_dry_run_support",
        "runtime_unavailable",
    }
    assert not set(BLOCKED_REASONS) & set(REJECTED_REASONS)


@pytest.mark.parametrize("dots", [".", ".."])
def test_a_dot_path_is_never_an_id(dots: str) -> None:
    assert plan(session_id=dots).reason_code == "invalid_identity"
    assert plan(session_id=f"{dots}x").status == "previewed"  # a dot inside a name is fine


class _Str(str):
    def __str__(self) -> str:
        return "overridden"


class _Int(int):
    pass


def test_a_payload_keeps_plain_values_never_subclasses() -> None:
    p = plan(
        payload={**HANDOFF, "next_action": _Str("continue"), "evidence_pointer_count": _Int(3)}
    )
    copied = p.document["writeback"]["payload"]
    assert copied["next_action"] == "continue" and type(copied["next_action"]) is str
    assert copied["evidence_pointer_count"] == 3 and type(copied["evidence_pointer_count"]) is int


def test_payload_limits_at_their_boundaries() -> None:
    # A summary is at most 280 characters; a count fits a double exactly (|n| <= 2**53).
    assert plan(payload={**HANDOFF, "next_action": "a" * 280}).status == "previewed"
    too_long = plan(payload={**HANDOFF, "next_action": "a" * 281})
    assert too_long.reason_code == "unsafe_payload"
    assert plan(payload={**HANDOFF, "evidence_pointer_count": 2**53}).status == "previewed"
    too_big = plan(payload={**HANDOFF, "evidence_pointer_count": 2**53 + 1})
    assert too_big.reason_code == "unsafe_payload"
    assert plan(payload={**HANDOFF, "evidence_pointer_count": 0}).status == "previewed"
    assert plan(payload=None).reason_code == "missing_payload_key"  # no payload: nothing given


def test_a_blocker_names_at_most_eight_keys() -> None:
    eight = tuple(f"k{i}" for i in range(8))
    assert "k7" in blocker_text("unknown_payload_key", key_names=eight)
    assert " and " not in blocker_text("unknown_payload_key", key_names=eight)
    nine = (*eight, "k8")
    text = blocker_text("unknown_payload_key", key_names=nine)
    assert "k7 and 1 more" in text and "k8" not in text
    assert "(none)" in blocker_text("unknown_payload_key")


def test_every_plan_status_is_in_the_published_set() -> None:
    from loopx_chat.session_runtime.writeback import PLAN_STATUSES

    seen = {p.status for p in (plan(), plan(entry=None), plan(write_class="shell_exec"))}
    assert seen == {"previewed", "blocked", "rejected"} == set(PLAN_STATUSES)

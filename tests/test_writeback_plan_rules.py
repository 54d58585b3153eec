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

READY = EntryFacts(
    projection_present=True,
    source_event_recorded=True,
    runtime_supports_dry_run=True,
    runtime_available=True,
)
HANDOFF = {
    "handoff_id": "handoff-42",
    "next_action": "continue",
    "stop_condition": "the smoke prints ok",
    "evidence_pointer_count": 2,
}


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

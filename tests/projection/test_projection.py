"""The read-only projection: documented cases, derivation rules, caps, compaction, purity."""

from __future__ import annotations

import ast
import copy
import io
import json
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopx_chat.session_runtime as session_runtime
from loopx_chat.session_runtime import (
    UNCLASSIFIED_KEY_LIMIT,
    KeyState,
    build_session_runtime_readonly_projection,
    classify_session_runtime_key,
    compact_session_runtime_projection_from_run,
    compact_session_runtime_readonly_projection,
    session_runtime_projection_attention,
    session_runtime_status_waiting_on,
)
from loopx_chat.session_runtime import projection as projection_module
from loopx_chat.session_runtime.keys import RAW_MATERIAL_KEYS, SOURCE_ID_KEYS, TIMESTAMP_KEYS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = Path(session_runtime.__file__).parent
RAW_RECOMMENDATION = "provide compact summaries without raw material before projection"
GROUPS = ("sessions", "events", "outcomes", "gates", "artifacts", "decision_results")
# Generation of nested JSON is legitimately slow on a cold, busy machine; that is not a bug.
SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]


def build(**groups: Any) -> dict[str, Any]:
    return build_session_runtime_readonly_projection(goal_id="goal-1", **groups)


def screen(payload: dict[str, Any]) -> dict[str, Any]:
    return payload["first_screen"]


# ---- The reference test cases (§3.8) --------------------------------------------------


@pytest.mark.parametrize(
    ("key", "category"),
    [
        ("secret_id", "credential"),
        ("api_key_id", "credential"),
        ("transcript_id", "transcript"),
        ("raw_id", "raw_output"),
    ],
)
def test_pointer_shaped_raw_key_is_flagged_and_not_copied(key: str, category: str) -> None:
    marker = f"MARKER-{key}-7f3a"
    payload = build(sessions=[{"session_id": "s-1", "next_action": "advance", key: marker}])
    boundary = payload["boundary"]
    assert boundary["raw_material_detected"] is True
    assert boundary["raw_material_key_names"] == [key]
    assert boundary["raw_material_categories"] == [category]
    assert screen(payload)["agent_can_continue"] is False
    assert payload["work_lane_contract"]["must_attempt_work"] is False
    assert marker not in repr(payload)
    # Raw keys stop the agent but do not change who the goal waits on.
    assert screen(payload)["waiting_on"] == "agent"
    assert payload["work_lane_contract"]["lane"] == "advancement_task"
    assert screen(payload)["recommended_action"] == RAW_RECOMMENDATION


def test_raw_message_on_a_blocker_event_is_never_a_fallback() -> None:
    marker = "MARKER-message-91c0"
    payload = build(
        events=[{"event_id": "e-1", "kind": "blocker", "status": "blocked", "message": marker}]
    )
    assert payload["boundary"]["raw_material_key_names"] == ["message"]
    assert payload["boundary"]["raw_material_categories"] == ["transcript"]
    assert marker not in json.dumps(payload)
    assert screen(payload)["latest_blocker"] is None


def test_unclassified_keys_are_reported_but_never_block() -> None:
    payload = build(
        sessions=[{"session_id": "s-1", "next_action": "advance", "backlog": 3, "drawer": "x"}]
    )
    assert payload["boundary"]["raw_material_detected"] is False
    assert payload["boundary"]["unclassified_key_names"] == ["backlog", "drawer"]
    assert screen(payload)["agent_can_continue"] is True
    assert payload["work_lane_contract"]["must_attempt_work"] is True


def test_unclassified_names_are_capped_at_24_after_sorting() -> None:
    session = {f"opaque{n:03d}": n for n in reversed(range(40))}
    payload = build(sessions=[session])
    names = payload["boundary"]["unclassified_key_names"]
    assert UNCLASSIFIED_KEY_LIMIT == 24
    assert names == [f"opaque{n:03d}" for n in range(24)]


def test_compaction_caps_lists_at_8() -> None:
    session: dict[str, Any] = {"session_id": "s-1", "api_key": "k", "raw_transcript": "t"}
    session["backlog"] = 1
    session.update({f"opaque{n:02d}": n for n in range(12)})
    compact = compact_session_runtime_readonly_projection(build(sessions=[session]))
    assert compact is not None
    boundary = compact["boundary"]
    assert boundary["raw_material_key_names"] == ["api_key", "raw_transcript"]
    assert boundary["raw_material_categories"] == ["credential", "transcript"]
    assert boundary["unclassified_key_names"] == ["backlog"] + [f"opaque{n:02d}" for n in range(7)]


def test_all_three_compact_lists_are_capped_and_item_length_bounded() -> None:
    raw_keys = [f"secret_{n:02d}" for n in range(10)]
    long_name = "aaa_" + "q" * 300  # sorts first, so it survives the cap
    session = dict.fromkeys([*raw_keys, long_name, *[f"opaque{n}" for n in range(10)]], 1)
    payload = build(sessions=[session])
    assert len(payload["boundary"]["raw_material_key_names"]) == 10  # the builder keeps all
    compact = compact_session_runtime_readonly_projection(payload)
    assert compact is not None
    for name in ("raw_material_key_names", "raw_material_categories", "unclassified_key_names"):
        assert len(compact["boundary"][name]) <= 8
        assert all(len(item) <= 160 + 2 for item in compact["boundary"][name])
    assert compact["boundary"]["raw_material_key_names"] == raw_keys[:8]
    truncated = [n for n in compact["boundary"]["unclassified_key_names"] if n.endswith("...")]
    assert truncated == [long_name[:159] + "..."]


# ---- Derivation rules (§3.4) --------------------------------------------------------------


def gate(**fields: Any) -> dict[str, Any]:
    return {"gate_id": "g-1", "status": "pending", "actor": "operator", **fields}


@pytest.mark.parametrize(
    ("fields", "blocking"),
    [
        ({}, True),
        ({"advisory": True}, False),
        ({"advisory": "true"}, True),  # only exactly True makes a gate advisory
        ({"blocking": False}, False),
        ({"blocking": 0}, True),  # only exactly False unblocks
        ({"blocking": None}, True),
        ({"status": "resolved"}, False),
        ({"status": " PENDING "}, True),
        ({"actor": "agent"}, False),
        ({"actor": "agent", "requires_human_decision": True}, True),
        ({"actor": None, "action_required": 1}, True),
        ({"actor": None, "state": "waiting", "status": None, "channel": "Owner"}, True),
    ],
)
def test_blocking_gate_rule(fields: dict[str, Any], blocking: bool) -> None:
    payload = build(gates=[gate(question="Approve?", **fields)])
    assert screen(payload)["user_action_required"] is blocking
    assert payload["work_lane_contract"]["user_gate_blocks_delivery"] is blocking
    assert (payload["work_lane_contract"]["lane"] == "user_gate") is blocking


def test_waiting_on_is_the_gate_actor_or_operator() -> None:
    assert screen(build(gates=[gate(actor=" User ")]))["waiting_on"] == "user"
    assert screen(build(gates=[gate(actor="controller")]))["waiting_on"] == "controller"
    no_actor = gate(actor=None, requires_human_decision=True)
    assert screen(build(gates=[no_actor]))["waiting_on"] == "operator"


def test_first_blocking_gate_in_input_order_wins() -> None:
    gates = [
        gate(advisory=True, question="advisory question"),
        gate(gate_id="g-2", status="open", question="first blocking"),
        gate(gate_id="g-3", question="second blocking"),
    ]
    payload = build(gates=gates)
    assert screen(payload)["first_user_todo"] == "first blocking"
    assert screen(payload)["gate_state"] == "open"
    assert screen(payload)["recommended_action"] == "first blocking"
    assert payload["attention_item"]["priority"] == "P0"


def test_user_todo_key_order_and_message_is_never_read() -> None:
    assert screen(build(gates=[gate(title="T", summary="S")]))["first_user_todo"] == "T"
    both = build(gates=[gate(next_action="N", requested_decision="R")])
    assert screen(both)["first_user_todo"] == "R"
    only_message = build(gates=[gate(message="please approve MARKER-5e1")])
    assert screen(only_message)["first_user_todo"] is None
    assert screen(only_message)["recommended_action"] == RAW_RECOMMENDATION
    assert "MARKER-5e1" not in json.dumps(only_message)


def test_agent_todo_group_order_and_key_order() -> None:
    payload = build(
        outcomes=[{"next_action": "from outcome"}],
        events=[{"next_action": "from event"}],
        sessions=[{"summary": "from session summary"}],
        decision_results=[{"title": "no todo here"}, {"handoff": "from decision handoff"}],
        gates=[{"next_action": "never from gates"}],
        artifacts=[{"next_action": "never from artifacts"}],
    )
    assert screen(payload)["first_agent_todo"] == "from decision handoff"
    keyed = build(sessions=[{"summary": "s", "agent_next_action": "a"}])
    assert screen(keyed)["first_agent_todo"] == "a"
    only_gates = build(gates=[{"next_action": "x"}], artifacts=[{"summary": "y"}])
    assert screen(only_gates)["first_agent_todo"] is None
    assert screen(only_gates)["waiting_on"] == "none"


def test_blocking_gate_hides_the_agent_todo() -> None:
    payload = build(gates=[gate(question="Q?")], sessions=[{"next_action": "advance"}])
    assert screen(payload)["first_agent_todo"] is None
    assert screen(payload)["agent_can_continue"] is False
    assert screen(payload)["waiting_on"] == "operator"


def test_latest_validation_takes_the_newest_candidate() -> None:
    payload = build(
        outcomes=[
            {"validation_summary": "old", "created_at": "2026-01-01"},
            {"kind": "outcome", "status": "PASSED", "summary": "newest", "created_at": "2026-03"},
        ],
        events=[
            {"kind": "validation", "status": "failed", "summary": "not a validation"},
            {"result": "mid", "event_at": "2026-02"},
            {"kind": "note", "status": "ok", "summary": "wrong kind", "event_at": "2026-09"},
        ],
    )
    assert screen(payload)["latest_validation"] == "newest"


def test_latest_tie_keeps_the_first_candidate_outcomes_before_events() -> None:
    stamp = "2026-05-05T00:00:00Z"
    payload = build(
        events=[{"result": "event result", "event_at": stamp}],
        outcomes=[{"validated": True, "created_at": stamp}],
    )
    assert screen(payload)["latest_validation"] == "True"
    blockers = build(
        events=[{"blocker": "event blocker", "event_at": stamp}],
        outcomes=[{"status": "failed", "title": "outcome blocker", "created_at": stamp}],
        gates=[{"kind": "blocker", "summary": "gate blocker", "created_at": stamp}],
    )
    assert screen(blockers)["latest_blocker"] == "gate blocker"


def test_timestamp_key_order_and_string_comparison() -> None:
    payload = build(
        events=[
            {"blocker": "b1", "event_at": "9", "created_at": "1"},  # created_at is read first
            {"blocker": "b2", "timestamp": "5"},
        ]
    )
    assert screen(payload)["latest_blocker"] == "b2"
    assert payload["source"]["latest_fact_at"] == "5"


def test_blocker_lane_when_no_agent_todo() -> None:
    payload = build(events=[{"kind": "blocker", "blocker_summary": "quota exhausted"}])
    assert screen(payload)["latest_blocker"] == "quota exhausted"
    assert screen(payload)["waiting_on"] == "runtime"
    assert payload["work_lane_contract"]["lane"] == "blocker"
    assert payload["attention_item"]["priority"] == "P0"
    with_todo = build(
        events=[{"kind": "blocker", "blocker_summary": "quota exhausted"}],
        sessions=[{"next_action": "retry later"}],
    )
    assert screen(with_todo)["waiting_on"] == "agent"
    assert with_todo["attention_item"]["priority"] == "P1"


def test_monitor_lane_when_nothing_to_do() -> None:
    payload = build(sessions=[{"session_id": "s-1", "status": "running"}])
    assert screen(payload)["waiting_on"] == "none"
    assert screen(payload)["recommended_action"] == "monitor for a material transition"
    assert payload["work_lane_contract"] == {
        "lane": "monitor",
        "must_attempt_work": False,
        "user_gate_blocks_delivery": False,
        "monitor_only": True,
    }
    assert payload["attention_item"]["priority"] == "P1"
    assert screen(payload)["gate_state"] == "none"


def test_raw_keys_do_not_change_lane_or_priority() -> None:
    payload = build(gates=[gate(question="Q?")], artifacts=[{"file_path": "/x"}])
    assert payload["work_lane_contract"]["lane"] == "user_gate"
    assert payload["attention_item"]["priority"] == "P0"
    assert screen(payload)["first_user_todo"] == "Q?"
    assert payload["attention_item"]["title"] == RAW_RECOMMENDATION


def test_text_rules() -> None:
    long = "word " * 100
    payload = build(sessions=[{"next_action": "  spaced \n\t out  "}], decision_results=[{}])
    assert screen(payload)["first_agent_todo"] == "spaced out"
    truncated = screen(build(sessions=[{"next_action": long}]))["first_agent_todo"]
    assert truncated == long[:179].rstrip() + "..."
    assert screen(build(sessions=[{"next_action": 42}]))["first_agent_todo"] == "42"
    blank_then_text = build(sessions=[{"recommended_action": "   ", "summary": "fallback"}])
    assert screen(blank_then_text)["first_agent_todo"] == "fallback"
    container = build(sessions=[{"next_action": {"api_key": "MARKER-c1"}, "summary": ["x"]}])
    assert screen(container)["first_agent_todo"] is None
    assert "MARKER-c1" not in json.dumps(container)


def test_source_refs() -> None:
    payload = build(
        sessions=[{"session_id": "s-1", "run_id": "  r 1 ", "event_id": "", "type": "Chat"}],
        events=[{"kind": "k" * 70, "event_id": "e" * 130, "tool_call_id": None}],
        gates=[{}],
        decision_results=["not a mapping", {"ref_id": 7}],
    )
    refs = payload["source"]["source_refs"]
    assert list(refs) == list(GROUPS)
    assert refs["sessions"] == [{"kind": "Chat", "session_id": "s-1", "run_id": "r 1"}]
    assert refs["events"] == [{"kind": "k" * 59 + "...", "event_id": "e" * 119 + "..."}]
    assert refs["gates"] == [{"kind": "gate"}]
    assert refs["decision_results"] == [{"kind": "decision_result", "ref_id": "7"}]
    assert refs["outcomes"] == refs["artifacts"] == []
    evidence = payload["attention_item"]["evidence_refs"]
    assert evidence == refs
    evidence["sessions"][0]["kind"] = "edited"
    assert refs["sessions"][0]["kind"] == "Chat"


def test_latest_fact_at_comes_from_sessions_events_outcomes_only() -> None:
    payload = build(
        sessions=[{"created_at": "2026-01-01"}],
        outcomes=[{"updated_at": "2026-02-01"}],
        gates=[{"created_at": "2027-01-01"}],
        artifacts=[{"created_at": "2028-01-01"}],
    )
    assert payload["source"]["latest_fact_at"] == "2026-02-01"
    assert build()["source"]["latest_fact_at"] is None
    assert build(sessions=[{"created_at": "t" * 100}])["source"]["latest_fact_at"] == (
        "t" * 79 + "..."
    )


def test_output_shape_is_exactly_the_contract() -> None:
    payload = build_session_runtime_readonly_projection(goal_id=12)
    assert list(payload) == [
        "schema_version",
        "goal_id",
        "mode",
        "source",
        "boundary",
        "first_screen",
        "work_lane_contract",
        "attention_item",
        "reconcile_rule",
    ]
    assert payload["schema_version"] == "session_runtime_readonly_projection_v0"
    assert payload["goal_id"] == "12"
    assert payload["mode"] == "read_only"
    assert set(payload["source"]) == {"host_kind", "source_refs", "latest_fact_at"}
    assert payload["source"]["host_kind"] == "session_runtime"
    assert payload["boundary"] == {
        "raw_transcript_copied": False,
        "raw_logs_copied": False,
        "credentials_copied": False,
        "runtime_writeback_allowed": False,
        "runtime_mutation_allowed": False,
        "raw_material_detected": False,
        "raw_material_key_names": [],
        "raw_material_categories": [],
        "unclassified_key_names": [],
    }
    assert list(payload["first_screen"]) == [
        "waiting_on",
        "user_action_required",
        "agent_can_continue",
        "first_user_todo",
        "first_agent_todo",
        "latest_validation",
        "latest_blocker",
        "gate_state",
        "recommended_action",
    ]
    assert set(payload["attention_item"]) == {
        "kind",
        "priority",
        "title",
        "waiting_on",
        "evidence_refs",
    }
    assert payload["reconcile_rule"] == {
        "raw_fact_source": "host_session_log",
        "compact_projection_source": "loopx_run_projection",
        "conflict_policy": (
            "recompute projection from compact source refs; do not copy raw transcripts, raw "
            "logs, credentials, billing records, or sandbox internals into LoopX state"
        ),
    }


def test_every_key_the_builder_reads_is_compact() -> None:
    m = projection_module
    read = {
        *SOURCE_ID_KEYS,
        *TIMESTAMP_KEYS,
        *m.STATUS_KEYS,
        *m.ACTOR_KEYS,
        *m.KIND_KEYS,
        *m.HUMAN_DECISION_FLAGS,
        *m.USER_TODO_KEYS,
        *m.AGENT_TODO_KEYS,
        *m.VALIDATION_TEXT_KEYS,
        *m.BLOCKER_TEXT_KEYS,
        "advisory",
        "blocking",
    }
    assert {
        k for k in read if classify_session_runtime_key(k).state is not KeyState.COMPACT
    } == set()


# ---- Input robustness ------------------------------------------------------------------


def test_group_shapes() -> None:
    # A lone mapping is one item: dropping it would hide a blocking gate.
    assert screen(build(gates=gate(question="Q?")))["user_action_required"] is True
    for odd in (5, "sessions", b"x", 2.5, True):
        assert build(sessions=odd)["source"]["source_refs"]["sessions"] == []
    generated = build(sessions=({"session_id": f"s-{n}"} for n in range(3)))
    assert len(generated["source"]["source_refs"]["sessions"]) == 3
    mixed = build(events=[None, 1, "x", [{"event_id": "nested"}], {"event_id": "e-1"}])
    assert mixed["source"]["source_refs"]["events"] == [{"kind": "event", "event_id": "e-1"}]


def test_non_string_keys_are_reported_by_json_spelling() -> None:
    payload = build(sessions=[{7: "a", None: "b", 2.5: "c", ("t",): "d", "session_id": "s"}])
    assert payload["boundary"]["unclassified_key_names"] == ["2.5", "7", "<tuple>", "null"]
    assert payload["boundary"]["raw_material_detected"] is False


def test_deep_nesting_is_never_walked() -> None:
    deep: Any = "MARKER-deep-42"
    for _ in range(50_000):
        deep = [deep]
    deep_dict: Any = {"api_key": "MARKER-deep-42"}
    for _ in range(50_000):
        deep_dict = {"summary": deep_dict}
    payload = build(
        sessions=[{"summary": deep, "next_action": deep_dict, "session_id": deep}, deep],
        events=deep,
        gates=deep_dict,
    )
    assert "MARKER-deep-42" not in json.dumps(payload)
    assert screen(payload)["first_agent_todo"] is None
    assert payload["source"]["source_refs"]["sessions"] == [{"kind": "session"}]


def test_huge_integers_and_odd_scalars_do_not_raise() -> None:
    huge = 10**5000
    payload = build(sessions=[{"next_action": huge, "session_id": float("nan")}])
    assert screen(payload)["first_agent_todo"] is None
    assert payload["source"]["source_refs"]["sessions"] == [
        {"kind": "session", "session_id": "nan"}
    ]
    assert build_session_runtime_readonly_projection(goal_id=[1, 2])["goal_id"] == ""


def test_input_is_not_mutated() -> None:
    sessions = [{"session_id": "s-1", "summary": "x", "api_key": "k"}]
    snapshot = copy.deepcopy(sessions)
    build(sessions=sessions)
    assert sessions == snapshot


# ---- Compaction and status (§3.7) ------------------------------------------------------


def advancement_payload() -> dict[str, Any]:
    return build(
        sessions=[{"session_id": "s-1", "next_action": "continue", "created_at": "2026-01-01"}],
        decision_results=[{"recommended_action": "wire adapter into status projection"}],
    )


def test_compact_shape_drops_refs_and_keeps_counts() -> None:
    compact = compact_session_runtime_readonly_projection(advancement_payload())
    assert compact is not None
    assert list(compact) == [
        "schema_version",
        "mode",
        "goal_id",
        "source",
        "boundary",
        "first_screen",
        "work_lane_contract",
        "attention_item",
    ]
    assert compact["source"] == {
        "host_kind": "session_runtime",
        "latest_fact_at": "2026-01-01",
        "source_ref_counts": {"sessions": 1, "decision_results": 1},
    }
    assert "evidence_refs" not in compact["attention_item"]
    assert "source_refs" not in json.dumps(compact)
    assert compact["first_screen"]["waiting_on"] == "agent"
    assert compact["first_screen"]["agent_can_continue"] is True
    assert "first_user_todo" not in compact["first_screen"]  # None is omitted
    assert compact["work_lane_contract"]["lane"] == "advancement_task"


@pytest.mark.parametrize(
    "value",
    [None, [], "x", {}, {"schema_version": "session_runtime_readonly_projection_v1"}],
)
def test_compact_rejects_anything_but_a_v0_projection(value: object) -> None:
    assert compact_session_runtime_readonly_projection(value) is None


def test_compact_withholds_paths_and_secrets() -> None:
    payload = build(
        sessions=[{"next_action": "edit /Users/alice/project/secret.txt"}],
        outcomes=[{"validation_summary": "token is sk-abcdefghijklmnopqrstuvwx"}],
        events=[{"blocker": "see ~/.codex/auth.json", "event_at": "1"}],
    )
    compact = compact_session_runtime_readonly_projection(payload)
    assert compact is not None
    dumped = json.dumps(compact)
    for leak in ("/Users/alice", "sk-abcdefghijklmnop", "~/.codex"):
        assert leak in json.dumps(payload)  # the builder keeps compact-key text
        assert leak not in dumped
    assert "first_agent_todo" not in compact["first_screen"]


def test_compact_copies_only_real_booleans() -> None:
    payload = advancement_payload()
    payload["boundary"]["runtime_writeback_allowed"] = "yes"
    compact = compact_session_runtime_readonly_projection(payload)
    assert compact is not None
    assert "runtime_writeback_allowed" not in compact["boundary"]
    assert compact["boundary"]["credentials_copied"] is False


def test_compact_is_stable_when_compacted_again() -> None:
    compact = compact_session_runtime_readonly_projection(advancement_payload())
    again = compact_session_runtime_projection_from_run({"session_runtime_projection": compact})
    assert again == compact


def test_custom_public_safe_hooks_are_used() -> None:
    compact = compact_session_runtime_readonly_projection(
        advancement_payload(),
        public_safe_compact_text=lambda value, limit: None,
        public_safe_compact_list=lambda values, *, item_limit, max_items: ["hooked"],
    )
    assert compact is not None
    assert "goal_id" not in compact and "first_screen" in compact
    assert set(compact["first_screen"]) == {"user_action_required", "agent_can_continue"}
    assert compact["boundary"]["unclassified_key_names"] == ["hooked"]


@pytest.mark.parametrize(
    ("value", "kwargs", "expected"),
    [
        ("agent", {}, "codex"),
        ("codex", {}, "codex"),
        *[
            (v, {}, "user_or_controller")
            for v in ("controller", "human", "operator", "owner", "user", "user_or_controller")
        ],
        ("runtime", {}, "external_evidence"),
        ("external_evidence", {}, "external_evidence"),
        ("none", {}, "monitor_signal"),
        ("monitor", {}, "monitor_signal"),
        ("monitor_signal", {}, "monitor_signal"),
        ("none", {"monitor_signal_waiting_on": "watch"}, "watch"),
        ("something", {"monitor_only": True}, "monitor_signal"),
        ("operator", {"monitor_only": True}, "user_or_controller"),
        (" Agent ", {}, "codex"),
        ("something", {}, "codex"),
        (None, {}, "codex"),
    ],
)
def test_status_waiting_on(value: object, kwargs: dict[str, Any], expected: str) -> None:
    assert session_runtime_status_waiting_on(value, **kwargs) == expected


def test_attention_item_for_an_agent_todo() -> None:
    item = session_runtime_projection_attention(
        {"session_runtime_readonly_projection": advancement_payload()}
    )
    assert item is not None
    assert item["source"] == "session_runtime_projection"
    assert item["status"] == "session_runtime_advancement_task"
    assert item["severity"] == "action"
    assert item["waiting_on"] == "codex"
    assert item["recommended_action"] == "wire adapter into status projection"
    projection = item["session_runtime_projection"]
    assert projection["source"]["source_ref_counts"]["sessions"] == 1
    assert item["project_asset"]["session_runtime_projection"] == projection
    assert item["project_asset"]["session_runtime_projection"] is not projection


def test_attention_severity() -> None:
    def severity(payload: dict[str, Any]) -> str:
        item = session_runtime_projection_attention(payload)  # the run is the projection
        assert item is not None
        return str(item["severity"])

    assert severity(build(events=[{"blocker": "b"}])) == "watch"
    assert severity(build()) == "watch"
    assert severity(build(gates=[gate()])) == "action"
    assert severity(build(sessions=[{"next_action": "x", "stdout": "y"}])) == "high"


def test_attention_lookup_and_fallbacks() -> None:
    assert session_runtime_projection_attention({"status": "done"}) is None
    assert session_runtime_projection_attention("not a run") is None
    payload = advancement_payload()
    del payload["first_screen"]
    del payload["attention_item"]
    del payload["work_lane_contract"]
    item = session_runtime_projection_attention(
        {"session_runtime_projection": payload, "recommended_action": "from the run"}
    )
    assert item is not None
    assert item["recommended_action"] == "from the run"
    assert item["status"] == "session_runtime_projection"
    bare = session_runtime_projection_attention({"session_runtime_projection": payload})
    assert bare is not None
    assert bare["recommended_action"] == (
        "inspect the session-runtime projection and choose the next safe action"
    )
    preferred = session_runtime_projection_attention(
        {
            "session_runtime_readonly_projection": build(gates=[gate(question="Q?")]),
            "session_runtime_projection": advancement_payload(),
        }
    )
    assert preferred is not None and preferred["status"] == "session_runtime_user_gate"


# ---- Properties ------------------------------------------------------------------------

INTERESTING_KEYS = sorted(
    {
        *projection_module.STATUS_KEYS,
        *projection_module.ACTOR_KEYS,
        *projection_module.KIND_KEYS,
        *projection_module.USER_TODO_KEYS,
        *projection_module.AGENT_TODO_KEYS,
        *projection_module.VALIDATION_TEXT_KEYS,
        *projection_module.BLOCKER_TEXT_KEYS,
        *SOURCE_ID_KEYS,
        *TIMESTAMP_KEYS,
        "advisory",
        "blocking",
        "requires_human_decision",
        "message",
        "backlog",
        "stdout_tail",
    }
)
INTERESTING_VALUES = sorted(
    projection_module.OPEN_GATE_STATUSES
    | projection_module.HUMAN_GATE_ACTORS
    | projection_module.BLOCKED_STATUSES
    | projection_module.VALIDATED_STATUSES
    | {"validation", "outcome", "blocker", "agent", ""}
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(INTERESTING_VALUES),
)
string_keys = st.one_of(st.text(max_size=10), st.sampled_from(INTERESTING_KEYS))
any_keys = st.one_of(string_keys, st.integers(), st.none(), st.booleans(), st.floats())
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(any_keys, children, max_size=5)
    ),
    max_leaves=25,
)
items = st.dictionaries(any_keys, json_like, max_size=8)
group = st.one_of(st.none(), st.lists(st.one_of(items, json_like), max_size=5), json_like, items)
all_groups = st.fixed_dictionaries({name: group for name in GROUPS})

RAW_KEY_SAMPLES = sorted(
    {
        *RAW_MATERIAL_KEYS,
        "raw_transcript",
        "credential_hint",
        "secret_id",
        "stack_trace",
        "file_path",
        "stdout_tail",
        "tokens_password",
        "accessToken",
        "apiKey",
        "StackTrace",
        "Tool.Result.Ref",
        "API-KEY",
    }
)


@settings(max_examples=200, suppress_health_check=SLOW_OK)
@given(goal_id=json_like, groups=all_groups)
def test_builder_never_raises_and_output_is_json_and_deterministic(
    goal_id: object, groups: dict[str, Any]
) -> None:
    snapshot = repr(groups)
    first = build_session_runtime_readonly_projection(goal_id=goal_id, **groups)
    second = build_session_runtime_readonly_projection(goal_id=goal_id, **groups)
    dumped = json.dumps(first, allow_nan=False, sort_keys=True)
    assert dumped == json.dumps(second, allow_nan=False, sort_keys=True)
    assert json.loads(dumped) == first
    assert repr(groups) == snapshot  # the input is never mutated
    compact = compact_session_runtime_readonly_projection(first)
    assert compact is not None
    json.dumps(compact, allow_nan=False)
    assert session_runtime_projection_attention(first) is not None


@settings(max_examples=200, suppress_health_check=SLOW_OK)
@given(groups=all_groups)
def test_first_screen_invariants(groups: dict[str, Any]) -> None:
    payload = build(**groups)
    first, lane, boundary = (
        payload["first_screen"],
        payload["work_lane_contract"],
        payload["boundary"],
    )
    assert first["waiting_on"] in {
        "controller",
        "human",
        "operator",
        "owner",
        "user",
        "runtime",
        "agent",
        "none",
    }
    assert lane["lane"] in {"user_gate", "advancement_task", "blocker", "monitor"}
    assert lane["must_attempt_work"] == first["agent_can_continue"]
    assert lane["monitor_only"] == (lane["lane"] == "monitor")
    assert lane["user_gate_blocks_delivery"] == first["user_action_required"]
    assert payload["attention_item"]["priority"] == (
        "P0" if lane["lane"] in {"user_gate", "blocker"} else "P1"
    )
    if first["agent_can_continue"]:
        assert not boundary["raw_material_detected"] and not first["user_action_required"]
        assert first["first_agent_todo"] is not None
    assert boundary["raw_material_detected"] == bool(boundary["raw_material_key_names"])
    for name in ("raw_material_key_names", "raw_material_categories", "unclassified_key_names"):
        assert boundary[name] == sorted(set(boundary[name]))
    assert len(boundary["unclassified_key_names"]) <= UNCLASSIFIED_KEY_LIMIT
    assert set(boundary["raw_material_categories"]) <= {
        "credential",
        "transcript",
        "log",
        "local_path",
        "raw_output",
    }


def naive_scalar(value: object) -> str | None:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str | int | float):
        return str(value)
    return None


def naive_text(value: object, limit: int = 180) -> str | None:
    raw = naive_scalar(value)
    collapsed = " ".join(raw.split()) if raw is not None else ""
    if not collapsed:
        return None
    return collapsed if len(collapsed) <= limit else collapsed[: limit - 1].rstrip() + "..."


def naive_first(item: dict[Any, Any], keys: tuple[str, ...]) -> str | None:
    found = [t for t in (naive_text(item.get(k)) for k in keys) if t is not None]
    return found[0] if found else None


def naive_word(item: dict[Any, Any], keys: tuple[str, ...]) -> str:
    found = [(naive_scalar(item.get(k)) or "").strip().lower() for k in keys]
    return next((w for w in found if w), "")


def naive_stamp(item: dict[Any, Any]) -> str:
    # Only a string is a timestamp (a False or a number never wins as the latest).
    stamps = (item.get(k) for k in TIMESTAMP_KEYS)
    return next((str.__str__(s) for s in stamps if isinstance(s, str) and s), "")


def naive_signal(item: dict[Any, Any], keys: tuple[str, ...]) -> bool:
    """A signal key holds text, or True; `false` says the opposite of the signal."""
    return any(
        item.get(k) is True or (item.get(k) is not False and naive_text(item.get(k)) is not None)
        for k in keys
    )


def naive_latest(candidates: list[dict[Any, Any]]) -> dict[Any, Any] | None:
    return max(candidates, key=naive_stamp, default=None)


def naive_first_screen(groups: dict[str, Any]) -> dict[str, Any]:
    """The §3.4 rules read as literally as possible: one slow pass per rule."""
    m = projection_module
    g = {
        name: [groups[name]]
        if isinstance(groups[name], dict)
        else [i for i in groups[name] if isinstance(i, dict)]
        if isinstance(groups[name], list)
        else []
        for name in GROUPS
    }

    def human_gate(x: dict[Any, Any]) -> bool:
        return naive_word(x, m.STATUS_KEYS) in m.OPEN_GATE_STATUSES and (
            naive_word(x, m.ACTOR_KEYS) in m.HUMAN_GATE_ACTORS
            or bool(x.get("requires_human_decision"))
            or bool(x.get("action_required"))
        )

    def malformed(x: dict[Any, Any]) -> bool:
        """A rule field of a type the rules do not read: fails closed as a blocking gate."""
        strings = (*m.STATUS_KEYS, *m.ACTOR_KEYS, *m.USER_TODO_KEYS)
        flags = (*m.HUMAN_DECISION_FLAGS, "advisory", "blocking")
        return any(x.get(k) is not None and not isinstance(x.get(k), str) for k in strings) or any(
            x.get(k) is not None and not isinstance(x.get(k), bool) for k in flags
        )

    gates = [
        x
        for x in g["gates"]
        if malformed(x)
        or (
            human_gate(x) and x.get("advisory") is not True and x.get("blocking", True) is not False
        )
    ]
    gate_item = gates[0] if gates else None
    if gate_item is not None and malformed(gate_item):
        opened = [naive_word({k: gate_item.get(k)}, (k,)) for k in m.STATUS_KEYS]
        state = next((w for w in opened if w in m.OPEN_GATE_STATUSES), "blocked")
        todo = naive_first(gate_item, m.USER_TODO_KEYS) or m.MALFORMED_GATE_TODO
    elif gate_item is not None:
        state = naive_word(gate_item, m.STATUS_KEYS)
        todo = naive_first(gate_item, m.USER_TODO_KEYS)
    todos = [naive_first(x, m.AGENT_TODO_KEYS) for n in m.AGENT_TODO_GROUPS for x in g[n]]
    agent_todo = next((t for t in todos if t is not None), None)

    def validation(x: dict[Any, Any]) -> bool:
        kind, status = naive_word(x, m.KIND_KEYS), naive_word(x, m.STATUS_KEYS)
        return (kind in {"validation", "outcome"} and status in m.VALIDATED_STATUSES) or (
            naive_signal(x, m.VALIDATION_SIGNAL_KEYS)
        )

    def blocker(x: dict[Any, Any]) -> bool:
        kind, status = naive_word(x, m.KIND_KEYS), naive_word(x, m.STATUS_KEYS)
        return (
            kind == "blocker"
            or status in m.BLOCKED_STATUSES
            or naive_signal(x, m.BLOCKER_SIGNAL_KEYS)
        )

    val = naive_latest([x for x in g["outcomes"] + g["events"] if validation(x)])
    blk = naive_latest([x for x in g["gates"] + g["outcomes"] + g["events"] if blocker(x)])
    latest = naive_latest(g["sessions"] + g["events"] + g["outcomes"])
    latest_at = None if latest is None else naive_stamp(latest)
    return {
        "first_user_todo": None if gate_item is None else todo,
        "first_agent_todo": agent_todo if gate_item is None else None,
        "latest_validation": None if val is None else naive_first(val, m.VALIDATION_TEXT_KEYS),
        "latest_blocker": None if blk is None else naive_first(blk, m.BLOCKER_TEXT_KEYS),
        "gate_state": "none" if gate_item is None else state,
        "latest_fact_at": None if latest_at is None else naive_text(latest_at, 80),
    }


dated_items = st.dictionaries(
    st.sampled_from(INTERESTING_KEYS),
    st.one_of(scalars, st.sampled_from(["2026-01", "2026-02", "2026-03", " "])),
    max_size=6,
)


@settings(max_examples=300, suppress_health_check=SLOW_OK)
@given(groups=st.fixed_dictionaries({name: st.lists(dated_items, max_size=4) for name in GROUPS}))
def test_single_pass_scan_agrees_with_a_naive_reading_of_the_rules(
    groups: dict[str, Any],
) -> None:
    payload = build(**groups)
    expected = naive_first_screen(groups)
    latest_fact_at = expected.pop("latest_fact_at")
    assert payload["source"]["latest_fact_at"] == latest_fact_at
    assert {k: payload["first_screen"][k] for k in expected} == expected


@st.composite
def with_canaries(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    groups = draw(all_groups)
    canaries: list[str] = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        canary = f"CANARY-{draw(st.uuids())}"
        canaries.append(canary)
        key = draw(st.sampled_from(RAW_KEY_SAMPLES))
        wrap = draw(st.sampled_from(["plain", "list", "dict", "nested_raw_under_compact"]))
        item = draw(items)
        if wrap == "plain":
            item[key] = canary
        elif wrap == "list":
            item[key] = [canary, {"summary": canary}]
        elif wrap == "dict":
            item[key] = {"summary": canary, "session_id": canary}
        else:  # a raw key nested inside the value of a compact key
            item[draw(st.sampled_from(INTERESTING_KEYS))] = {key: canary}
        name = draw(st.sampled_from(GROUPS))
        current = groups[name]
        groups[name] = [*current, item] if isinstance(current, list) else [item]
    return groups, canaries


@settings(max_examples=200, suppress_health_check=SLOW_OK)
@given(case=with_canaries())
def test_values_under_raw_keys_never_reach_the_output(
    case: tuple[dict[str, Any], list[str]],
) -> None:
    groups, canaries = case
    payload = build(**groups)
    outputs = [
        json.dumps(payload),
        repr(payload),
        json.dumps(compact_session_runtime_readonly_projection(payload)),
        json.dumps(session_runtime_projection_attention(payload)),
    ]
    for canary in canaries:
        for output in outputs:
            assert canary not in output


@given(key=st.sampled_from(RAW_KEY_SAMPLES), name=st.sampled_from(GROUPS))
def test_a_top_level_raw_key_is_always_flagged(key: str, name: str) -> None:
    payload = build(**{name: [{key: "v", "next_action": "go"}]})
    assert key in payload["boundary"]["raw_material_key_names"]
    assert payload["first_screen"]["agent_can_continue"] is False


# ---- Purity: no I/O in the package -----------------------------------------------------

FORBIDDEN_MODULES = (
    "subprocess",
    "socket",
    "http",
    "urllib.request",
    "shutil",
    "tempfile",
    "asyncio",
    "ssl",
    "select",
    "selectors",
    "multiprocessing",
    "threading",
    "pathlib",
)
ALLOWED_IMPORTS = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "enum",
    "functools",
    "re",
    "types",
    "typing",
}
# Whitespace-tolerant: the scan runs on tokens joined by spaces (see code_only).
FORBIDDEN_SOURCE = (
    r"\bopen\s*\(",
    r"\bsubprocess\b",
    r"\bsocket\b",
    r"\bos\s*\.",
    r"\bos\s*\.\s*environ\b",
    r"\btime\s*\.",
    r"\bdatetime\s*\.\s*now\b",
    r"\bsys\s*\.",
    r"\bprint\s*\(",
    r"\bgetenv\b",
)


def package_modules() -> Iterator[Path]:
    return iter(sorted(PACKAGE_DIR.glob("*.py")))


def test_importing_the_package_loads_no_io_modules() -> None:
    probe = (
        "import json, sys\n"
        "import loopx_chat\n"
        "before = set(sys.modules)\n"
        "import loopx_chat.session_runtime as core\n"
        "for name in core.__all__: getattr(core, name)\n"  # every export loads its module
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(result.stdout)
    assert "loopx_chat.session_runtime.projection" in loaded  # the probe did import it
    leaked = [
        name
        for name in loaded
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_MODULES)
    ]
    assert leaked == []
    others = [n for n in loaded if n.startswith("loopx_chat.") and ".session_runtime" not in n]
    assert others == []


@pytest.mark.parametrize("path", list(package_modules()), ids=lambda p: p.name)
def test_package_sources_import_only_pure_modules(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "use absolute imports"
            imported.add(node.module or "")
    own = {name for name in imported if name.startswith("loopx_chat.session_runtime")}
    assert imported - own <= ALLOWED_IMPORTS


def code_only(source: str) -> str:
    """The source without comments and string literals, so prose cannot trip the scan."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    skipped = (tokenize.COMMENT, tokenize.STRING)
    return " ".join(t.string for t in tokens if t.type not in skipped)


def test_code_only_keeps_calls_and_drops_prose() -> None:
    code = code_only('x = open("f")  # time.sleep\n"""os.environ"""\n')
    assert re.search(FORBIDDEN_SOURCE[0], code)
    assert not re.search(FORBIDDEN_SOURCE[5], code) and not re.search(FORBIDDEN_SOURCE[4], code)


@pytest.mark.parametrize("path", list(package_modules()), ids=lambda p: p.name)
def test_package_sources_call_no_io(path: Path) -> None:
    code = code_only(path.read_text(encoding="utf-8"))
    found = [pattern for pattern in FORBIDDEN_SOURCE if re.search(pattern, code)]
    assert found == []


def test_package_modules_are_all_checked() -> None:
    names = {p.name for p in package_modules()}
    assert {"__init__.py", "keys.py", "projection.py", "compact.py"} <= names


def test_importing_one_rule_module_loads_only_that_rule() -> None:
    """The package loads its modules on first use: `_text` alone must not pull the rest."""
    probe = (
        "import json, sys\n"
        "from loopx_chat.session_runtime import unsafe_text_class\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.startswith('loopx_chat.'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(result.stdout)
    assert "loopx_chat.session_runtime._text" in loaded
    assert "loopx_chat.session_runtime.projection" not in loaded
    assert "loopx_chat.session_runtime.keys" not in loaded


def test_every_export_resolves_and_an_unknown_name_is_an_attribute_error() -> None:
    import loopx_chat.session_runtime as core

    for name in core.__all__:
        assert getattr(core, name) is not None
    with pytest.raises(AttributeError, match="no_such_rule"):
        core.no_such_rule  # noqa: B018

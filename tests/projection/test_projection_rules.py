"""The read-only projection's rules, one test per rule: the output shape and its constants,
each first-screen field and each attention item's trigger at its boundary, the orders
(groups, keys, "latest" and its ties), every text limit at its edge, the fallbacks, what is
never read or copied (values under raw keys, containers, ``message``), and empty, missing
and odd inputs.

The expected values are written here from the reference (``loopx-behaviour.md`` §3.2-3.4,
§3.6, §3.8) and the spec's first-screen questions, never read from the module's tables: a
table entry dropped from the module must make one of these tests fail. Where the reference
is silent, the module's docstring states the choice and the test pins that choice."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest

from loopx_chat.session_runtime import build_session_runtime_readonly_projection
from loopx_chat.session_runtime.projection import OPEN_GATE_STATUSES
from tests.helpers.spec_keys import SPEC_ID_KEYS as ID_KEYS

GROUPS = ("sessions", "events", "outcomes", "gates", "artifacts", "decision_results")
DEFAULT_KINDS = {
    "sessions": "session",
    "events": "event",
    "outcomes": "outcome",
    "gates": "gate",
    "artifacts": "artifact",
    "decision_results": "decision_result",
}
OPEN_STATUSES = (
    "blocked",
    "needs_decision",
    "open",
    "pending",
    "requested",
    "requires_decision",
    "waiting",
)
HUMAN_ACTORS = ("controller", "human", "operator", "owner", "user")
BLOCKED = ("blocked", "error", "failed", "timed_out")
VALIDATED = ("ok", "passed", "success", "validated")
RAW_ACTION = "provide compact summaries without raw material before projection"
MONITOR_ACTION = "monitor for a material transition"
CONFLICT_POLICY = (
    "recompute projection from compact source refs; do not copy raw transcripts, raw logs, "
    "credentials, billing records, or sandbox internals into LoopX state"
)
# A text of exactly the limit is kept; one more character is cut to limit-1 plus "...".
A180, A181, CUT180 = "a" * 180, "a" * 181, "a" * 179 + "..."


def build(goal_id: object = "goal-1", **groups: Any) -> dict[str, Any]:
    return build_session_runtime_readonly_projection(goal_id=goal_id, **groups)


def screen(**groups: Any) -> dict[str, Any]:
    result: dict[str, Any] = build(**groups)["first_screen"]
    return result


def gate(**fields: Any) -> dict[str, Any]:
    return {"gate_id": "g1", "status": "pending", "actor": "operator", **fields}


# ---- output shape and constants --------------------------------------------------------------


def test_every_section_has_exactly_the_contract_keys_and_constants() -> None:
    payload = build()
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
    assert payload["goal_id"] == "goal-1"
    assert payload["mode"] == "read_only"
    assert payload["source"] == {
        "host_kind": "session_runtime",
        "source_refs": {name: [] for name in GROUPS},
        "latest_fact_at": None,
    }
    assert list(payload["source"]["source_refs"]) == list(GROUPS)
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
    assert payload["first_screen"] == {
        "waiting_on": "none",
        "user_action_required": False,
        "agent_can_continue": False,
        "first_user_todo": None,
        "first_agent_todo": None,
        "latest_validation": None,
        "latest_blocker": None,
        "gate_state": "none",
        "recommended_action": MONITOR_ACTION,
    }
    assert payload["work_lane_contract"] == {
        "lane": "monitor",
        "must_attempt_work": False,
        "user_gate_blocks_delivery": False,
        "monitor_only": True,
    }
    assert payload["attention_item"] == {
        "kind": "monitor",
        "priority": "P1",
        "title": MONITOR_ACTION,
        "waiting_on": "none",
        "evidence_refs": {name: [] for name in GROUPS},
    }
    assert payload["reconcile_rule"] == {
        "raw_fact_source": "host_session_log",
        "compact_projection_source": "loopx_run_projection",
        "conflict_policy": CONFLICT_POLICY,
    }


def test_the_copy_and_writeback_flags_stay_false_even_with_raw_input() -> None:
    boundary = build(sessions=[{"raw_transcript": "x", "api_key": "y", "log_path": "z"}])[
        "boundary"
    ]
    for flag in (
        "raw_transcript_copied",
        "raw_logs_copied",
        "credentials_copied",
        "runtime_writeback_allowed",
        "runtime_mutation_allowed",
    ):
        assert boundary[flag] is False
    assert boundary["raw_material_detected"] is True


@pytest.mark.parametrize(
    ("goal_id", "expected"),
    [
        ("goal-7", "goal-7"),
        (7, "7"),
        (1.5, "1.5"),
        (True, "True"),
        (None, "None"),
        ({"path": "/Users/someone"}, ""),
        (["goal"], ""),
    ],
)
def test_goal_id_is_its_text_and_a_container_is_never_stringified(
    goal_id: object, expected: str
) -> None:
    assert build(goal_id)["goal_id"] == expected


# ---- reading the groups ----------------------------------------------------------------------


@pytest.mark.parametrize("group", [None, [], (), "session", b"session", bytearray(b"x"), 5, 2.5])
def test_missing_empty_or_non_list_groups_read_as_no_items(group: object) -> None:
    payload = build(**{name: group for name in GROUPS})
    assert payload["source"]["source_refs"] == {name: [] for name in GROUPS}
    assert payload["boundary"]["unclassified_key_names"] == []


class _ChattyStr(str):
    """A string whose iteration yields mappings: a string group must still read as empty."""

    def __iter__(self) -> Iterator[Any]:
        yield {"session_id": "s1", "next_action": "go", "api_key": "CANARY"}


class _ChattyBytes(bytes):
    def __iter__(self) -> Iterator[Any]:
        yield {"session_id": "s1", "next_action": "go", "api_key": "CANARY"}


@pytest.mark.parametrize("group", [_ChattyStr("x"), _ChattyBytes(b"x")])
def test_a_string_group_is_never_iterated(group: object) -> None:
    payload = build(sessions=group)
    assert payload["source"]["source_refs"]["sessions"] == []
    assert payload["boundary"]["raw_material_detected"] is False
    assert payload["first_screen"]["first_agent_todo"] is None


@pytest.mark.parametrize("name", GROUPS)
def test_a_single_mapping_reads_as_a_one_item_list(name: str) -> None:
    refs = build(**{name: {"kind": "x", "run_id": "r1"}})["source"]["source_refs"]
    assert refs[name] == [{"kind": "x", "run_id": "r1"}]


def test_non_mapping_items_are_dropped_and_any_mapping_is_read() -> None:
    items = [
        1,
        "text",
        None,
        ["run_id", "r0"],
        {"run_id": "r1"},
        MappingProxyType({"run_id": "r2"}),
    ]
    refs = build(sessions=items, events=iter([{"run_id": "r3"}, 7]))["source"]["source_refs"]
    assert refs["sessions"] == [
        {"kind": "session", "run_id": "r1"},
        {"kind": "session", "run_id": "r2"},
    ]
    assert refs["events"] == [{"kind": "event", "run_id": "r3"}]


def test_a_read_only_mapping_can_be_a_blocking_gate() -> None:
    assert screen(gates=[MappingProxyType(gate())])["waiting_on"] == "operator"


# ---- source refs -----------------------------------------------------------------------------


def test_each_group_has_its_own_default_ref_kind_in_input_order() -> None:
    payload = build(**{name: [{"run_id": f"{name}-1"}, {"run_id": f"{name}-2"}] for name in GROUPS})
    for name in GROUPS:
        assert payload["source"]["source_refs"][name] == [
            {"kind": DEFAULT_KINDS[name], "run_id": f"{name}-1"},
            {"kind": DEFAULT_KINDS[name], "run_id": f"{name}-2"},
        ]


@pytest.mark.parametrize(
    ("item", "kind"),
    [
        ({"kind": "Tool_Call"}, "Tool_Call"),  # kept as written: a ref kind is not lowercased
        ({"type": "approval"}, "approval"),
        ({"kind": "first", "type": "second"}, "first"),
        ({"kind": " tool \t call ", "type": "second"}, "tool call"),  # collapsed, still first
        ({"kind": "x" * 61, "type": "second"}, "x" * 59 + "..."),  # capped, still first
        ({"kind": "  ", "type": "second"}, "second"),
        ({"kind": "", "type": "second"}, "second"),
        ({"kind": {"nested": "x"}, "type": "second"}, "second"),
        ({"kind": None, "type": None}, "session"),
        ({"kind": 3}, "3"),
        ({"kind": " a \n b "}, "a b"),
        ({"kind": "k" * 60}, "k" * 60),
        ({"kind": "k" * 61}, "k" * 59 + "..."),
    ],
)
def test_ref_kind_is_kind_then_type_then_the_default_capped_at_60(
    item: dict[str, Any], kind: str
) -> None:
    assert build(sessions=[item])["source"]["source_refs"]["sessions"] == [{"kind": kind}]


def test_ref_keeps_every_documented_id_key_and_nothing_else() -> None:
    item = {key: f"v-{key}" for key in ID_KEYS}
    item.update(thread_id="t", summary="s", created_at="2026", status="ok", id="plain")
    (ref,) = build(events=[item])["source"]["source_refs"]["events"]
    assert ref == {"kind": "event", **{key: f"v-{key}" for key in ID_KEYS}}


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("r" * 120, "r" * 120),
        ("r" * 121, "r" * 119 + "..."),
        ("a  b", "a b"),
        (" a b ", "a b"),
        ("a\tb", "a b"),
        ("a\x00b", "a\x00b"),
        (7, "7"),
        (0, "0"),
        (False, "False"),
        (2.5, "2.5"),
        ("", None),
        ("   ", None),
        (None, None),
        ({"id": "x"}, None),
        (["x"], None),
    ],
)
def test_ref_id_is_its_collapsed_text_capped_at_120(value: object, kept: str | None) -> None:
    (ref,) = build(artifacts=[{"artifact_id": value}])["source"]["source_refs"]["artifacts"]
    assert ref == (
        {"kind": "artifact"} if kept is None else {"kind": "artifact", "artifact_id": kept}
    )
    assert all(type(v) is str for v in ref.values())


def test_a_str_subclass_id_is_copied_as_a_plain_str() -> None:
    class Shouty(str):
        def __str__(self) -> str:
            return "LOUD"

    (ref,) = build(sessions=[{"session_id": Shouty("s1")}])["source"]["source_refs"]["sessions"]
    assert ref == {"kind": "session", "session_id": "s1"}


def test_evidence_refs_equal_the_source_refs_but_are_separate_objects() -> None:
    payload = build(sessions=[{"session_id": "s1"}], gates=[{"gate_id": "g1", "kind": "approval"}])
    source, evidence = payload["source"]["source_refs"], payload["attention_item"]["evidence_refs"]
    assert evidence == source
    assert evidence["sessions"] == [{"kind": "session", "session_id": "s1"}]
    evidence["sessions"][0]["kind"] = "edited"
    assert source["sessions"][0]["kind"] == "session"


# ---- latest_fact_at --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sessions", "events", "outcomes"])
def test_latest_fact_at_reads_sessions_events_and_outcomes(name: str) -> None:
    assert build(**{name: [{"created_at": "2026-01-01"}]})["source"]["latest_fact_at"] == (
        "2026-01-01"
    )


@pytest.mark.parametrize("name", ["gates", "artifacts", "decision_results"])
def test_latest_fact_at_never_reads_gates_artifacts_or_decisions(name: str) -> None:
    groups = {name: [{"created_at": "2099-01-01"}], "sessions": [{"created_at": "2026-01-01"}]}
    assert build(**groups)["source"]["latest_fact_at"] == "2026-01-01"


def test_latest_fact_at_is_the_greatest_string_across_the_three_groups() -> None:
    payload = build(
        sessions=[{"created_at": "2026-01-01"}, {"created_at": "2026-03-01"}],
        events=[{"created_at": "2026-02-01"}],
        outcomes=[{"created_at": "2026-01-15"}],
    )
    assert payload["source"]["latest_fact_at"] == "2026-03-01"
    # A string comparison, not a date or number one: "9" sorts after "10".
    assert (
        build(events=[{"created_at": "9"}, {"created_at": "10"}])["source"]["latest_fact_at"] == "9"
    )


@pytest.mark.parametrize(
    ("item", "stamp"),
    [
        ({"created_at": "c", "event_at": "z", "updated_at": "z", "timestamp": "z"}, "c"),
        ({"event_at": "e", "updated_at": "z", "timestamp": "z"}, "e"),
        ({"updated_at": "u", "timestamp": "z"}, "u"),
        ({"timestamp": "t"}, "t"),
        ({"created_at": "", "event_at": "e"}, "e"),
        ({"created_at": None, "event_at": "e"}, "e"),
        ({"created_at": 5, "event_at": "e"}, "e"),
        ({"created_at": True, "event_at": "e"}, "e"),
        ({"created_at": ["z"], "event_at": "e"}, "e"),
        ({"created_at": 2e9}, None),
        ({"at": "2026", "time": "2026", "date": "2026"}, None),
        ({"created_at": "2026-01-01  10:00"}, "2026-01-01 10:00"),
        ({"created_at": "t" * 80}, "t" * 80),
        ({"created_at": "t" * 81}, "t" * 79 + "..."),
    ],
)
def test_the_timestamp_is_the_first_non_empty_string_of_four_keys_capped_at_80(
    item: dict[str, Any], stamp: str | None
) -> None:
    assert build(sessions=[item])["source"]["latest_fact_at"] == stamp


class _Contrary(str):
    """A str that lies when compared: the rules must compare its characters."""

    def __gt__(self, other: object) -> bool:
        return False

    def __lt__(self, other: object) -> bool:
        return False


def test_a_str_subclass_timestamp_compares_as_its_characters() -> None:
    payload = build(sessions=[{"created_at": _Contrary("2026-05-05")}])
    assert payload["source"]["latest_fact_at"] == "2026-05-05"
    assert type(payload["source"]["latest_fact_at"]) is str


# ---- boundary: raw material, unclassified keys -------------------------------------------


@pytest.mark.parametrize(
    ("key", "category"),
    [
        ("api_key", "credential"),
        ("password", "credential"),
        ("raw_transcript", "transcript"),
        ("message", "transcript"),
        ("log_path", "log"),
        ("stack_trace", "log"),
        ("file_path", "local_path"),
        ("local_path", "local_path"),
        ("stdout_tail", "raw_output"),
        ("diff", "raw_output"),
    ],
)
@pytest.mark.parametrize("name", GROUPS)
def test_a_raw_key_in_any_group_is_named_its_value_never_copied(
    key: str, category: str, name: str
) -> None:
    canary = f"CANARY-{key}-/Users/someone/.ssh/id_rsa"
    item = {"next_action": "advance", "created_at": "2026", key: canary}
    groups: dict[str, list[dict[str, Any]]] = {"sessions": [{"next_action": "advance"}]}
    groups[name] = [*groups.get(name, []), item]
    payload = build(**groups)
    boundary = payload["boundary"]
    assert boundary["raw_material_detected"] is True
    assert boundary["raw_material_key_names"] == [key]
    assert boundary["raw_material_categories"] == [category]
    assert boundary["unclassified_key_names"] == []
    assert "CANARY" not in json.dumps(payload)
    assert payload["first_screen"]["agent_can_continue"] is False
    assert payload["work_lane_contract"]["must_attempt_work"] is False
    assert payload["first_screen"]["recommended_action"] == RAW_ACTION
    assert payload["attention_item"]["title"] == RAW_ACTION


def test_raw_names_and_categories_are_sorted_and_unique() -> None:
    boundary = build(
        sessions=[{"secret": "x", "raw_transcript": "x", "local_path": "x"}],
        events=[{"secret": "y", "credential_hint": "y", "stdout_tail": "y"}],
    )["boundary"]
    assert boundary["raw_material_key_names"] == [
        "credential_hint",
        "local_path",
        "raw_transcript",
        "secret",
        "stdout_tail",
    ]
    assert boundary["raw_material_categories"] == [
        "credential",
        "local_path",
        "raw_output",
        "transcript",
    ]


def test_compact_keys_are_reported_nowhere() -> None:
    item = {
        "session_id": "s",
        "status": "ok",
        "summary": "s",
        "trace_id": "t",
        "message_id": "m",
        "token_count": 3,
        "created_at": "2026",
    }
    boundary = build(sessions=[item])["boundary"]
    assert boundary["raw_material_key_names"] == []
    assert boundary["unclassified_key_names"] == []
    assert boundary["raw_material_detected"] is False


def test_unclassified_keys_are_sorted_unique_and_never_block() -> None:
    payload = build(
        sessions=[{"next_action": "advance", "drawer": 1, "backlog": 2}],
        events=[{"backlog": 3, "changelog": 4}],
    )
    assert payload["boundary"]["unclassified_key_names"] == ["backlog", "changelog", "drawer"]
    assert payload["boundary"]["raw_material_detected"] is False
    assert payload["first_screen"]["agent_can_continue"] is True


@pytest.mark.parametrize(("count", "kept"), [(23, 23), (24, 24), (25, 24), (40, 24)])
def test_unclassified_names_are_the_first_24_after_sorting(count: int, kept: int) -> None:
    names = [f"opaque{n:03d}" for n in range(count)]
    item = {name: 1 for name in reversed(names)}
    assert build(sessions=[item])["boundary"]["unclassified_key_names"] == names[:kept]


class _Named(str):
    def __str__(self) -> str:
        return "other"

    def __repr__(self) -> str:
        return "other"


@pytest.mark.parametrize(
    ("key", "name"),
    [
        (1, "1"),
        (-3, "-3"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        (1.5, "1.5"),
        (-0.25, "-0.25"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        ((1, 2), "<tuple>"),
        (frozenset(), "<frozenset>"),
        (_Named("opaque"), "opaque"),
    ],
)
def test_a_non_string_key_is_reported_by_its_json_spelling(key: object, name: str) -> None:
    (reported,) = build(sessions=[{key: "x"}])["boundary"]["unclassified_key_names"]
    assert reported == name
    assert type(reported) is str


def test_an_int_too_long_to_spell_is_reported_as_int_whatever_its_class() -> None:
    class Big(int):
        pass

    for key in (10**5000, Big(10**5000)):
        names = build(sessions=[{key: "x"}])["boundary"]["unclassified_key_names"]
        assert names == ["<int>"]


def test_only_top_level_keys_are_classified_and_nested_values_never_read() -> None:
    canary = "CANARY-nested-/Users/someone/secret"
    item = {
        "summary": {"api_key": canary, "message": canary},
        "next_action": [canary],
        "status": {"deep": {"deeper": canary}},
        "blocker": {"raw_transcript": canary},
        "question": {"password": canary},
    }
    payload = build(sessions=[item], events=[item], gates=[item])
    assert payload["boundary"]["raw_material_detected"] is False
    assert "CANARY" not in json.dumps(payload)
    assert payload["first_screen"]["first_agent_todo"] is None
    assert payload["first_screen"]["latest_blocker"] is None


# ---- the blocking gate (human gate) ----------------------------------------------------------


@pytest.mark.parametrize("status", OPEN_STATUSES)
def test_each_open_status_with_a_human_actor_is_a_blocking_gate(status: str) -> None:
    first = screen(gates=[gate(status=status)])
    assert first["user_action_required"] is True
    assert first["gate_state"] == status
    assert first["waiting_on"] == "operator"


@pytest.mark.parametrize("status", ["resolved", "closed", "approved", "done", "", "opened"])
def test_a_gate_that_is_not_open_does_not_block(status: str) -> None:
    first = screen(gates=[gate(status=status)])
    assert first["user_action_required"] is False
    assert first["gate_state"] == "none"


def test_a_gate_without_any_status_does_not_block() -> None:
    assert screen(gates=[{"actor": "operator", "question": "q?"}])["user_action_required"] is False


@pytest.mark.parametrize(
    ("fields", "state"),
    [
        ({"status": None, "state": "open"}, "open"),
        ({"status": "", "state": "open"}, "open"),
        ({"status": "  ", "state": "open"}, "open"),
        ({"status": {"x": 1}, "state": "open"}, "open"),
        ({"status": " PENDING \n"}, "pending"),
        ({"status": "Needs_Decision"}, "needs_decision"),
        ({"status": "open", "state": "closed"}, "open"),
    ],
)
def test_gate_status_is_status_then_state_trimmed_and_lowercased(
    fields: dict[str, Any], state: str
) -> None:
    item = gate(**fields)
    if "status" not in fields:
        del item["status"]
    assert screen(gates=[item])["gate_state"] == state


def test_the_peers_numeric_status_with_a_pending_state_is_a_blocking_user_gate() -> None:
    # The peer reads `status or state`: 0 is falsy, so it sees a pending gate for the user.
    first = screen(gates=[{"gate_id": "g1", "status": 0, "state": "pending", "actor": "user"}])
    assert first["user_action_required"] is True
    assert (first["waiting_on"], first["gate_state"]) == ("user", "pending")
    assert first["agent_can_continue"] is False and first["first_agent_todo"] is None


@pytest.mark.parametrize(
    "fields",
    [
        {"status": 7, "state": "pending"},
        {"status": True, "state": "pending"},
        {"status": 0},
        {"status": 1.5, "actor": "agent"},
        {"status": ["pending"]},
        {"status": "approved", "blocking": "no"},
        {"status": "approved", "advisory": 1},
        {"status": "approved", "actor": 5},
        {"status": "closed", "requires_human_decision": "false"},
        {"status": "done", "question": {"text": "q"}},
        {"state": {"pending": True}},
    ],
)
def test_a_gate_field_of_an_unexpected_type_fails_closed_as_a_blocking_gate(
    fields: dict[str, Any],
) -> None:
    item = {"gate_id": "g1", **fields}
    first = screen(gates=[item], sessions=[{"session_id": "s", "next_action": "go on"}])
    assert first["user_action_required"] is True
    assert first["agent_can_continue"] is False and first["first_agent_todo"] is None
    assert first["gate_state"] in OPEN_GATE_STATUSES
    assert first["first_user_todo"]  # the owner is told what to check, never a blank
    lane = build(gates=[item])["work_lane_contract"]
    assert lane["lane"] == "user_gate" and lane["user_gate_blocks_delivery"] is True


def test_a_well_typed_closed_gate_still_does_not_block() -> None:
    item = {"gate_id": "g1", "status": "approved", "actor": "user", "blocking": True}
    assert screen(gates=[item])["user_action_required"] is False


@pytest.mark.parametrize("actor", HUMAN_ACTORS)
@pytest.mark.parametrize("key", ["actor", "required_actor", "decision_actor", "channel"])
def test_each_human_actor_under_each_actor_key_blocks_and_is_waited_on(
    actor: str, key: str
) -> None:
    item = {"gate_id": "g1", "status": "open", key: f" {actor.upper()} "}
    first = screen(gates=[item])
    assert first["user_action_required"] is True
    assert first["waiting_on"] == actor


@pytest.mark.parametrize("actor", ["agent", "codex", "runtime", "system", "", "users"])
def test_a_gate_for_a_non_human_actor_does_not_block(actor: str) -> None:
    assert screen(gates=[gate(actor=actor)])["user_action_required"] is False


def test_the_first_actor_key_with_text_decides() -> None:
    human_later = gate(
        actor="agent", required_actor="human", decision_actor="user", channel="owner"
    )
    assert screen(gates=[human_later])["user_action_required"] is False
    order = [
        ({"actor": "", "required_actor": "owner", "decision_actor": "user"}, "owner"),
        ({"required_actor": "  ", "decision_actor": "user", "channel": "human"}, "user"),
        ({"decision_actor": None, "channel": "human"}, "human"),
    ]
    for actors, waited in order:
        item = {"status": "open", **actors}
        assert screen(gates=[item])["waiting_on"] == waited


@pytest.mark.parametrize("flag", ["requires_human_decision", "action_required"])
@pytest.mark.parametrize("value", [True, 1, "yes", ["x"]])
def test_a_truthy_human_decision_flag_blocks_and_waits_on_the_operator(
    flag: str, value: object
) -> None:
    item = {"gate_id": "g1", "status": "requested", "actor": "agent", flag: value}
    first = screen(gates=[item])
    assert first["user_action_required"] is True
    assert first["waiting_on"] == "operator"


@pytest.mark.parametrize("flag", ["requires_human_decision", "action_required"])
@pytest.mark.parametrize(
    ("value", "blocks"), [(False, False), (None, False), (0, True), ("", True), ([], True)]
)
def test_a_false_human_decision_flag_does_not_block_but_a_flag_of_another_type_does(
    flag: str, value: object, blocks: bool
) -> None:
    # A flag that is not a boolean (0, "", []) is a record we do not understand: it fails
    # closed as a blocking gate, where the peer would read it as falsy and skip the gate.
    item = {"gate_id": "g1", "status": "requested", flag: value}
    assert screen(gates=[item])["user_action_required"] is blocks


@pytest.mark.parametrize(
    ("fields", "blocks"),
    [
        ({"advisory": True}, False),
        ({"advisory": "true"}, True),
        ({"advisory": 1}, True),
        ({"advisory": False}, True),
        ({"blocking": False}, False),
        ({"blocking": 0}, True),
        ({"blocking": None}, True),
        ({"blocking": "false"}, True),
        ({"blocking": True}, True),
        ({}, True),
        ({"advisory": True, "blocking": True}, False),
    ],
)
def test_advisory_exactly_true_or_blocking_exactly_false_does_not_block(
    fields: dict[str, Any], blocks: bool
) -> None:
    assert screen(gates=[gate(**fields)])["user_action_required"] is blocks


def test_the_first_blocking_gate_in_input_order_wins() -> None:
    gates = [
        gate(status="closed", question="closed?"),
        gate(advisory=True, question="advisory?"),
        gate(actor="owner", status="waiting", question="first?"),
        gate(actor="user", status="open", question="second?"),
    ]
    first = screen(gates=gates)
    assert first["first_user_todo"] == "first?"
    assert first["waiting_on"] == "owner"
    assert first["gate_state"] == "waiting"


@pytest.mark.parametrize(
    "name", ["sessions", "events", "outcomes", "artifacts", "decision_results"]
)
def test_only_gates_can_be_blocking_gates(name: str) -> None:
    first = screen(**{name: [gate(question="q?")]})
    assert first["user_action_required"] is False
    assert first["first_user_todo"] is None
    assert first["gate_state"] == "none"


def test_a_blocking_gate_fills_the_user_side_of_every_section() -> None:
    payload = build(
        gates=[gate(question="Approve read-only evidence import?")],
        sessions=[{"next_action": "keep going"}],
        decision_results=[{"recommended_action": "wire the adapter"}],
    )
    assert payload["first_screen"] == {
        "waiting_on": "operator",
        "user_action_required": True,
        "agent_can_continue": False,
        "first_user_todo": "Approve read-only evidence import?",
        "first_agent_todo": None,
        "latest_validation": None,
        "latest_blocker": None,
        "gate_state": "pending",
        "recommended_action": "Approve read-only evidence import?",
    }
    assert payload["work_lane_contract"] == {
        "lane": "user_gate",
        "must_attempt_work": False,
        "user_gate_blocks_delivery": True,
        "monitor_only": False,
    }
    item = payload["attention_item"]
    assert (item["kind"], item["priority"], item["waiting_on"]) == ("user_gate", "P0", "operator")
    assert item["title"] == "Approve read-only evidence import?"


USER_TODO_ORDER = ("question", "requested_decision", "title", "summary", "next_action")


@pytest.mark.parametrize("position", range(len(USER_TODO_ORDER)))
def test_first_user_todo_takes_the_first_of_five_keys_with_text(position: int) -> None:
    keys = USER_TODO_ORDER[position:]
    fields: dict[str, Any] = {key: f"from {key}" for key in keys}
    fields.update({key: "  " for key in USER_TODO_ORDER[:position]})
    assert screen(gates=[gate(**fields)])["first_user_todo"] == f"from {keys[0]}"


def test_first_user_todo_never_reads_message_and_may_be_none() -> None:
    payload = build(gates=[gate(message="CANARY-message")])
    assert payload["first_screen"]["first_user_todo"] is None
    assert "CANARY" not in json.dumps(payload)
    first = screen(gates=[gate(note="n", details="d")])
    assert first["first_user_todo"] is None
    assert first["recommended_action"] is None
    assert first["user_action_required"] is True


@pytest.mark.parametrize(("question", "todo"), [(A180, A180), (A181, CUT180), (" a \t b ", "a b")])
def test_first_user_todo_is_collapsed_and_capped_at_180(question: str, todo: str) -> None:
    assert screen(gates=[gate(question=question)])["first_user_todo"] == todo


# ---- the agent todo --------------------------------------------------------------------------

AGENT_TODO_ORDER = ("recommended_action", "agent_next_action", "next_action", "handoff", "summary")


@pytest.mark.parametrize("position", range(len(AGENT_TODO_ORDER)))
def test_the_agent_todo_takes_the_first_of_five_keys_with_text(position: int) -> None:
    keys = AGENT_TODO_ORDER[position:]
    fields: dict[str, Any] = {key: f"from {key}" for key in keys}
    fields.update({key: {"x": 1} for key in AGENT_TODO_ORDER[:position]})
    first = screen(sessions=[fields])
    assert first["first_agent_todo"] == f"from {keys[0]}"
    assert first["recommended_action"] == f"from {keys[0]}"


@pytest.mark.parametrize("winner", range(4))
def test_agent_todo_groups_are_read_decisions_sessions_events_outcomes(winner: int) -> None:
    order = ("decision_results", "sessions", "events", "outcomes")
    groups = {name: [{"next_action": f"from {name}"}] for name in order[winner:]}
    assert screen(**groups)["first_agent_todo"] == f"from {order[winner]}"


@pytest.mark.parametrize("name", ["gates", "artifacts"])
def test_gates_and_artifacts_never_give_an_agent_todo(name: str) -> None:
    item = {"recommended_action": "x", "next_action": "x", "summary": "x", "status": "done"}
    first = screen(**{name: [item]})
    assert first["first_agent_todo"] is None
    assert first["waiting_on"] == "none"


def test_within_a_group_the_first_item_with_text_wins() -> None:
    sessions = [{"status": "idle"}, {"next_action": "second"}, {"next_action": "third"}, {}]
    assert screen(sessions=sessions)["first_agent_todo"] == "second"


def test_an_agent_todo_never_reads_message() -> None:
    first = screen(sessions=[{"message": "CANARY-message", "kind": "note"}])
    assert first["first_agent_todo"] is None


@pytest.mark.parametrize(
    ("value", "todo"), [(A180, A180), (A181, CUT180), (0, "0"), (False, "False"), ("\n", None)]
)
def test_the_agent_todo_is_scalar_text_capped_at_180(value: object, todo: str | None) -> None:
    assert screen(sessions=[{"next_action": value}])["first_agent_todo"] == todo


def test_an_agent_todo_routes_to_the_agent_and_lets_it_continue() -> None:
    payload = build(sessions=[{"session_id": "s1", "next_action": "advance one segment"}])
    first = payload["first_screen"]
    assert first["waiting_on"] == "agent"
    assert first["agent_can_continue"] is True
    assert first["user_action_required"] is False
    assert first["first_user_todo"] is None
    assert first["gate_state"] == "none"
    assert first["recommended_action"] == "advance one segment"
    assert payload["work_lane_contract"] == {
        "lane": "advancement_task",
        "must_attempt_work": True,
        "user_gate_blocks_delivery": False,
        "monitor_only": False,
    }
    item = payload["attention_item"]
    assert (item["kind"], item["priority"], item["waiting_on"]) == (
        "advancement_task",
        "P1",
        "agent",
    )
    assert item["title"] == "advance one segment"


def test_raw_keys_change_only_can_continue_and_the_recommendation() -> None:
    clean = build(sessions=[{"next_action": "advance"}])
    raw = build(sessions=[{"next_action": "advance", "prompt": "CANARY"}])
    assert raw["first_screen"]["agent_can_continue"] is False
    assert raw["work_lane_contract"]["must_attempt_work"] is False
    assert raw["first_screen"]["recommended_action"] == RAW_ACTION
    for section, field in (
        ("first_screen", "waiting_on"),
        ("first_screen", "first_agent_todo"),
        ("work_lane_contract", "lane"),
        ("attention_item", "priority"),
        ("attention_item", "kind"),
    ):
        assert raw[section][field] == clean[section][field]


def test_raw_keys_replace_even_a_gate_question_and_the_monitor_text() -> None:
    gated = build(gates=[gate(question="q?", stderr_tail="CANARY")])
    assert gated["first_screen"]["recommended_action"] == RAW_ACTION
    assert gated["first_screen"]["first_user_todo"] == "q?"
    assert gated["work_lane_contract"]["lane"] == "user_gate"
    idle = build(artifacts=[{"patch": "CANARY"}])
    assert idle["first_screen"]["recommended_action"] == RAW_ACTION
    assert idle["work_lane_contract"]["lane"] == "monitor"


# ---- latest validation -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["validation", "outcome"])
@pytest.mark.parametrize("status", VALIDATED)
@pytest.mark.parametrize("name", ["outcomes", "events"])
def test_a_validated_status_on_a_validation_kind_is_a_validation(
    kind: str, status: str, name: str
) -> None:
    item = {"kind": kind, "status": status, "summary": "checks green"}
    assert screen(**{name: [item]})["latest_validation"] == "checks green"


@pytest.mark.parametrize(
    "item",
    [
        {"kind": "validation", "status": "failed", "summary": "s"},
        {"kind": "validation", "summary": "s"},
        {"kind": "note", "status": "passed", "summary": "s"},
        {"status": "passed", "summary": "s"},
        {"kind": "validations", "status": "passed", "summary": "s"},
        {"summary": "s", "title": "t"},
    ],
)
def test_half_a_validation_is_not_one(item: dict[str, Any]) -> None:
    assert screen(outcomes=[item])["latest_validation"] is None


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "Validation", "state": " OK "},
        {"kind": "", "type": "outcome", "status": "", "state": "success"},
        {"kind": "validation", "type": "note", "status": "passed", "state": "failed"},
        {"kind": {"x": 1}, "type": "validation", "status": None, "state": "passed"},
    ],
)
def test_validation_kind_and_status_fall_back_to_type_and_state(fields: dict[str, Any]) -> None:
    assert screen(events=[{**fields, "summary": "s"}])["latest_validation"] == "s"


def test_kind_and_status_come_before_type_and_state() -> None:
    item = {"kind": "note", "type": "validation", "status": "failed", "state": "passed"}
    assert screen(events=[{**item, "summary": "s"}])["latest_validation"] is None


@pytest.mark.parametrize(
    ("signal", "value", "text"),
    [
        ("validation_summary", "projection is public-safe", "projection is public-safe"),
        ("validated", "schema ok", "schema ok"),
        ("validated", True, "True"),
        ("result", "3 passed", "3 passed"),
        ("result", 0, "0"),
        ("result", 1.5, "1.5"),
    ],
)
def test_a_validation_signal_key_with_text_is_a_validation(
    signal: str, value: object, text: str
) -> None:
    assert screen(outcomes=[{signal: value}])["latest_validation"] == text


@pytest.mark.parametrize("value", [False, "", "   ", None, {"ok": True}, ["passed"], {}])
@pytest.mark.parametrize("signal", ["validation_summary", "validated", "result"])
def test_a_signal_key_without_text_is_not_a_validation(signal: str, value: object) -> None:
    assert screen(outcomes=[{signal: value, "summary": "s"}])["latest_validation"] is None


def test_validation_text_takes_the_first_of_four_keys() -> None:
    keys = ("validation_summary", "validated", "result", "summary")
    base = {"kind": "validation", "status": "passed"}
    for position in range(len(keys)):
        item = {**base, **{key: f"from {key}" for key in keys[position:]}}
        item.update({key: "" for key in keys[:position]})
        assert screen(outcomes=[item])["latest_validation"] == f"from {keys[position]}"


def test_a_validation_without_text_reads_as_none_never_as_message() -> None:
    item = {"kind": "validation", "status": "passed", "message": "CANARY", "title": "t"}
    assert screen(outcomes=[item])["latest_validation"] is None


@pytest.mark.parametrize(("summary", "text"), [(A180, A180), (A181, CUT180)])
def test_validation_text_is_capped_at_180(summary: str, text: str) -> None:
    assert screen(outcomes=[{"validation_summary": summary}])["latest_validation"] == text


@pytest.mark.parametrize("name", ["sessions", "gates", "artifacts", "decision_results"])
def test_only_outcomes_and_events_can_be_validations(name: str) -> None:
    item = {"kind": "validation", "status": "passed", "validation_summary": "v"}
    assert screen(**{name: [item]})["latest_validation"] is None


def test_the_newest_validation_wins_and_a_tie_keeps_outcomes_before_events() -> None:
    def v(text: str, at: str) -> dict[str, Any]:
        return {"validation_summary": text, "created_at": at}

    assert screen(outcomes=[v("old", "1"), v("new", "3"), v("mid", "2")])["latest_validation"] == (
        "new"
    )
    assert screen(outcomes=[v("a", "2")], events=[v("b", "3")])["latest_validation"] == "b"
    assert screen(outcomes=[v("a", "3")], events=[v("b", "2")])["latest_validation"] == "a"
    assert screen(outcomes=[v("a", "2")], events=[v("b", "2")])["latest_validation"] == "a"
    assert screen(events=[v("first", "2"), v("second", "2")])["latest_validation"] == "first"
    assert screen(events=[v("undated", ""), v("dated", "1")])["latest_validation"] == "dated"
    assert screen(events=[v("undated", ""), v("also", "")])["latest_validation"] == "undated"


def test_a_newer_non_validation_does_not_displace_the_validation() -> None:
    outcomes = [
        {"validation_summary": "kept", "created_at": "1"},
        {"summary": "plain", "kind": "note", "status": "done", "created_at": "2"},
    ]
    assert screen(outcomes=outcomes)["latest_validation"] == "kept"


# ---- latest blocker --------------------------------------------------------------------------


@pytest.mark.parametrize("status", BLOCKED)
@pytest.mark.parametrize("name", ["gates", "outcomes", "events"])
def test_a_blocked_status_is_a_blocker(status: str, name: str) -> None:
    item = {"status": status.upper(), "actor": "agent", "summary": "stuck"}
    first = screen(**{name: [item]})
    assert first["latest_blocker"] == "stuck"


@pytest.mark.parametrize("name", ["gates", "outcomes", "events"])
def test_kind_blocker_is_a_blocker_whatever_its_status(name: str) -> None:
    item = {"type": " Blocker ", "status": "done", "title": "needs disk"}
    assert screen(**{name: [item]})["latest_blocker"] == "needs disk"


@pytest.mark.parametrize(("signal", "value"), [("blocker", "no disk"), ("blocker_summary", 7)])
def test_a_blocker_signal_key_with_text_is_a_blocker(signal: str, value: object) -> None:
    assert screen(events=[{signal: value}])["latest_blocker"] == str(value)


@pytest.mark.parametrize(
    "item",
    [
        {"status": "done", "summary": "s"},
        {"kind": "blockers", "summary": "s"},
        {"status": "blocking", "summary": "s"},
        {"blocker": "  ", "summary": "s"},
        {"blocker": "", "summary": "s"},
        {"blocker": False, "summary": "s"},
        {"blocker_summary": {"why": "x"}, "summary": "s"},
    ],
)
def test_a_non_blocker_is_not_one(item: dict[str, Any]) -> None:
    assert screen(events=[item])["latest_blocker"] is None


def test_kind_and_status_before_type_and_state_for_blockers() -> None:
    assert (
        screen(events=[{"kind": "note", "type": "blocker", "summary": "s"}])["latest_blocker"]
        is None
    )
    assert (
        screen(events=[{"status": "done", "state": "failed", "summary": "s"}])["latest_blocker"]
        is None
    )
    assert (
        screen(events=[{"status": "", "state": "failed", "summary": "s"}])["latest_blocker"] == "s"
    )


def test_blocker_text_takes_the_first_of_four_keys() -> None:
    keys = ("blocker", "blocker_summary", "summary", "title")
    for position in range(len(keys)):
        item = {"status": "failed", **{key: f"from {key}" for key in keys[position:]}}
        item.update({key: None for key in keys[:position]})
        assert screen(outcomes=[item])["latest_blocker"] == f"from {keys[position]}"


def test_a_blocker_with_only_a_message_reads_as_none() -> None:
    payload = build(
        events=[{"event_id": "e1", "kind": "blocker", "status": "blocked", "message": "CANARY"}]
    )
    assert payload["first_screen"]["latest_blocker"] is None
    assert payload["work_lane_contract"]["lane"] == "monitor"
    assert "CANARY" not in json.dumps(payload)


@pytest.mark.parametrize(("title", "text"), [(A180, A180), (A181, CUT180)])
def test_blocker_text_is_capped_at_180(title: str, text: str) -> None:
    assert screen(gates=[{"kind": "blocker", "title": title}])["latest_blocker"] == text


@pytest.mark.parametrize("name", ["sessions", "artifacts", "decision_results"])
def test_sessions_artifacts_and_decisions_are_never_blockers(name: str) -> None:
    item = {"kind": "blocker", "status": "failed", "blocker": "b"}
    assert screen(**{name: [item]})["latest_blocker"] is None


def test_the_newest_blocker_wins_and_a_tie_keeps_gates_outcomes_events() -> None:
    def b(text: str, at: str) -> dict[str, Any]:
        return {"blocker": text, "updated_at": at}

    assert screen(events=[b("old", "1"), b("new", "2")])["latest_blocker"] == "new"
    assert screen(events=[b("new", "2"), b("old", "1")])["latest_blocker"] == "new"
    assert screen(gates=[b("g", "1")], outcomes=[b("o", "2")])["latest_blocker"] == "o"
    tie = {"gates": [b("g", "5")], "outcomes": [b("o", "5")], "events": [b("e", "5")]}
    assert screen(**tie)["latest_blocker"] == "g"
    assert screen(outcomes=[b("o", "5")], events=[b("e", "5")])["latest_blocker"] == "o"
    assert screen(events=[b("undated", ""), b("dated", "0")])["latest_blocker"] == "dated"


def test_a_newer_non_blocker_does_not_displace_the_blocker() -> None:
    events = [{"blocker": "kept", "created_at": "1"}, {"summary": "fine", "created_at": "2"}]
    assert screen(events=events)["latest_blocker"] == "kept"


def test_validation_and_blocker_are_tracked_separately_in_one_pass() -> None:
    first = screen(
        gates=[{"status": "failed", "summary": "gate broke", "created_at": "1"}],
        outcomes=[{"validation_summary": "green", "created_at": "9"}],
        events=[{"blocker": "older blocker", "created_at": "0"}],
    )
    assert first["latest_validation"] == "green"
    assert first["latest_blocker"] == "gate broke"
    second = screen(
        outcomes=[{"validation_summary": "green", "created_at": "9"}],
        events=[
            {"validation_summary": "older", "created_at": "1"},
            {"blocker": "stuck", "created_at": "0"},
        ],
    )
    assert (second["latest_validation"], second["latest_blocker"]) == ("green", "stuck")


def test_a_blocker_without_an_agent_todo_waits_on_the_runtime() -> None:
    # `title` is a blocker text but not an agent todo (a `summary` would be both).
    payload = build(outcomes=[{"outcome_id": "o1", "status": "failed", "title": "tests red"}])
    first = payload["first_screen"]
    assert first["waiting_on"] == "runtime"
    assert first["latest_blocker"] == "tests red"
    assert first["agent_can_continue"] is False
    assert first["recommended_action"] == MONITOR_ACTION
    assert payload["work_lane_contract"] == {
        "lane": "blocker",
        "must_attempt_work": False,
        "user_gate_blocks_delivery": False,
        "monitor_only": False,
    }
    item = payload["attention_item"]
    assert (item["kind"], item["priority"], item["waiting_on"]) == ("blocker", "P0", "runtime")


def test_an_agent_todo_outranks_a_blocker() -> None:
    payload = build(
        outcomes=[{"status": "failed", "blocker": "tests red"}],
        decision_results=[{"recommended_action": "fix the test"}],
    )
    assert payload["first_screen"]["waiting_on"] == "agent"
    assert payload["first_screen"]["latest_blocker"] == "tests red"
    assert payload["work_lane_contract"]["lane"] == "advancement_task"
    assert payload["attention_item"]["priority"] == "P1"


def test_a_gate_that_does_not_block_can_still_be_the_blocker() -> None:
    payload = build(gates=[{"status": "blocked", "actor": "agent", "title": "waiting on CI"}])
    assert payload["first_screen"]["user_action_required"] is False
    assert payload["first_screen"]["latest_blocker"] == "waiting on CI"
    assert payload["first_screen"]["waiting_on"] == "runtime"


def test_a_blocking_gate_outranks_blocker_and_agent_todo() -> None:
    payload = build(
        gates=[gate(status="requires_decision", actor="human", question="ok?")],
        outcomes=[{"status": "failed", "summary": "red"}],
        sessions=[{"next_action": "go"}],
    )
    first = payload["first_screen"]
    assert (first["waiting_on"], first["gate_state"]) == ("human", "requires_decision")
    assert first["latest_blocker"] == "red"
    assert payload["work_lane_contract"]["lane"] == "user_gate"


# ---- monitor -----------------------------------------------------------------------------------


def test_nothing_to_do_is_the_monitor_lane() -> None:
    payload = build(
        sessions=[{"session_id": "s1", "status": "idle"}],
        artifacts=[{"artifact_id": "a1", "summary": "report"}],
        gates=[gate(status="resolved")],
    )
    first = payload["first_screen"]
    assert first["waiting_on"] == "none"
    assert first["recommended_action"] == MONITOR_ACTION
    assert first["agent_can_continue"] is False
    assert payload["work_lane_contract"]["monitor_only"] is True
    assert payload["attention_item"]["priority"] == "P1"


def test_only_the_monitor_lane_is_monitor_only() -> None:
    lanes = {
        "user_gate": build(gates=[gate()]),
        "blocker": build(events=[{"blocker": "b"}]),
        "advancement_task": build(sessions=[{"next_action": "n"}]),
    }
    for lane, payload in lanes.items():
        assert payload["work_lane_contract"]["lane"] == lane
        assert payload["work_lane_contract"]["monitor_only"] is False


# ---- purity ----------------------------------------------------------------------------------


def _walk(value: object) -> Iterator[object]:
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def test_the_output_shares_no_object_with_the_input() -> None:
    item = {"session_id": "s1", "next_action": "go", "summary": "x"}
    payload = build(sessions=[item], gates=[gate()])
    ids = {id(node) for node in _walk(payload) if isinstance(node, dict | list)}
    assert id(item) not in ids
    assert item == {"session_id": "s1", "next_action": "go", "summary": "x"}

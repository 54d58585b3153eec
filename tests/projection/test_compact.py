"""The compact form's field rules, one at a time: which boundary, first-screen and work-lane
flags and which texts are copied (real booleans only, each text capped at its own limit),
how reference groups become counts (empty and zero groups vanish), and how the status layer
reads the result (the ``waiting_on`` fallback, ``monitor_only``, severity, the action).

Inputs are hand-written projections where the builder cannot produce the case (it always
writes the copy flags false); the expected values come from the reference, §3.7."""

from __future__ import annotations

from typing import Any

import pytest

from loopx_chat.session_runtime import (
    build_session_runtime_readonly_projection,
    compact_session_runtime_projection_from_run,
    compact_session_runtime_readonly_projection,
    session_runtime_projection_attention,
    session_runtime_status_waiting_on,
)

V0 = "session_runtime_readonly_projection_v0"
GROUPS = ("sessions", "events", "outcomes", "gates", "artifacts", "decision_results")
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


def compact(**sections: Any) -> dict[str, Any]:
    result = compact_session_runtime_readonly_projection({"schema_version": V0, **sections})
    assert result is not None
    return result


def attention(**sections: Any) -> dict[str, Any]:
    item = session_runtime_projection_attention(
        {"session_runtime_projection": {"schema_version": V0, **sections}}
    )
    assert item is not None
    return item


def test_a_projection_with_no_sections_compacts_to_its_header() -> None:
    assert compact() == {"schema_version": V0, "mode": "read_only"}
    empty = {name: {} for name in ("source", "boundary", "first_screen", "work_lane_contract")}
    assert compact(**empty, attention_item={}, goal_id="") == {
        "schema_version": V0,
        "mode": "read_only",
    }


# ---- boundary ------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", BOUNDARY_FLAGS)
@pytest.mark.parametrize("value", [True, False])
def test_each_boundary_flag_is_copied_as_it_is(flag: str, value: bool) -> None:
    others = {name: not value for name in BOUNDARY_FLAGS if name != flag}
    boundary = {**others, flag: value}
    assert compact(boundary=boundary)["boundary"] == boundary


@pytest.mark.parametrize("flag", BOUNDARY_FLAGS)
@pytest.mark.parametrize("value", ["true", 1, 0, None, [True]])
def test_a_boundary_flag_that_is_not_a_real_boolean_is_dropped(flag: str, value: object) -> None:
    result = compact(boundary={"raw_material_detected": False, flag: value})
    if flag == "raw_material_detected":
        assert "boundary" not in result
    else:
        assert result["boundary"] == {"raw_material_detected": False}


@pytest.mark.parametrize("name", BOUNDARY_LISTS)
def test_each_boundary_list_is_copied_capped_at_eight(name: str) -> None:
    items = [f"key_{n:02d}" for n in range(10)]
    assert compact(boundary={name: items})["boundary"] == {name: items[:8]}
    assert compact(boundary={name: tuple(items[:2])})["boundary"] == {name: items[:2]}
    assert "boundary" not in compact(boundary={name: "key_00"})


def test_a_boundary_list_item_is_capped_at_160_characters() -> None:
    exact, longer = "a" * 160, "b" * 161
    names = compact(boundary={"unclassified_key_names": [exact, longer]})["boundary"]
    assert names["unclassified_key_names"] == [exact, "b" * 159 + "..."]


# ---- first screen, work lane, attention item -------------------------------------------------


@pytest.mark.parametrize("name", FIRST_SCREEN_TEXTS)
def test_each_first_screen_text_is_copied(name: str) -> None:
    assert compact(first_screen={name: "  wait   here "})["first_screen"] == {name: "wait here"}


@pytest.mark.parametrize("name", FIRST_SCREEN_FLAGS)
def test_each_first_screen_flag_is_copied_only_when_a_real_boolean(name: str) -> None:
    assert compact(first_screen={name: True})["first_screen"] == {name: True}
    assert compact(first_screen={name: False})["first_screen"] == {name: False}
    assert "first_screen" not in compact(first_screen={name: "true"})


@pytest.mark.parametrize("name", WORK_LANE_FLAGS)
def test_each_work_lane_flag_is_copied_only_when_a_real_boolean(name: str) -> None:
    lane = {"lane": "monitor"}
    assert compact(work_lane_contract={**lane, name: True})["work_lane_contract"] == {
        **lane,
        name: True,
    }
    assert compact(work_lane_contract={name: False})["work_lane_contract"] == {name: False}
    assert compact(work_lane_contract={**lane, name: 1})["work_lane_contract"] == lane


@pytest.mark.parametrize("name", ATTENTION_TEXTS)
def test_each_attention_text_is_copied_and_evidence_refs_dropped(name: str) -> None:
    item = {name: "P0", "evidence_refs": {"sessions": [{"session_id": "s-1"}]}}
    assert compact(attention_item=item)["attention_item"] == {name: "P0"}


@pytest.mark.parametrize(
    ("section", "name", "limit"),
    [
        ("source", "host_kind", 80),
        ("source", "latest_fact_at", 80),
        ("first_screen", "recommended_action", 260),
        ("work_lane_contract", "lane", 80),
        ("attention_item", "title", 220),
    ],
)
def test_each_text_is_capped_at_its_own_limit(section: str, name: str, limit: int) -> None:
    exact = "x" * limit
    assert compact(**{section: {name: exact}})[section] == {name: exact}
    longer = "y" * (limit + 1)
    assert compact(**{section: {name: longer}})[section] == {name: "y" * (limit - 1) + "..."}


def test_the_goal_id_is_capped_at_120_characters() -> None:
    assert compact(goal_id="g" * 120)["goal_id"] == "g" * 120
    assert compact(goal_id="h" * 121)["goal_id"] == "h" * 119 + "..."


# ---- source reference counts ----------------------------------------------------------------


def test_reference_groups_become_counts_and_empty_groups_vanish() -> None:
    refs = {group: [{"kind": group}] * (n + 1) for n, group in enumerate(GROUPS)}
    refs["events"] = []
    refs["gates"] = ({"kind": "gate"},)
    refs["artifacts"] = "not a list"
    result = compact(source={"host_kind": "session_runtime", "source_refs": refs})
    assert result["source"] == {
        "host_kind": "session_runtime",
        "source_ref_counts": {"sessions": 1, "outcomes": 3, "gates": 1, "decision_results": 6},
    }


def test_a_projection_whose_groups_are_all_empty_has_no_counts() -> None:
    payload = build_session_runtime_readonly_projection(goal_id="g")
    assert all(payload["source"]["source_refs"][group] == [] for group in GROUPS)
    result = compact_session_runtime_readonly_projection(payload)
    assert result is not None
    assert "source_ref_counts" not in result["source"]
    assert compact(source={"source_refs": {g: [] for g in GROUPS}}).get("source") is None


def test_already_compact_counts_keep_only_positive_integers() -> None:
    counts = {"sessions": 2, "events": 0, "outcomes": -1, "gates": True, "artifacts": "3"}
    result = compact(source={"source_ref_counts": {**counts, "decision_results": 1}})
    assert result["source"] == {"source_ref_counts": {"sessions": 2, "decision_results": 1}}
    assert "source" not in compact(source={"source_ref_counts": {"sessions": 0}})


def test_references_win_over_counts_when_both_are_present() -> None:
    source = {"source_refs": {"events": [{}]}, "source_ref_counts": {"sessions": 5}}
    assert compact(source=source)["source"] == {"source_ref_counts": {"events": 1}}


# ---- where a run keeps its projection -------------------------------------------------------


def test_the_run_keys_are_tried_in_order_then_the_run_itself() -> None:
    first, second = {"schema_version": V0, "goal_id": "a"}, {"schema_version": V0, "goal_id": "b"}
    both = {"session_runtime_readonly_projection": first, "session_runtime_projection": second}
    assert compact_session_runtime_projection_from_run(both)["goal_id"] == "a"  # type: ignore[index]
    broken_first = {**both, "session_runtime_readonly_projection": {"schema_version": "v9"}}
    assert compact_session_runtime_projection_from_run(broken_first)["goal_id"] == "b"  # type: ignore[index]
    itself = {"schema_version": V0, "goal_id": "c", "session_runtime_projection": None}
    assert compact_session_runtime_projection_from_run(itself)["goal_id"] == "c"  # type: ignore[index]
    assert compact_session_runtime_projection_from_run(["not", "a", "run"]) is None
    assert compact_session_runtime_projection_from_run({"goal_id": "d"}) is None


# ---- the status view ----------------------------------------------------------------------


def test_waiting_on_falls_back_to_the_attention_item() -> None:
    item = attention(attention_item={"waiting_on": "operator"})
    assert item["waiting_on"] == "user_or_controller"
    assert item["severity"] == "action"
    preferred = attention(
        first_screen={"waiting_on": "runtime"}, attention_item={"waiting_on": "operator"}
    )
    assert preferred["waiting_on"] == "external_evidence"
    assert preferred["severity"] == "watch"
    assert attention()["waiting_on"] == "codex"


def test_monitor_only_lane_turns_an_unnamed_wait_into_a_monitor_signal() -> None:
    lane = {"lane": "monitor", "monitor_only": True}
    item = attention(work_lane_contract=lane, first_screen={"waiting_on": "whoever"})
    assert (item["waiting_on"], item["severity"]) == ("monitor_signal", "watch")
    assert item["status"] == "session_runtime_monitor"
    # A named wait outranks monitor_only: a human gate stays visible.
    gate = attention(work_lane_contract=lane, first_screen={"waiting_on": "user"})
    assert (gate["waiting_on"], gate["severity"]) == ("user_or_controller", "action")
    # Only a real True counts; the compactor already drops anything else.
    not_bool = attention(work_lane_contract={**lane, "monitor_only": "true"})
    assert not_bool["waiting_on"] == "codex"
    off = attention(work_lane_contract={**lane, "monitor_only": False})
    assert off["waiting_on"] == "codex"


@pytest.mark.parametrize(
    ("monitor_only", "expected"), [(True, "monitor_signal"), (1, "codex"), (False, "codex")]
)
def test_status_waiting_on_takes_monitor_only_only_when_it_is_true(
    monitor_only: object, expected: str
) -> None:
    result = session_runtime_status_waiting_on("whoever", monitor_only=monitor_only)  # type: ignore[arg-type]
    assert result == expected
    assert session_runtime_status_waiting_on("", monitor_only=True) == "monitor_signal"


def test_status_waiting_on_uses_the_given_monitor_word_for_every_monitor_value() -> None:
    for value in ("none", "monitor", "monitor_signal"):
        assert session_runtime_status_waiting_on(value, "watching") == "watching"
    assert session_runtime_status_waiting_on("x", "watching", monitor_only=True) == "watching"
    assert session_runtime_status_waiting_on("agent", "watching", monitor_only=True) == "codex"
    # "codex" is a named value too, not the fallback that monitor_only overrides.
    assert session_runtime_status_waiting_on("codex", "watching", monitor_only=True) == "codex"


def test_raw_material_makes_severity_high_whatever_the_wait() -> None:
    boundary = {"raw_material_detected": True}
    for waiting_on in ("runtime", "none", "agent", "user"):
        item = attention(boundary=boundary, first_screen={"waiting_on": waiting_on})
        assert item["severity"] == "high"
    assert attention(boundary={"raw_material_detected": False})["severity"] == "action"


def test_the_recommended_action_comes_from_the_screen_then_the_run_then_a_default() -> None:
    screen = {"recommended_action": "do the screen thing"}
    projection = {"schema_version": V0, "first_screen": screen}
    run = {"session_runtime_projection": projection, "recommended_action": "do the run thing"}
    item = session_runtime_projection_attention(run)
    assert item is not None and item["recommended_action"] == "do the screen thing"
    run["session_runtime_projection"] = {"schema_version": V0}
    item = session_runtime_projection_attention(run)
    assert item is not None and item["recommended_action"] == "do the run thing"
    run["recommended_action"] = "r" * 221  # the run's text is capped like an attention text
    item = session_runtime_projection_attention(run)
    assert item is not None and item["recommended_action"] == "r" * 219 + "..."
    run["recommended_action"] = "edit /Users/alice/notes.txt"  # withheld, not copied
    item = session_runtime_projection_attention(run)
    assert item is not None
    assert item["recommended_action"] == (
        "inspect the session-runtime projection and choose the next safe action"
    )


def test_the_attention_item_carries_the_compact_projection_twice_as_separate_copies() -> None:
    item = attention(goal_id="g-1", work_lane_contract={"lane": "blocker"})
    expected = {
        "schema_version": V0,
        "mode": "read_only",
        "goal_id": "g-1",
        "work_lane_contract": {"lane": "blocker"},
    }
    assert item == {
        "source": "session_runtime_projection",
        "status": "session_runtime_blocker",
        "severity": "action",
        "waiting_on": "codex",
        "recommended_action": (
            "inspect the session-runtime projection and choose the next safe action"
        ),
        "session_runtime_projection": expected,
        "project_asset": {"session_runtime_projection": expected},
    }
    assert item["project_asset"]["session_runtime_projection"] is not expected
    assert (
        item["project_asset"]["session_runtime_projection"]
        is not item["session_runtime_projection"]
    )

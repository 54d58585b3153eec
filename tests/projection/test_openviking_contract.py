"""One test per rule of openviking_session_memory_adapter_v0, expected values from its text.

Every expected word, limit and code below is written from the contract
(docs/contracts/openviking-session-memory-adapter-v0.md, section 4 of the reference) or read
from the reference fixture, never imported from the module's tables, so dropping or changing a
table entry fails a test here. The smoke checks the same fixture, but in another process,
where a mutation pass cannot see it.
"""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import pytest

from loopx_chat.session_runtime import (
    assert_valid_openviking_session_memory_adapter,
    build_openviking_session_memory_adapter,
    validate_openviking_session_memory_adapter,
)
from loopx_chat.session_runtime.openviking_contract import private_value_code
from tests.helpers.openviking import SMOKE, build, fixture_adapter

Doc = dict[str, Any]

# ---- The contract's words, as its text states them ------------------------------------

SECTION_FIELDS: dict[str, tuple[str, ...]] = {
    "issue_projection": (
        "provider",
        "repo",
        "issue_number",
        "issue_ref_id",
        "title_summary",
        "issue_body_copied",
        "comment_bodies_copied",
        "provider_payload_copied",
    ),
    "session_projection": (
        "runtime_id",
        "session_refs",
        "latest_event_ref",
        "linked_todo_ids",
        "outcome_refs",
        "raw_trajectory_copied",
        "raw_transcripts_copied",
        "raw_tool_outputs_copied",
    ),
    "memory_projection": (
        "namespace",
        "retrieval_mode",
        "live_retrieval_performed",
        "writeback_performed",
        "query_summary",
        "top_k_preview",
        "candidate_refs",
    ),
    "status_projection": (
        "waiting_on",
        "next_action",
        "user_action_required",
        "agent_can_continue",
        "first_agent_todo",
        "gate_state",
        "quota_state",
        "memory_state",
    ),
    "evidence_projection": (
        "source_refs",
        "validation_refs",
        "raw_trajectories_copied",
        "comment_bodies_copied",
        "raw_tool_outputs_copied",
        "credentials_copied",
        "private_paths_copied",
        "public_safe_summary",
    ),
    "truth_contract": (
        "source_of_truth",
        "adapter_is_writable",
        "live_retrieval_allowed",
        "memory_writeback_allowed",
        "issue_body_read_allowed",
        "comment_body_read_allowed",
        "tool_output_ingest_allowed",
    ),
}
OPTIONAL_FIELDS = {("issue_projection", "title_summary"), ("memory_projection", "query_summary")}
TOP_LEVEL = (
    "schema_version",
    "mode",
    "specializes",
    "goal_id",
    "generated_at",
    "issue_projection",
    "session_projection",
    "memory_projection",
    "retrieval_gates",
    "status_projection",
    "evidence_projection",
    "future_gates",
    "truth_contract",
)
SECTIONS = TOP_LEVEL[5:]
CAPABILITIES = (
    "live_openviking_retrieval",
    "memory_writeback",
    "issue_body_read",
    "comment_body_read",
    "raw_tool_output_ingest",
)
FUTURE = (*CAPABILITIES, "external_issue_comment_or_pr_publish")
SOURCES = (
    "loopx_goal_state",
    "session_runtime_projection",
    "public_issue_metadata",
    "memory_system_refs",
)
# (section path, field, every value the contract allows)
ENUMS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("memory_projection", "retrieval_mode", ("preview_only", "disabled", "future_gated")),
    (
        "status_projection",
        "waiting_on",
        ("none", "user", "controller", "agent", "runtime", "external_evidence"),
    ),
    (
        "status_projection",
        "gate_state",
        ("clear", "user_todo", "operator_gate", "blocked", "deferred", "approved"),
    ),
    (
        "status_projection",
        "quota_state",
        ("eligible", "throttled", "monitor_quiet_skip", "operator_gate", "blocked"),
    ),
    ("status_projection", "memory_state", ("preview_only", "future_gated", "blocked", "disabled")),
)
SOURCE_KINDS = ("prior_issue", "session_outcome", "operator_note", "validation_summary", "unknown")
SCORE_BUCKETS = ("high", "medium", "low", "unknown")


def smoke_inputs() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("_ov_smoke_for_rules", SMOKE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return copy.deepcopy(module.COMPACT_INPUTS)


def problems_of(doc: object) -> list[str]:
    return validate_openviking_session_memory_adapter(doc)


# ---- The reference fixture ------------------------------------------------------------


def test_builder_rebuilds_the_reference_fixture_in_process() -> None:
    # The fixture carries the gate table's authorities and blocked actions word for word.
    assert build_openviking_session_memory_adapter(**smoke_inputs()) == fixture_adapter()


def test_every_section_holds_exactly_the_contract_fields() -> None:
    doc = build()
    assert tuple(doc) == TOP_LEVEL
    for section, fields in SECTION_FIELDS.items():
        assert set(doc[section]) == set(fields), section
    assert doc["schema_version"] == "openviking_session_memory_adapter_v0"
    assert doc["mode"] == "read_only_projection"
    assert doc["specializes"] == "session_runtime_loopx_projection_v0"
    assert doc["future_gates"] == list(FUTURE)
    assert doc["truth_contract"]["source_of_truth"] == list(SOURCES)
    assert [g["capability"] for g in doc["retrieval_gates"]] == list(CAPABILITIES)


@pytest.mark.parametrize(
    ("section", "field"),
    [(s, f) for s, fields in SECTION_FIELDS.items() for f in fields],
)
def test_each_required_field_is_required(section: str, field: str) -> None:
    doc = fixture_adapter()
    del doc[section][field]
    expected = [] if (section, field) in OPTIONAL_FIELDS else [f"missing_field: {section}.{field}"]
    assert problems_of(doc) == expected


@pytest.mark.parametrize("field", ["schema_version", "mode", "specializes", "goal_id"])
def test_each_top_level_field_is_required(field: str) -> None:
    doc = fixture_adapter()
    del doc[field]
    assert problems_of(doc) == [f"missing_field: {field}"]


def test_generated_at_is_optional() -> None:
    doc = fixture_adapter()
    del doc["generated_at"]
    assert problems_of(doc) == []


@pytest.mark.parametrize("section", SECTIONS)
def test_each_section_is_required_and_known(section: str) -> None:
    doc = fixture_adapter()
    del doc[section]
    assert problems_of(doc) == [f"missing_section: {section}"]


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("schema_version", "openviking_session_memory_adapter_v1", "wrong_schema_version"),
        ("mode", "writable_projection", "wrong_mode"),
        ("specializes", "session_runtime_loopx_projection_v1", "wrong_specializes"),
    ],
)
def test_each_constant_is_checked(field: str, value: str, code: str) -> None:
    doc = fixture_adapter()
    doc[field] = value
    assert problems_of(doc) == [f"{code}: {field} (expected {fixture_adapter()[field]})"]


def test_a_candidate_and_a_ref_and_a_gate_hold_exactly_their_fields() -> None:
    doc = fixture_adapter()
    candidate = doc["memory_projection"]["candidate_refs"][0]
    assert set(candidate) == {
        "memory_ref_id",
        "source_kind",
        "score_bucket",
        "summary",
        "raw_memory_copied",
    }
    for field in list(candidate):
        broken = fixture_adapter()
        del broken["memory_projection"]["candidate_refs"][0][field]
        path = f"memory_projection.candidate_refs[0].{field}"
        assert problems_of(broken) == [f"missing_field: {path}"]
    for field in ("capability", "state", "required_authority", "blocks"):
        broken = fixture_adapter()
        del broken["retrieval_gates"][2][field]
        wanted = [f"missing_field: retrieval_gates[2].{field}"]
        if field == "capability":
            wanted.append("missing_gate: retrieval_gates (issue_body_read)")
        assert problems_of(broken) == wanted
    for field in ("kind", "id"):
        broken = fixture_adapter()
        del broken["evidence_projection"]["source_refs"][0][field]
        assert problems_of(broken) == [f"missing_field: evidence_projection.source_refs[0].{field}"]


# ---- Enums --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [(s, f, v) for s, f, values in ENUMS for v in values],
)
def test_each_enum_value_is_accepted(section: str, field: str, value: str) -> None:
    doc = fixture_adapter()
    doc[section][field] = value
    assert problems_of(doc) == []


@pytest.mark.parametrize(("section", "field", "values"), ENUMS)
def test_a_value_outside_each_enum_is_refused(
    section: str, field: str, values: tuple[str, ...]
) -> None:
    doc = fixture_adapter()
    doc[section][field] = "elsewhere"
    assert problems_of(doc) == [
        f"unknown_enum: {section}.{field} (expected one of {', '.join(values)})"
    ]


@pytest.mark.parametrize(
    ("field", "values"), [("source_kind", SOURCE_KINDS), ("score_bucket", SCORE_BUCKETS)]
)
def test_candidate_enums(field: str, values: tuple[str, ...]) -> None:
    for value in values:
        doc = fixture_adapter()
        doc["memory_projection"]["candidate_refs"][0][field] = value
        assert problems_of(doc) == [], value
        # The builder keeps a known value and maps anything else to unknown.
        memory = {"namespace": "ns", "candidate_refs": [{"memory_ref_id": "mem_a", field: value}]}
        assert build(memory=memory)["memory_projection"]["candidate_refs"][0][field] == value
    doc = fixture_adapter()
    doc["memory_projection"]["candidate_refs"][0][field] = "elsewhere"
    path = f"memory_projection.candidate_refs[0].{field}"
    assert problems_of(doc) == [f"unknown_enum: {path} (expected one of {', '.join(values)})"]


def test_gate_states_and_approved_is_refused_in_v0() -> None:
    for state in ("future_gated", "blocked_without_authority"):
        doc = fixture_adapter()
        doc["retrieval_gates"][0]["state"] = state
        assert problems_of(doc) == []
    doc = fixture_adapter()
    doc["retrieval_gates"][0]["state"] = "approved"
    assert problems_of(doc) == [
        "gate_approved_in_v0: retrieval_gates[0].state (needs a live adapter contract)"
    ]
    doc["retrieval_gates"][0]["state"] = "open"
    assert problems_of(doc) == [
        "unknown_enum: retrieval_gates[0].state (expected one of "
        "future_gated, blocked_without_authority, approved)"
    ]


@pytest.mark.parametrize("index", range(len(CAPABILITIES)))
def test_each_gate_capability_is_required_once(index: int) -> None:
    doc = fixture_adapter()
    gone = doc["retrieval_gates"].pop(index)
    assert gone["capability"] == CAPABILITIES[index]
    assert problems_of(doc) == [f"missing_gate: retrieval_gates ({CAPABILITIES[index]})"]
    doc["retrieval_gates"].append(copy.deepcopy(gone))
    doc["retrieval_gates"].append(copy.deepcopy(gone))
    assert problems_of(doc) == [
        f"duplicate_gate: retrieval_gates[5].capability ({CAPABILITIES[index]})"
    ]


def test_a_gate_outside_the_capabilities_is_refused() -> None:
    doc = fixture_adapter()
    doc["retrieval_gates"][0]["capability"] = "external_issue_comment_or_pr_publish"
    assert problems_of(doc) == [
        "unknown_enum: retrieval_gates[0].capability (expected one of "
        + ", ".join(CAPABILITIES)
        + ")",
        "missing_gate: retrieval_gates (live_openviking_retrieval)",
    ]


@pytest.mark.parametrize("capability", FUTURE)
def test_each_future_gate_is_required_once(capability: str) -> None:
    doc = fixture_adapter()
    doc["future_gates"].remove(capability)
    assert problems_of(doc) == [f"missing_future_gate: future_gates ({capability})"]
    doc["future_gates"] += [capability, capability]
    assert problems_of(doc) == [f"duplicate_future_gate: future_gates[6] ({capability})"]


def test_a_future_gate_outside_the_list_is_refused() -> None:
    doc = fixture_adapter()
    doc["future_gates"].append("memory_delete")
    assert problems_of(doc) == [
        "unknown_enum: future_gates[6] (expected one of " + ", ".join(FUTURE) + ")"
    ]


@pytest.mark.parametrize("source", SOURCES)
def test_source_of_truth_needs_all_four(source: str) -> None:
    doc = fixture_adapter()
    doc["truth_contract"]["source_of_truth"].remove(source)
    wanted = [f"invalid_source_of_truth: truth_contract.source_of_truth ({', '.join(SOURCES)})"]
    assert problems_of(doc) == wanted
    doc["truth_contract"]["source_of_truth"].append("elsewhere")
    assert problems_of(doc) == wanted


# ---- Flags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "field"),
    [
        (s, f)
        for s, fields in SECTION_FIELDS.items()
        for f in fields
        if f.endswith(("_copied", "_allowed", "_performed")) or f == "adapter_is_writable"
    ],
)
def test_each_flag_must_be_false(section: str, field: str) -> None:
    doc = fixture_adapter()
    doc[section][field] = True
    assert problems_of(doc) == [f"forbidden_flag_true: {section}.{field} (must be false in v0)"]
    doc[section][field] = "no"
    assert problems_of(doc) == [f"invalid_flag: {section}.{field} (must be false in v0)"]


@pytest.mark.parametrize("name", ["x_copied", "x_allowed", "x_performed", "adapter_is_writable"])
def test_a_flag_name_anywhere_must_be_false(name: str) -> None:
    doc = fixture_adapter()
    doc["memory_projection"]["candidate_refs"][1][name] = True
    path = f"memory_projection.candidate_refs[1].{name}"
    assert problems_of(doc) == [
        f"unknown_field: {path}",
        f"forbidden_flag_true: {path} (must be false in v0)",
    ]


def test_a_flag_like_name_that_is_not_a_flag_is_only_unknown() -> None:
    doc = fixture_adapter()
    doc["memory_projection"]["candidate_refs"][1]["copied_x"] = True
    assert problems_of(doc) == ["unknown_field: memory_projection.candidate_refs[1].copied_x"]


# ---- Limits ---------------------------------------------------------------------------------


def test_id_limit_is_120() -> None:
    doc = fixture_adapter()
    doc["goal_id"] = "g" * 120
    assert problems_of(doc) == []
    doc["goal_id"] = "g"
    assert problems_of(doc) == []
    doc["goal_id"] = "g" * 121
    assert problems_of(doc) == ["invalid_id: goal_id"]
    doc["goal_id"] = ""
    assert problems_of(doc) == ["invalid_id: goal_id"]
    assert build(goal_id="g" * 120)["goal_id"] == "g" * 120


def test_strings_are_capped_at_280() -> None:
    doc = fixture_adapter()
    doc["issue_projection"]["title_summary"] = "t" * 280
    assert problems_of(doc) == []
    doc["issue_projection"]["title_summary"] = "t" * 281
    assert problems_of(doc) == [
        "raw_text: issue_projection.title_summary (multi-line or over-long text)"
    ]


def test_builder_caps_texts_at_180() -> None:
    exact = "w" * 180
    assert build(issue={"repo": "o/r", "issue_number": 7, "title": exact})["issue_projection"][
        "title_summary"
    ] == (exact)
    longer = build(issue={"repo": "o/r", "issue_number": 7, "title": "w" * 181})
    assert longer["issue_projection"]["title_summary"] == "w" * 179 + "..."


def test_generated_at_limit_is_80() -> None:
    doc = fixture_adapter()
    doc["generated_at"] = "2" * 80
    assert problems_of(doc) == []
    doc["generated_at"] = "2"
    assert problems_of(doc) == []
    doc["generated_at"] = "2" * 81
    assert problems_of(doc) == ["invalid_value: generated_at (a short timestamp or null)"]
    doc["generated_at"] = ""
    assert problems_of(doc) == ["invalid_value: generated_at (a short timestamp or null)"]
    assert build(generated_at="2" * 80)["generated_at"] == "2" * 80
    assert build(generated_at="2" * 81)["generated_at"] is None
    assert build(generated_at="2026\n01")["generated_at"] is None


def test_session_lists_are_capped_at_16() -> None:
    sessions = [
        {"session_id": f"s{i}", "todo_id": f"t{i}", "outcome_id": f"o{i}", "run_id": f"r{i}"}
        for i in range(20)
    ]
    doc = build(sessions=sessions)
    session = doc["session_projection"]
    for key, prefix in (("session_refs", "s"), ("linked_todo_ids", "t"), ("outcome_refs", "o")):
        assert session[key] == [f"{prefix}{i}" for i in range(16)], key
    # Runs join the derived source refs (after goal and issue, before the caller's).
    doc = build(sessions=[{"run_id": f"r{i}"} for i in range(20)])
    runs = [r["id"] for r in doc["evidence_projection"]["source_refs"] if r["kind"] == "run"]
    assert runs == [f"r{i}" for i in range(16)]


def test_evidence_refs_are_capped_at_32() -> None:
    refs = [{"kind": "smoke", "id": f"v{i}"} for i in range(40)]
    doc = build(evidence={"source_refs": refs, "validation_refs": refs})
    evidence = doc["evidence_projection"]
    assert len(evidence["validation_refs"]) == 32
    assert evidence["validation_refs"][-1] == {"kind": "smoke", "id": "v31"}
    assert len(evidence["source_refs"]) == 32


def test_candidates_are_capped_at_16() -> None:
    candidates = [{"memory_ref_id": f"mem_{i}"} for i in range(20)]
    doc = build(memory={"namespace": "ns", "candidate_refs": candidates, "top_k_preview": 20})
    kept = doc["memory_projection"]["candidate_refs"]
    assert [c["memory_ref_id"] for c in kept] == [f"mem_{i}" for i in range(16)]


def test_positive_ints() -> None:
    for section, field, code in (
        ("issue_projection", "issue_number", "invalid_issue_number"),
        ("memory_projection", "top_k_preview", "invalid_top_k_preview"),
    ):
        doc = fixture_adapter()
        doc[section][field] = 1
        assert problems_of(doc) == []
        for bad in (0, True):
            doc[section][field] = bad
            assert problems_of(doc) == [f"{code}: {section}.{field} (a positive int)"]


# ---- Defaults, aliases and the memory state ---------------------------------------------------


def test_builder_defaults() -> None:
    doc = build(issue={"issue_number": 3})
    assert doc["issue_projection"]["provider"] == "github"
    assert doc["issue_projection"]["issue_ref_id"] == "github:issue#3"
    assert doc["session_projection"]["runtime_id"] == "session_runtime"
    memory = {"namespace": "ns", "candidate_refs": [{"memory_ref_id": "mem_a"}]}
    candidate = build(memory=memory)["memory_projection"]["candidate_refs"][0]
    assert candidate["summary"] == "summary withheld: missing or not public-safe"
    memory["candidate_refs"] = [{"memory_ref_id": "nomem_a"}]
    assert build(memory=memory)["memory_projection"]["candidate_refs"] == []


@pytest.mark.parametrize(
    ("given", "shown"),
    [("codex", "agent"), ("human", "user"), ("owner", "user"), ("operator", "controller")],
)
def test_waiting_on_aliases(given: str, shown: str) -> None:
    assert build(status={"waiting_on": given})["status_projection"]["waiting_on"] == shown


def test_gate_state_alias() -> None:
    assert build(status={"gate_state": "none"})["status_projection"]["gate_state"] == "clear"


@pytest.mark.parametrize("mode", ["preview_only", "disabled", "future_gated"])
def test_memory_state_follows_the_retrieval_mode(mode: str) -> None:
    doc = build(memory={"namespace": "ns", "retrieval_mode": mode})
    assert doc["status_projection"]["memory_state"] == mode


# ---- Private values and key names in problems ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("see /Users/alice/notes", "private_path"),
        ("see /home/bob/notes", "private_path"),
        ("see /private/var", "private_path"),
        ("see C:\\Users\\carol", "private_path"),
        ("see https://corp-only.example/x", "private_url"),
        ("see http://restricted-host/x", "private_url"),
        ("Bearer abcd1234", "credential_value"),
        ("id AKIAABCDEFGHIJKLMNOP here", "credential_value"),
        ("key sk-abcdefghijkl", "credential_value"),
        # The projection core's wider rules, under their own code.
        ("see /etc/hosts", "unsafe_value"),
        ("-----BEGIN RSA PRIVATE KEY-----", "unsafe_value"),
    ],
)
def test_each_private_pattern_has_its_code(value: str, code: str) -> None:
    assert private_value_code(value) == code
    doc = fixture_adapter()
    doc["issue_projection"]["title_summary"] = value
    assert problems_of(doc) == [f"{code}: issue_projection.title_summary"]


def test_a_public_value_has_no_code() -> None:
    assert private_value_code("a short public summary") is None


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("plain_key", "plain_key"),
        ("k" * 64, "k" * 64),
        ("k" * 65, "<key>"),
        ("has space", "<key>"),
        ("sk-abcdefghijkl", "<key>"),
        (7, "<key>"),
    ],
)
def test_key_names_in_problems(key: object, shown: str) -> None:
    doc: dict[Any, Any] = fixture_adapter()
    doc[key] = "x"
    problems = problems_of(doc)
    assert problems[0] == "unknown_field: " + shown
    if not isinstance(key, str):
        assert problems[1:] == ["invalid_key: <key>"]


# ---- The validator's refusals, one per rule -------------------------------------------------


def with_value(path: tuple[Any, ...], value: Any) -> Doc:
    doc = fixture_adapter()
    target: Any = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        # ids, nullable or not
        (
            ("issue_projection", "issue_ref_id"),
            "has space",
            ["invalid_id: issue_projection.issue_ref_id"],
        ),
        (("session_projection", "runtime_id"), None, ["invalid_id: session_projection.runtime_id"]),
        (("session_projection", "latest_event_ref"), None, []),
        (
            ("session_projection", "latest_event_ref"),
            "a b",
            ["invalid_id: session_projection.latest_event_ref"],
        ),
        (("memory_projection", "namespace"), 5, ["invalid_id: memory_projection.namespace"]),
        (
            ("evidence_projection", "source_refs", 0, "id"),
            "a b",
            ["invalid_id: evidence_projection.source_refs[0].id"],
        ),
        # texts, nullable or not
        (("issue_projection", "title_summary"), None, []),
        (
            ("issue_projection", "title_summary"),
            " ",
            ["invalid_text: issue_projection.title_summary"],
        ),
        (("memory_projection", "query_summary"), None, []),
        (
            ("memory_projection", "query_summary"),
            5,
            ["invalid_text: memory_projection.query_summary"],
        ),
        (("status_projection", "first_agent_todo"), None, []),
        (
            ("status_projection", "first_agent_todo"),
            "",
            ["invalid_text: status_projection.first_agent_todo"],
        ),
        (
            ("status_projection", "next_action"),
            None,
            ["invalid_text: status_projection.next_action"],
        ),
        (("evidence_projection", "public_safe_summary"), None, []),
        (
            ("evidence_projection", "public_safe_summary"),
            "",
            ["invalid_text: evidence_projection.public_safe_summary"],
        ),
        (
            ("memory_projection", "candidate_refs", 0, "summary"),
            None,
            ["invalid_text: memory_projection.candidate_refs[0].summary"],
        ),
        (
            ("retrieval_gates", 1, "required_authority"),
            "",
            ["invalid_text: retrieval_gates[1].required_authority"],
        ),
        (("retrieval_gates", 1, "blocks"), 3, ["invalid_text: retrieval_gates[1].blocks"]),
        # booleans and the status rule
        (
            ("status_projection", "user_action_required"),
            "no",
            ["invalid_boolean: status_projection.user_action_required"],
        ),
        (
            ("status_projection", "agent_can_continue"),
            0,
            ["invalid_boolean: status_projection.agent_can_continue"],
        ),
        (
            ("status_projection", "user_action_required"),
            True,
            [
                "inconsistent_status: status_projection"
                " (agent_can_continue while user action is required)"
            ],
        ),
        # id lists
        (
            ("session_projection", "session_refs"),
            "s1",
            ["invalid_ref_list: session_projection.session_refs"],
        ),
        (
            ("session_projection", "linked_todo_ids"),
            ["t1", "t 2"],
            ["invalid_ref_list: session_projection.linked_todo_ids"],
        ),
        (
            ("session_projection", "outcome_refs"),
            [5],
            ["invalid_ref_list: session_projection.outcome_refs"],
        ),
        # issue values
        (
            ("issue_projection", "provider"),
            "Git Hub",
            ["invalid_value: issue_projection.provider (a compact provider label)"],
        ),
        (
            ("issue_projection", "provider"),
            5,
            ["invalid_value: issue_projection.provider (a compact provider label)"],
        ),
        (("issue_projection", "repo"), None, []),
        (
            ("issue_projection", "repo"),
            "noslash",
            ["invalid_value: issue_projection.repo (owner/name slug or null)"],
        ),
        (
            ("issue_projection", "repo"),
            5,
            ["invalid_value: issue_projection.repo (owner/name slug or null)"],
        ),
        # candidates
        (
            ("memory_projection", "candidate_refs"),
            {},
            ["invalid_section: memory_projection.candidate_refs"],
        ),
        (
            ("memory_projection", "candidate_refs", 0),
            "mem_a",
            ["invalid_section: memory_projection.candidate_refs[0]"],
        ),
        (
            ("memory_projection", "candidate_refs", 0, "memory_ref_id"),
            "ref_a",
            [
                "invalid_memory_ref_id: memory_projection.candidate_refs[0].memory_ref_id"
                " (needs the mem_ prefix)"
            ],
        ),
        (
            ("memory_projection", "candidate_refs", 0, "memory_ref_id"),
            "mem_ a",
            [
                "invalid_memory_ref_id: memory_projection.candidate_refs[0].memory_ref_id"
                " (needs the mem_ prefix)"
            ],
        ),
        # refs
        (
            ("evidence_projection", "source_refs"),
            {},
            ["invalid_ref_list: evidence_projection.source_refs"],
        ),
        (
            ("evidence_projection", "validation_refs"),
            "v",
            ["invalid_ref_list: evidence_projection.validation_refs"],
        ),
        (
            ("evidence_projection", "validation_refs"),
            ["v"],
            ["invalid_ref_list: evidence_projection.validation_refs[0]"],
        ),
        (
            ("evidence_projection", "source_refs", 0, "kind"),
            "Bad-Kind",
            ["invalid_value: evidence_projection.source_refs[0].kind (a compact ref kind)"],
        ),
        (
            ("evidence_projection", "source_refs", 0, "kind"),
            5,
            ["invalid_value: evidence_projection.source_refs[0].kind (a compact ref kind)"],
        ),
        # sections of the wrong type
        (("issue_projection",), [], ["invalid_section: issue_projection"]),
        (("retrieval_gates",), {}, ["invalid_section: retrieval_gates"]),
        (("future_gates",), "all", ["invalid_section: future_gates"]),
        (("truth_contract",), None, ["invalid_section: truth_contract"]),
        # generated_at
        (("generated_at",), None, []),
        (("generated_at",), 5, ["invalid_value: generated_at (a short timestamp or null)"]),
        # strings anywhere
        (
            ("issue_projection", "title_summary"),
            "a\nb",
            ["raw_text: issue_projection.title_summary (multi-line or over-long text)"],
        ),
        (
            ("memory_projection", "top_k_preview"),
            1.5,
            [
                "invalid_top_k_preview: memory_projection.top_k_preview (a positive int)",
                "invalid_value: memory_projection.top_k_preview (no floats in v0)",
            ],
        ),
    ],
)
def test_validator_refuses_with_its_code(
    path: tuple[Any, ...], value: Any, expected: list[str]
) -> None:
    assert problems_of(with_value(path, value)) == expected


@pytest.mark.parametrize("value", ["mem_a", {"mem_a": 1}])
def test_candidate_refs_that_are_not_a_list_are_not_read(value: object) -> None:
    doc = with_value(("memory_projection", "candidate_refs"), value)
    assert problems_of(doc) == ["invalid_section: memory_projection.candidate_refs"]


def test_an_unknown_future_gate_twice_is_not_a_duplicate() -> None:
    doc = fixture_adapter()
    doc["future_gates"] += ["memory_delete", "memory_delete"]
    expected = "(expected one of " + ", ".join(FUTURE) + ")"
    assert problems_of(doc) == [
        f"unknown_enum: future_gates[6] {expected}",
        f"unknown_enum: future_gates[7] {expected}",
    ]


def test_a_gate_that_is_not_an_object() -> None:
    doc = with_value(("retrieval_gates", 0), "live_openviking_retrieval")
    assert problems_of(doc) == [
        "invalid_section: retrieval_gates[0]",
        "missing_gate: retrieval_gates (live_openviking_retrieval)",
    ]


def test_two_gates_outside_the_capabilities_are_not_duplicates() -> None:
    doc = fixture_adapter()
    doc["retrieval_gates"] += [copy.deepcopy(doc["retrieval_gates"][0]) for _ in range(2)]
    for gate in doc["retrieval_gates"][5:]:
        gate["capability"] = "elsewhere"
    expected = "(expected one of " + ", ".join(CAPABILITIES) + ")"
    assert problems_of(doc) == [
        f"unknown_enum: retrieval_gates[5].capability {expected}",
        f"unknown_enum: retrieval_gates[6].capability {expected}",
    ]


@pytest.mark.parametrize(
    "sources",
    [
        [*SOURCES, SOURCES[0]],
        [SOURCES[0], *SOURCES[:3]],
        [["loopx_goal_state"], *SOURCES[1:]],
        "loopx_goal_state",
    ],
)
def test_source_of_truth_is_exactly_the_four(sources: Any) -> None:
    doc = with_value(("truth_contract", "source_of_truth"), sources)
    assert problems_of(doc) == [
        f"invalid_source_of_truth: truth_contract.source_of_truth ({', '.join(SOURCES)})"
    ]


@pytest.mark.parametrize(
    ("section", "key", "category"),
    [
        ("issue_projection", "body", "transcript"),
        ("session_projection", "tool_output", "raw_output"),
        (None, "api_key", "credential"),
    ],
)
def test_an_unknown_raw_key_is_named_raw(section: str | None, key: str, category: str) -> None:
    doc = fixture_adapter()
    (doc[section] if section else doc)[key] = "x"
    path = f"{section}.{key}" if section else key
    assert problems_of(doc) == [f"raw_material_key: {path} ({category})"]


def test_a_problem_is_listed_once() -> None:
    doc: dict[Any, Any] = fixture_adapter()
    doc["sk-aaaaaaaaaaaaaaa1"] = "x"
    doc["sk-bbbbbbbbbbbbbbb2"] = "x"
    assert problems_of(doc) == ["unknown_field: <key>"]


def test_strings_inside_a_tuple_are_scanned() -> None:
    doc = fixture_adapter()
    doc["extra"] = ("see /Users/alice/x",)
    assert problems_of(doc) == ["unknown_field: extra", "private_path: extra[0]"]


def test_a_non_object_and_the_raising_form() -> None:
    assert problems_of([]) == ["not_an_object: <document>"]
    assert problems_of("doc") == ["not_an_object: <document>"]
    doc = with_value(("goal_id",), "a b")
    with pytest.raises(ValueError) as raised:
        assert_valid_openviking_session_memory_adapter(doc)
    assert str(raised.value) == "invalid openviking_session_memory_adapter_v0: invalid_id: goal_id"
    doc["mode"] = "other"
    with pytest.raises(ValueError) as raised:
        assert_valid_openviking_session_memory_adapter(doc)
    assert str(raised.value) == (
        "invalid openviking_session_memory_adapter_v0: "
        "wrong_mode: mode (expected read_only_projection); invalid_id: goal_id"
    )
    assert_valid_openviking_session_memory_adapter(fixture_adapter())  # does not raise

"""The OpenViking session-memory adapter: contract rules, builder, fixture and smoke."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopx_chat.session_runtime import (
    OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
    KeyState,
    assert_valid_openviking_session_memory_adapter,
    build_openviking_session_memory_adapter,
    classify_session_runtime_key,
    validate_openviking_session_memory_adapter,
)
from loopx_chat.session_runtime import openviking as ov
from tests.helpers.openviking import FIXTURE, SMOKE, fixture_adapter
from tests.helpers.paths import ROOT

OK_LINE = "openviking-session-memory-adapter-smoke ok"

Doc = dict[str, Any]


def compact_inputs() -> dict[str, Any]:
    return {
        "goal_id": "goal-ov",
        "issue": {"provider": "github", "repo": "OpenViking/Viking", "issue_number": 2792},
        "sessions": [
            {
                "session_id": "sess_a",
                "runtime_id": "codex_app_server",
                "latest_event_ref": "evt_old",
                "todo_id": "todo_a",
                "run_id": "run_a",
                "updated_at": "2026-01-01T00:00:00Z",
            },
            {
                "session_id": "sess_b",
                "latest_event_ref": "evt_new",
                "linked_todo_ids": ["todo_b", "todo_a"],
                "outcome_refs": ["out_b"],
                "updated_at": "2026-01-02T00:00:00Z",
            },
        ],
        "memory": {
            "namespace": "openviking_issue_fix_public_preview",
            "candidate_refs": [
                {
                    "memory_ref_id": "mem_one",
                    "source_kind": "prior_issue",
                    "score_bucket": "high",
                    "summary": "a prior public fix",
                },
                {"memory_ref_id": "mem_two", "source_kind": "chat", "score_bucket": "top"},
            ],
        },
        "status": {"first_agent_todo": "reproduce the bug with a public test"},
        "evidence": {"validation_refs": [{"kind": "smoke", "id": "smoke_1"}]},
    }


def build(**overrides: Any) -> Doc:
    inputs = compact_inputs()
    inputs.update(overrides)
    return build_openviking_session_memory_adapter(**inputs)


def codes(problems: list[str]) -> set[str]:
    return {problem.split(":", 1)[0] for problem in problems}


# ---- The valid documents ------------------------------------------------------------------


def test_fixture_adapter_is_valid() -> None:
    adapter = fixture_adapter()
    assert validate_openviking_session_memory_adapter(adapter) == []
    assert_valid_openviking_session_memory_adapter(adapter)  # does not raise


def test_fixture_facts_of_section_4() -> None:
    payload = json.loads(FIXTURE.read_text(encoding="utf-8"))
    item = payload["attention_queue"]["items"][0]
    adapter = item["openviking_session_memory_adapter"]
    assert (item["waiting_on"], item["severity"], item["goal_id"]) == (
        "codex",
        "action",
        "loopx-meta",
    )
    assert adapter["issue_projection"]["repo"] == "OpenViking/Viking"
    assert adapter["issue_projection"]["issue_number"] == 2792
    assert adapter["memory_projection"]["namespace"] == "openviking_issue_fix_public_preview"
    status = adapter["status_projection"]
    assert status["waiting_on"] == "agent"
    assert status["user_action_required"] is False
    assert status["agent_can_continue"] is True
    assert status["memory_state"] == "preview_only"
    refs = adapter["memory_projection"]["candidate_refs"]
    assert len(refs) >= 2 and all(r["memory_ref_id"].startswith("mem_") for r in refs)


def test_builder_output_validates_and_has_the_v0_gates() -> None:
    doc = build()
    assert validate_openviking_session_memory_adapter(doc) == []
    assert doc["schema_version"] == OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION
    assert doc["mode"] == "read_only_projection"
    assert doc["specializes"] == "session_runtime_loopx_projection_v0"
    states = {g["capability"]: g["state"] for g in doc["retrieval_gates"]}
    assert states == {
        "live_openviking_retrieval": "future_gated",
        "memory_writeback": "future_gated",
        "issue_body_read": "blocked_without_authority",
        "comment_body_read": "blocked_without_authority",
        "raw_tool_output_ingest": "blocked_without_authority",
    }
    assert doc["future_gates"] == [*states, "external_issue_comment_or_pr_publish"]
    truth = doc["truth_contract"]
    assert all(truth[flag] is False for flag in ov.TRUTH_FLAGS)


def test_builder_every_flag_is_false() -> None:
    flags: list[object] = []
    stack: list[object] = [build()]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key.endswith(("_copied", "_allowed", "_performed")):
                    flags.append(value)
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    assert len(flags) >= 20
    assert set(flags) == {False}


def test_builder_derivation_rules() -> None:
    doc = build()
    issue = doc["issue_projection"]
    assert issue["issue_ref_id"] == "github:OpenViking/Viking#2792"
    session = doc["session_projection"]
    assert session["runtime_id"] == "codex_app_server"
    assert session["session_refs"] == ["sess_a", "sess_b"]
    assert session["latest_event_ref"] == "evt_new"  # the later timestamp wins
    assert session["linked_todo_ids"] == ["todo_a", "todo_b"]
    assert session["outcome_refs"] == ["out_b"]
    memory = doc["memory_projection"]
    assert memory["retrieval_mode"] == "preview_only"
    assert memory["top_k_preview"] == 2
    second = memory["candidate_refs"][1]
    assert (second["source_kind"], second["score_bucket"]) == ("unknown", "unknown")
    assert second["summary"] == ov.WITHHELD_SUMMARY
    status = doc["status_projection"]
    assert status["waiting_on"] == "agent"
    assert status["agent_can_continue"] is True
    assert status["next_action"] == "reproduce the bug with a public test"
    assert (status["gate_state"], status["quota_state"], status["memory_state"]) == (
        "clear",
        "eligible",
        "preview_only",
    )
    kinds = {(r["kind"], r["id"]) for r in doc["evidence_projection"]["source_refs"]}
    assert {("goal", "goal-ov"), ("run", "run_a"), ("memory", "mem_two")} <= kinds
    assert doc["generated_at"] is None


def test_builder_caps_candidates_at_top_k_and_drops_unjoinable_refs() -> None:
    memory = compact_inputs()["memory"]
    memory["top_k_preview"] = 1
    memory["candidate_refs"].insert(0, {"memory_ref_id": "ref_without_prefix", "summary": "x"})
    doc = build(memory=memory)
    refs = doc["memory_projection"]["candidate_refs"]
    assert [r["memory_ref_id"] for r in refs] == ["mem_one"]
    assert doc["memory_projection"]["top_k_preview"] == 1


def test_builder_status_aliases_and_user_gate() -> None:
    doc = build(status={"waiting_on": "codex", "gate_state": "none"})
    assert doc["status_projection"]["waiting_on"] == "agent"
    assert doc["status_projection"]["gate_state"] == "clear"
    gated = build(
        status={"user_action_required": True, "agent_can_continue": True, "first_agent_todo": "x"}
    )
    status = gated["status_projection"]
    assert (status["waiting_on"], status["agent_can_continue"], status["gate_state"]) == (
        "user",
        False,
        "user_todo",
    )


def test_builder_never_mutates_its_inputs() -> None:
    inputs = compact_inputs()
    inputs["issue"]["body"] = "CANARY-body"
    before = copy.deepcopy(inputs)
    build_openviking_session_memory_adapter(**inputs)
    assert inputs == before


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"issue": {"repo": "OpenViking/Viking"}}, "invalid_issue_number"),
        ({"memory": {"namespace": "ns", "retrieval_mode": "CANARY-live-now"}}, "unknown_enum"),
        ({"memory": {"retrieval_mode": "preview_only"}}, "invalid_id"),
        ({"status": {"waiting_on": "CANARY-somebody"}}, "unknown_enum"),
    ],
)
def test_builder_raises_value_error_without_quoting_values(
    overrides: dict[str, Any], code: str
) -> None:
    with pytest.raises(ValueError) as raised:
        build(**overrides)
    message = str(raised.value)
    assert code in message
    assert "CANARY" not in message


# ---- Raw input never reaches the output ---------------------------------------------------

RAW_INPUT_CASES = [
    ("issue", "body"),
    ("issue", "comment_body"),
    ("issue", "messages"),
    ("memory", "raw_memory"),
    ("memory", "api_key"),
    ("status", "transcript"),
    ("status", "prompt"),
    ("evidence", "tool_output"),
    ("evidence", "log_path"),
    ("evidence", "stdout"),
]


@pytest.mark.parametrize(("section", "key"), RAW_INPUT_CASES)
def test_raw_input_keys_never_reach_the_output(section: str, key: str) -> None:
    marker = f"CANARY-{section}-{key}-6d2e"
    inputs = compact_inputs()
    inputs[section][key] = marker
    doc = build_openviking_session_memory_adapter(**inputs)
    assert validate_openviking_session_memory_adapter(doc) == []
    assert marker not in json.dumps(doc)
    if classify_session_runtime_key(key).state is KeyState.RAW_MATERIAL:
        # The base projection's rule: raw input stops the agent, not who it waits on.
        assert doc["status_projection"]["agent_can_continue"] is False
        assert doc["status_projection"]["waiting_on"] == "agent"
        assert doc["status_projection"]["next_action"] == ov.RECOMMEND_WITHOUT_RAW


def test_raw_keys_inside_sessions_candidates_and_refs_are_dropped() -> None:
    inputs = compact_inputs()
    inputs["sessions"][0]["raw_trajectory"] = "CANARY-trajectory-1"
    inputs["memory"]["candidate_refs"][0]["content"] = "CANARY-memory-body-2"
    inputs["evidence"]["validation_refs"][0]["stderr"] = "CANARY-stderr-3"
    doc = build_openviking_session_memory_adapter(**inputs)
    text = json.dumps(doc)
    assert "CANARY" not in text
    assert doc["status_projection"]["agent_can_continue"] is False


def test_unknown_input_keys_are_not_read() -> None:
    inputs = compact_inputs()
    inputs["issue"]["comments"] = ["CANARY-comment-thread"]
    inputs["sessions"][0]["trajectory_lines"] = ["CANARY-trajectory-lines"]
    doc = build_openviking_session_memory_adapter(**inputs)
    assert "CANARY" not in json.dumps(doc)
    # Unclassified keys are ignored, not treated as raw: the agent may still continue.
    assert doc["status_projection"]["agent_can_continue"] is True


@pytest.mark.parametrize(
    "value",
    [
        "see /Users/alice/CANARY-notes/fix.md",
        "see /home/bob/CANARY-work/",
        "Bearer CANARYtokenvalue123",
        "key AKIACANARY0000000000",
        "sk-CANARYsecretvalue0001",
        "https://corp-only.example/CANARY",
    ],
)
def test_unsafe_values_under_read_keys_are_dropped(value: str) -> None:
    issue = {**compact_inputs()["issue"], "title_summary": value}
    memory = compact_inputs()["memory"]
    memory["candidate_refs"][0]["summary"] = value
    doc = build(issue=issue, memory=memory)
    assert "CANARY" not in json.dumps(doc)
    assert doc["issue_projection"]["title_summary"] is None


def test_allowlisted_input_keys_are_never_raw() -> None:
    read_keys = [
        "provider",
        "repo",
        "issue_number",
        "issue_ref_id",
        "title_summary",
        "title",
        "session_id",
        "session_ref",
        "runtime_id",
        "latest_event_ref",
        "event_id",
        "todo_id",
        "linked_todo_ids",
        "todo_ids",
        "outcome_id",
        "outcome_ref",
        "outcome_refs",
        "run_id",
        "run_ids",
        "namespace",
        "retrieval_mode",
        "query_summary",
        "top_k_preview",
        "candidate_refs",
        "candidates",
        "memory_ref_id",
        "source_kind",
        "score_bucket",
        "summary",
        "waiting_on",
        "next_action",
        "user_action_required",
        "agent_can_continue",
        "first_agent_todo",
        "gate_state",
        "quota_state",
        "memory_state",
        "source_refs",
        "validation_refs",
        "public_safe_summary",
        "kind",
        "id",
    ]
    raw = [k for k in read_keys if classify_session_runtime_key(k).state is KeyState.RAW_MATERIAL]
    assert raw == []


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=40)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    extra=st.dictionaries(st.text(max_size=16), json_values, max_size=5),
    section=st.sampled_from(["issue", "memory", "status", "evidence"]),
    raw_key=st.sampled_from([k for _, k in RAW_INPUT_CASES]),
)
def test_builder_on_arbitrary_input_returns_valid_or_raises_value_error(
    extra: dict[str, Any], section: str, raw_key: str
) -> None:
    inputs = compact_inputs()
    inputs[section].update(extra)
    inputs[section][raw_key] = "CANARY-raw-value-31f7"
    try:
        doc = build_openviking_session_memory_adapter(**inputs)
    except ValueError as error:
        assert "CANARY-raw-value-31f7" not in str(error)
        return
    assert validate_openviking_session_memory_adapter(doc) == []
    assert "CANARY-raw-value-31f7" not in json.dumps(doc)


def fed_back(doc: Doc) -> Doc:
    """The adapter's own sections given back to the builder as its inputs."""
    return build_openviking_session_memory_adapter(
        goal_id=doc["goal_id"],
        issue=doc["issue_projection"],
        sessions=[doc["session_projection"]],
        memory=doc["memory_projection"],
        status=doc["status_projection"],
        evidence=doc["evidence_projection"],
        generated_at=doc["generated_at"],
    )


def test_its_own_output_fed_back_is_not_raw_material_and_builds_the_same_adapter() -> None:
    """`raw_memory_copied: false`, `raw_transcripts_copied: false` and the other flags are
    the contract's own promises, not raw material: the agent may still continue."""
    doc = build(generated_at="2026-11-29T00:00:00Z")
    assert doc["memory_projection"]["candidate_refs"][0]["raw_memory_copied"] is False
    assert doc["status_projection"]["agent_can_continue"] is True
    again = fed_back(doc)
    assert again["status_projection"]["next_action"] != ov.RECOMMEND_WITHOUT_RAW
    assert again == doc
    assert fed_back(again) == doc


@pytest.mark.parametrize("value", [True, "yes", None, 0])
def test_a_flag_that_is_not_false_is_treated_as_raw(value: object) -> None:
    inputs = compact_inputs()
    inputs["memory"]["candidate_refs"][0]["raw_memory_copied"] = value
    doc = build_openviking_session_memory_adapter(**inputs)
    assert doc["status_projection"]["agent_can_continue"] is False
    assert doc["status_projection"]["next_action"] == ov.RECOMMEND_WITHOUT_RAW
    assert doc["memory_projection"]["candidate_refs"][0]["raw_memory_copied"] is False


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    extra=st.dictionaries(st.text(max_size=16), json_values, max_size=5),
    section=st.sampled_from(["issue", "memory", "status", "evidence"]),
)
def test_any_adapter_fed_back_builds_itself(extra: dict[str, Any], section: str) -> None:
    inputs = compact_inputs()
    inputs[section].update(extra)
    try:
        doc = build_openviking_session_memory_adapter(**inputs)
    except ValueError:
        return
    assert fed_back(doc) == doc


# ---- Every rejection rule -----------------------------------------------------------------

Mutation = Callable[[Doc], None]


def setter(path: str, value: object) -> Mutation:
    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def deleter(path: str) -> Mutation:
    def mutate(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]

    return mutate


def drop_gate(capability: str) -> Mutation:
    def mutate(doc: Doc) -> None:
        doc["retrieval_gates"] = [
            g for g in doc["retrieval_gates"] if g["capability"] != capability
        ]

    return mutate


def duplicate_first_gate(doc: Doc) -> None:
    doc["retrieval_gates"].append(copy.deepcopy(doc["retrieval_gates"][0]))


def drop_future_gate(doc: Doc) -> None:
    doc["future_gates"].remove("external_issue_comment_or_pr_publish")


REJECTIONS: list[tuple[str, Mutation, str]] = [
    # copied issue and comment bodies
    ("issue body flag", setter("issue_projection.issue_body_copied", True), "forbidden_flag_true"),
    ("issue body field", setter("issue_projection.body", "x"), "raw_material_key"),
    (
        "comment bodies flag",
        setter("issue_projection.comment_bodies_copied", True),
        "forbidden_flag_true",
    ),
    ("comment bodies field", setter("issue_projection.comment_bodies", ["x"]), "unknown_field"),
    (
        "evidence comment bodies flag",
        setter("evidence_projection.comment_bodies_copied", True),
        "forbidden_flag_true",
    ),
    (
        "provider payload flag",
        setter("issue_projection.provider_payload_copied", True),
        "forbidden_flag_true",
    ),
    # raw trajectories and raw tool output
    (
        "raw trajectory flag",
        setter("session_projection.raw_trajectory_copied", True),
        "forbidden_flag_true",
    ),
    (
        "raw trajectory field",
        setter("session_projection.raw_trajectory", ["x"]),
        "raw_material_key",
    ),
    ("transcript field", setter("session_projection.transcript", "x"), "raw_material_key"),
    ("tool output field", setter("session_projection.tool_output", "x"), "raw_material_key"),
    (
        "tool outputs flag",
        setter("evidence_projection.raw_tool_outputs_copied", True),
        "forbidden_flag_true",
    ),
    ("multi-line text", setter("issue_projection.title_summary", "line one\nline two"), "raw_text"),
    ("over-long text", setter("evidence_projection.public_safe_summary", "x" * 281), "raw_text"),
    # credentials
    ("credential key", setter("memory_projection.api_key", "x"), "raw_material_key"),
    (
        "bearer token",
        setter("issue_projection.title_summary", "use Bearer abcdEFGH12345678"),
        "credential_value",
    ),
    (
        "aws key id",
        setter("status_projection.next_action", "AKIAABCDEFGHIJKLMNOP"),
        "credential_value",
    ),
    (
        "sk key",
        setter("memory_projection.query_summary", "key sk-abcdefghijklmnop1234"),
        "credential_value",
    ),
    (
        "private key block",
        setter("memory_projection.query_summary", "-----BEGIN RSA PRIVATE KEY-----"),
        "unsafe_value",
    ),
    # private paths and links
    ("users path", setter("issue_projection.title_summary", "/Users/alice/notes"), "private_path"),
    ("home path", setter("session_projection.runtime_id", "/home/bob/x"), "private_path"),
    (
        "private mount",
        setter("memory_projection.candidate_refs.0.summary", "from /private/tmp"),
        "private_path",
    ),
    (
        "windows users path",
        setter("issue_projection.title_summary", "C:\\Users\\carol\\x"),
        "private_path",
    ),
    (
        "corp-only link",
        setter("evidence_projection.public_safe_summary", "see https://corp-only.example/x"),
        "private_url",
    ),
    (
        "restricted-host link",
        setter("status_projection.next_action", "open http://restricted-host/x"),
        "private_url",
    ),
    ("tilde path", setter("status_projection.next_action", "edit ~/notes.md"), "unsafe_value"),
    # flags, searched recursively
    (
        "candidate raw memory flag",
        setter("memory_projection.candidate_refs.0.raw_memory_copied", True),
        "forbidden_flag_true",
    ),
    (
        "live retrieval performed",
        setter("memory_projection.live_retrieval_performed", True),
        "forbidden_flag_true",
    ),
    (
        "memory writeback performed",
        setter("memory_projection.writeback_performed", True),
        "forbidden_flag_true",
    ),
    (
        "live retrieval allowed",
        setter("truth_contract.live_retrieval_allowed", True),
        "forbidden_flag_true",
    ),
    ("adapter writable", setter("truth_contract.adapter_is_writable", True), "forbidden_flag_true"),
    (
        "nested unknown flag",
        setter("evidence_projection.source_refs.0.extra_copied", True),
        "forbidden_flag_true",
    ),
    ("string flag", setter("evidence_projection.credentials_copied", "false"), "invalid_flag"),
    # enums
    ("retrieval mode", setter("memory_projection.retrieval_mode", "live"), "unknown_enum"),
    (
        "source kind",
        setter("memory_projection.candidate_refs.0.source_kind", "chat"),
        "unknown_enum",
    ),
    (
        "score bucket",
        setter("memory_projection.candidate_refs.0.score_bucket", "top"),
        "unknown_enum",
    ),
    ("capability", setter("retrieval_gates.0.capability", "shell_exec"), "unknown_enum"),
    ("gate state", setter("retrieval_gates.1.state", "open"), "unknown_enum"),
    ("memory state", setter("status_projection.memory_state", "live"), "unknown_enum"),
    ("waiting on", setter("status_projection.waiting_on", "codex"), "unknown_enum"),
    ("gate_state", setter("status_projection.gate_state", "pending"), "unknown_enum"),
    ("quota_state", setter("status_projection.quota_state", "unlimited"), "unknown_enum"),
    ("future gate", setter("future_gates.0", "run_shell"), "unknown_enum"),
    ("approved gate", setter("retrieval_gates.0.state", "approved"), "gate_approved_in_v0"),
    ("missing gate", drop_gate("comment_body_read"), "missing_gate"),
    ("duplicate gate", duplicate_first_gate, "duplicate_gate"),
    ("missing future gate", drop_future_gate, "missing_future_gate"),
    # ids and numbers
    (
        "memory ref prefix",
        setter("memory_projection.candidate_refs.0.memory_ref_id", "ref_001"),
        "invalid_memory_ref_id",
    ),
    ("top_k zero", setter("memory_projection.top_k_preview", 0), "invalid_top_k_preview"),
    ("top_k negative", setter("memory_projection.top_k_preview", -3), "invalid_top_k_preview"),
    ("top_k bool", setter("memory_projection.top_k_preview", True), "invalid_top_k_preview"),
    ("top_k string", setter("memory_projection.top_k_preview", "3"), "invalid_top_k_preview"),
    (
        "issue number string",
        setter("issue_projection.issue_number", "2792"),
        "invalid_issue_number",
    ),
    ("issue number float", setter("issue_projection.issue_number", 2792.0), "invalid_issue_number"),
    ("issue number bool", setter("issue_projection.issue_number", True), "invalid_issue_number"),
    ("issue number zero", setter("issue_projection.issue_number", 0), "invalid_issue_number"),
    # constants and shape
    (
        "schema",
        setter("schema_version", "openviking_session_memory_adapter_v1"),
        "wrong_schema_version",
    ),
    ("mode", setter("mode", "read_write"), "wrong_mode"),
    ("specializes", setter("specializes", "something_else_v0"), "wrong_specializes"),
    ("missing field", deleter("issue_projection.repo"), "missing_field"),
    ("invalid section", setter("issue_projection", []), "invalid_section"),
    ("unknown top-level field", setter("raw_memory_dump", {}), "raw_material_key"),
    (
        "source of truth",
        setter("truth_contract.source_of_truth", ["loopx_goal_state"]),
        "invalid_source_of_truth",
    ),
    (
        "inconsistent status",
        setter("status_projection.user_action_required", True),
        "inconsistent_status",
    ),
    ("bad goal id", setter("goal_id", ""), "invalid_id"),
    ("bad ref list", setter("session_projection.session_refs", "sess_a"), "invalid_ref_list"),
]


@pytest.mark.parametrize(
    ("mutate", "code"), [(m, c) for _, m, c in REJECTIONS], ids=[n for n, _, _ in REJECTIONS]
)
def test_validator_rejects(mutate: Mutation, code: str) -> None:
    doc = fixture_adapter()
    assert validate_openviking_session_memory_adapter(doc) == []
    mutate(doc)
    problems = validate_openviking_session_memory_adapter(doc)
    assert code in codes(problems), problems
    with pytest.raises(ValueError, match=code):
        assert_valid_openviking_session_memory_adapter(doc)


@pytest.mark.parametrize("section", ov.SECTIONS)
def test_validator_rejects_a_missing_section(section: str) -> None:
    doc = fixture_adapter()
    del doc[section]
    assert f"missing_section: {section}" in validate_openviking_session_memory_adapter(doc)


@pytest.mark.parametrize("doc", [None, [], "adapter", 3])
def test_validator_rejects_a_non_object(doc: object) -> None:
    assert codes(validate_openviking_session_memory_adapter(doc)) == {"not_an_object"}


def test_validator_never_quotes_values_or_secret_key_names() -> None:
    doc = fixture_adapter()
    doc["issue_projection"]["title_summary"] = "/Users/alice/CANARY-one/"
    doc["memory_projection"]["retrieval_mode"] = "CANARY-two"
    doc["evidence_projection"]["sk-CANARYsecretkeyname00"] = 1
    problems = validate_openviking_session_memory_adapter(doc)
    assert len(problems) >= 3
    assert "CANARY" not in " ".join(problems)


def test_validator_survives_deep_nesting() -> None:
    doc = fixture_adapter()
    nested: Any = True
    for _ in range(5000):
        nested = {"inner": nested}
    doc["evidence_projection"]["deep"] = {"x_copied": nested}
    problems = validate_openviking_session_memory_adapter(doc)
    assert "unknown_field" in codes(problems)


# ---- The smoke ----------------------------------------------------------------------------


def run_smoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SMOKE), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_smoke_prints_the_ok_line() -> None:
    result = run_smoke()
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [OK_LINE]


def sabotaged(tmp_path: Path, edit: Callable[[Doc], None]) -> Path:
    payload = json.loads(FIXTURE.read_text(encoding="utf-8"))
    edit(payload)
    path = tmp_path / "fixture.json"
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path


def adapter_of(payload: Doc) -> Doc:
    return payload["attention_queue"]["items"][0]["openviking_session_memory_adapter"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda p: adapter_of(p)["issue_projection"].update(issue_body_copied=True),
            "forbidden_flag_true: issue_projection.issue_body_copied",
        ),
        (
            lambda p: adapter_of(p)["memory_projection"]["candidate_refs"][0].update(
                memory_ref_id="ref_001"
            ),
            "invalid_memory_ref_id",
        ),
        (lambda p: p.update(note="a raw trajectory line was here"), "forbidden sample strings"),
        (lambda p: p.update(note="copied from /home/dana/work/"), "private_path"),
        (lambda p: p["attention_queue"]["items"][0].update(waiting_on="user"), "item waiting_on"),
        (
            lambda p: adapter_of(p)["memory_projection"]["candidate_refs"].pop(),
            "fixture drifted",
        ),
        (lambda p: p.pop("attention_queue"), "cannot read the fixture"),
    ],
    ids=["flag", "memory ref", "sample string", "private path", "item", "drift", "shape"],
)
def test_smoke_fails_on_a_sabotaged_fixture(
    tmp_path: Path, edit: Callable[[Doc], None], message: str
) -> None:
    result = run_smoke("--fixture", str(sabotaged(tmp_path, edit)))
    assert result.returncode == 1
    assert OK_LINE not in result.stdout
    assert message in result.stderr


def test_smoke_fails_on_a_missing_fixture(tmp_path: Path) -> None:
    result = run_smoke("--fixture", str(tmp_path / "absent.json"))
    assert result.returncode == 1
    assert OK_LINE not in result.stdout

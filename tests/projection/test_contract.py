"""The public contract `session_runtime_readonly_projection_v0`: the public fixture's cases,
the JSON Schema shipped in the package (checked by an independent validator), the spec's own
sample, the canaries (raw values, secret- or path-looking text, source ids never leave), and
agreement with the status row built from the same facts."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from loopx_chat.goals.gate_store import Gate
from loopx_chat.goals.goal_facts import facts_from_records
from loopx_chat.goals.status_row import goal_status
from loopx_chat.session_runtime import build_session_runtime_readonly_contract as build
from loopx_chat.session_runtime._text import LOCAL_PATH_PATTERNS, SECRET_PATTERNS
from loopx_chat.session_runtime.contract import CONTRACT_SCHEMA_FILE
from loopx_chat.state.session_records import SessionRecord

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "session_runtime"
    / "readonly_projection_v0.public.json"
)
CASES = json.loads(FIXTURE.read_text())["cases"]
SCHEMA = json.loads(
    resources.files("loopx_chat.session_runtime").joinpath(CONTRACT_SCHEMA_FILE).read_text()
)
VALIDATOR = Draft202012Validator(SCHEMA)

# The spec's "First Public Contract", as the spec prints it.
SPEC_SAMPLE = {
    "schema_version": "session_runtime_readonly_projection_v0",
    "source": {"host_kind": "session_runtime", "source_ids_redacted": True},
    "session_facts": {
        "session_count": 1,
        "latest_event_at": "2026-01-01T00:00:00Z",
        "outcome_status": "blocked",
        "approval_state": "none",
        "raw_transcript_copied": False,
    },
    "goal_projection": {
        "waiting_on": "codex",
        "next_action": "write compact blocker or continue approved handoff",
        "first_user_todo": None,
        "first_agent_todo": "advance one bounded segment",
        "latest_validation": "compact validation summary",
    },
}


def valid(doc: dict[str, Any]) -> dict[str, Any]:
    errors = [e.message for e in VALIDATOR.iter_errors(doc)]
    assert errors == [], errors
    return doc


def test_the_shipped_schema_is_a_valid_2020_12_schema_and_takes_the_specs_sample() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    valid(SPEC_SAMPLE)
    assert SCHEMA["properties"]["schema_version"]["const"] == SPEC_SAMPLE["schema_version"]


def test_the_schemas_closed_sets_are_the_builders() -> None:
    from loopx_chat.session_runtime import contract

    facts = SCHEMA["properties"]["session_facts"]["properties"]
    goal = SCHEMA["properties"]["goal_projection"]["properties"]
    assert tuple(facts["outcome_status"]["enum"]) == contract.OUTCOME_STATUSES
    assert tuple(facts["approval_state"]["enum"]) == contract.APPROVAL_STATES
    assert tuple(goal["waiting_on"]["enum"]) == contract.WAITING_ON
    assert tuple(goal["gate_state"]["enum"]) == contract.GATE_STATES


@pytest.mark.parametrize(
    "broken",
    [
        {"source": {"host_kind": "session_runtime", "source_ids_redacted": False}},
        {"session_facts": {**SPEC_SAMPLE["session_facts"], "raw_transcript_copied": True}},
        {"session_facts": {**SPEC_SAMPLE["session_facts"], "outcome_status": "exploded"}},
        {"goal_projection": {**SPEC_SAMPLE["goal_projection"], "waiting_on": "agent"}},
        {"goal_projection": {**SPEC_SAMPLE["goal_projection"], "source_refs": {}}},
        {"raw_transcript": "text"},
    ],
)
def test_the_schema_refuses_what_the_contract_must_never_say(broken: dict[str, Any]) -> None:
    assert list(VALIDATOR.iter_errors({**SPEC_SAMPLE, **broken}))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_public_fixture_case_projects_to_its_contract(case: dict[str, Any]) -> None:
    contract = valid(build(**case["input"]))
    assert contract == case["expected"]


def test_the_public_fixture_holds_nothing_private() -> None:
    text = FIXTURE.read_text()
    for pattern in (*LOCAL_PATH_PATTERNS, *SECRET_PATTERNS):
        assert re.search(pattern, text) is None, pattern
    for case in CASES:
        assert "CANARY" not in json.dumps(case["expected"])
    assert any("CANARY" in json.dumps(case["input"]) for case in CASES)


IDS = st.uuids().map(lambda u: f"ID-{u.hex}")
TEXTS = st.sampled_from(
    [
        "advance one bounded segment",
        "Approve the import?",
        "see /Users/someone/private/notes.txt",
        "token=sk-abcdefghijklmnopqrstuvwx",
        "   ",
    ]
)
WORDS = st.sampled_from(["pending", "approved", "rejected", "ok", "failed", "blocked", "open"])
VALUES = st.one_of(
    TEXTS, WORDS, st.integers(-2, 2), st.booleans(), st.none(), st.lists(WORDS, max_size=2)
)
KEYS = st.sampled_from(
    [
        "status",
        "state",
        "actor",
        "kind",
        "blocking",
        "advisory",
        "question",
        "next_action",
        "recommended_action",
        "summary",
        "blocker",
        "validation_summary",
        "created_at",
        "updated_at",
        "requires_human_decision",
    ]
)
ITEM = st.builds(
    lambda fields, ident, raw: {**fields, "session_id": ident, "gate_id": ident, **raw},
    st.dictionaries(KEYS, VALUES, max_size=6),
    IDS,
    st.dictionaries(
        st.sampled_from(["raw_transcript", "api_key", "message", "stdout_tail", "file_path"]),
        st.uuids().map(lambda u: f"CANARY-{u.hex}"),
        max_size=2,
    ),
)
GROUPS = st.fixed_dictionaries(
    {
        name: st.lists(ITEM, max_size=3)
        for name in ("sessions", "events", "outcomes", "gates", "artifacts", "decision_results")
    }
)


@settings(max_examples=200, deadline=None)
@given(groups=GROUPS)
def test_any_input_gives_a_schema_valid_contract_that_carries_no_id_raw_value_or_unsafe_text(
    groups: dict[str, list[dict[str, Any]]],
) -> None:
    contract = valid(build(goal_id="g", **groups))
    text = json.dumps(contract)
    assert "CANARY-" not in text and "ID-" not in text
    assert "/Users/" not in text and "sk-" not in text
    assert contract["source"]["source_ids_redacted"] is True
    assert contract["session_facts"]["session_count"] == len(groups["sessions"])
    if contract["goal_projection"]["agent_can_continue"]:
        assert contract["session_facts"]["approval_state"] != "pending"


def test_the_contract_says_what_the_status_row_of_the_same_facts_says() -> None:
    record = SessionRecord(
        session_id="s1", goal_id="g", created_at="t0", updated_at="t0", codex_home="/h"
    )
    gate = Gate("gate-1", "g", "Merge now?", "owner", True, "pending", "t1", "t1")
    for gates in ([], [gate]):
        facts = facts_from_records(
            "g", sessions=[record], turns=[], gates=gates, handoffs=[], codex_home="/h"
        )
        row = goal_status(facts)
        contract = valid(build(**facts.builder_kwargs()))
        assert contract["goal_projection"]["waiting_on"] == row["waiting_on"]
        assert contract["goal_projection"]["next_action"] == row["recommended_action"]
        first = row["projection"]["first_screen"]
        assert contract["goal_projection"]["first_user_todo"] == first.get("first_user_todo")
        assert contract["session_facts"]["approval_state"] == ("pending" if gates else "none")


def test_source_ids_in_texts_are_redacted_whole_and_only_whole() -> None:
    contract = build(
        goal_id="g",
        outcomes=[
            {
                "outcome_id": "7f3a9c01",
                "status": "failed",
                "blocker": "turn 7f3a9c01 failed (7f3a9c01-x and x7f3a9c01 are other words)",
                "created_at": "t1",
            }
        ],
        gates=[{"gate_id": "gate-9", "status": "rejected", "updated_at": "t0"}],
        decision_results=[{"ref_id": "gate-9", "recommended_action": "reopen gate-9."}],
    )
    projection = valid(contract)["goal_projection"]
    assert projection["latest_blocker"] == (
        "turn <id> failed (7f3a9c01-x and x7f3a9c01 are other words)"
    )
    assert projection["next_action"] == projection["first_agent_todo"] == "reopen <id>."
    assert contract["session_facts"]["approval_state"] == "rejected"

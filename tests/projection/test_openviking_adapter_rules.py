"""One test per rule of the OpenViking adapter's builder, expected values from its contract.

Every key the builder reads, every default, fallback, alias, cap and refusal below is written
from docs/contracts/openviking-session-memory-adapter-v0.md (the "Inputs" table and the raw
material paragraphs), the base projection's rules in section 3.4 of the reference (the next
action and `agent_can_continue`) and the open points the module's docstring resolves; none
is read from the module's tables. Each rule gets inputs that only it decides, so breaking
that one rule changes the output. Refusals assert the whole problem list, so a refusal for
the wrong reason fails too.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.openviking import build

Doc = dict[str, Any]

WITHOUT_RAW = "provide compact summaries without raw material before projection"
MONITOR = "monitor for a material transition"
WITHHELD = "summary withheld: missing or not public-safe"
PREFIX = "invalid openviking_session_memory_adapter_v0: "


def refused(**overrides: Any) -> list[str]:
    """The problems the builder names when it refuses, in its order."""
    with pytest.raises(ValueError) as raised:
        build(**overrides)
    message = str(raised.value)
    assert message.startswith(PREFIX)
    return message.removeprefix(PREFIX).split("; ")


def issue_of(**issue: Any) -> Doc:
    return build(issue=issue)["issue_projection"]


def session_of(*sessions: Any) -> Doc:
    return build(sessions=list(sessions))["session_projection"]


def memory_of(**memory: Any) -> Doc:
    return build(memory={"namespace": "ns", **memory})["memory_projection"]


def status_of(status: Any, **overrides: Any) -> Doc:
    return build(status=status, **overrides)["status_projection"]


def source_refs(**overrides: Any) -> list[tuple[str, str]]:
    refs = build(**overrides)["evidence_projection"]["source_refs"]
    return [(r["kind"], r["id"]) for r in refs]


ENUMS = {
    "memory_projection.retrieval_mode": "preview_only, disabled, future_gated",
    "status_projection.waiting_on": "none, user, controller, agent, runtime, external_evidence",
    "status_projection.gate_state": "clear, user_todo, operator_gate, blocked, deferred, approved",
    "status_projection.quota_state": (
        "eligible, throttled, monitor_quiet_skip, operator_gate, blocked"
    ),
    "status_projection.memory_state": "preview_only, future_gated, blocked, disabled",
}


def unknown(path: str) -> str:
    return f"unknown_enum: {path} (expected one of {ENUMS[path]})"


BAD_NUMBER = "invalid_issue_number: issue_projection.issue_number (a positive int)"
NO_REF = "invalid_id: issue_projection.issue_ref_id"


# ---- Issue ------------------------------------------------------------------------------------


def test_provider_defaults_to_github_and_is_read_as_a_lowercase_word() -> None:
    assert issue_of(issue_number=7)["provider"] == "github"
    assert issue_of(issue_number=7, provider=" GitLab ")["provider"] == "gitlab"


@pytest.mark.parametrize("provider", ["", "  ", "git hub", "git/hub", 5, True])
def test_a_provider_that_is_not_a_compact_label_is_unknown(provider: object) -> None:
    issue = issue_of(issue_number=7, provider=provider)
    assert (issue["provider"], issue["issue_ref_id"]) == ("unknown", "unknown:issue#7")


def test_repo_is_an_owner_name_slug_or_null() -> None:
    assert issue_of(issue_number=7, repo=" OpenViking/Viking ")["repo"] == "OpenViking/Viking"
    for repo in ("OpenViking", "a/b/c", "o/r x", 5, None):
        assert issue_of(issue_number=7, repo=repo)["repo"] is None, repo


@pytest.mark.parametrize(
    ("given", "number"),
    [(1, 1), (7, 7), (10**12 - 1, 10**12 - 1), ("42", 42), (" 42 ", 42), ("9" * 12, 10**12 - 1)],
)
def test_issue_number_is_a_positive_int_or_a_digit_string(given: object, number: int) -> None:
    assert issue_of(issue_number=given)["issue_number"] == number


@pytest.mark.parametrize(
    "given", [0, -3, 10**12, True, 7.0, "", "4 2", "-4", "0" * 12 + "1", "1" + "0" * 12, None]
)
def test_anything_else_is_no_issue_number_and_refused(given: object) -> None:
    # Nothing to derive an issue ref from either: those are the only two problems.
    assert refused(issue={"repo": "o/r", "issue_number": given}) == [BAD_NUMBER, NO_REF]


def test_issue_ref_id_is_derived_from_provider_repo_and_number() -> None:
    assert issue_of(issue_number=7, repo="o/r")["issue_ref_id"] == "github:o/r#7"
    assert issue_of(issue_number=7)["issue_ref_id"] == "github:issue#7"
    assert issue_of(issue_number="8", provider="gitlab", repo="o/r")["issue_ref_id"] == (
        "gitlab:o/r#8"
    )


def test_a_given_issue_ref_id_wins_over_the_derived_one() -> None:
    assert issue_of(issue_number=7, repo="o/r", issue_ref_id=" jira:X-1 ")["issue_ref_id"] == (
        "jira:X-1"
    )
    # A given ref that is no id is not read, so the ref is derived.
    assert issue_of(issue_number=7, repo="o/r", issue_ref_id="a b")["issue_ref_id"] == (
        "github:o/r#7"
    )


def test_a_given_issue_ref_id_does_not_stand_in_for_the_number() -> None:
    assert refused(issue={"issue_ref_id": "jira:X-1"}) == [BAD_NUMBER]


def test_title_summary_is_read_before_title() -> None:
    assert issue_of(issue_number=7, title_summary="short", title="long")["title_summary"] == (
        "short"
    )
    assert issue_of(issue_number=7, title="long")["title_summary"] == "long"
    assert issue_of(issue_number=7, title_summary="see /Users/alice/x", title="long")[
        "title_summary"
    ] == ("long")
    assert issue_of(issue_number=7)["title_summary"] is None


# ---- Ids and texts ------------------------------------------------------------------------


def test_ids_are_read_as_stripped_scalars_never_from_a_bool() -> None:
    assert session_of({"session_id": " s1 "}, {"session_id": 42})["session_refs"] == ["s1", "42"]
    assert session_of({"session_id": True}, {"session_id": False})["session_refs"] == []
    assert session_of({"session_id": "a b"}, {"session_id": ""})["session_refs"] == []


def test_the_goal_id_is_read_like_any_id() -> None:
    assert build(goal_id=" g1 ")["goal_id"] == "g1"
    # An unusable goal id is named alone: no goal ref is derived from it.
    assert refused(goal_id="a b") == ["invalid_id: goal_id"]
    assert refused(goal_id=True) == ["invalid_id: goal_id"]


@pytest.mark.parametrize(
    "value",
    [
        "see https://corp-only.example/notes",
        "see http://restricted-host/notes",
        "AKIAABCDEFGHIJKLMNOP",
        "see C:\\Users\\carol\\notes",
    ],
)
def test_a_private_looking_text_is_not_read(value: str) -> None:
    doc = build(
        issue={"repo": "o/r", "issue_number": 7, "title_summary": value},
        memory={"namespace": "ns", "query_summary": value},
        evidence={"public_safe_summary": value},
    )
    assert doc["issue_projection"]["title_summary"] is None
    assert doc["memory_projection"]["query_summary"] is None
    assert doc["evidence_projection"]["public_safe_summary"] is None


def test_a_public_text_is_read_as_given() -> None:
    doc = build(memory={"namespace": "ns", "query_summary": "  fix the parser  "})
    assert doc["memory_projection"]["query_summary"] == "fix the parser"


# ---- generated_at ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("2026-11-29T00:00:00Z", "2026-11-29T00:00:00Z"),
        (" 2026-11-29 ", "2026-11-29"),
        ("2", "2"),
        ("2" * 80, "2" * 80),
    ],
)
def test_generated_at_is_copied_when_a_short_stamp(given: str, shown: str) -> None:
    assert build(generated_at=given)["generated_at"] == shown


@pytest.mark.parametrize(
    "given",
    [
        None,
        "",
        "   ",
        "2" * 81,
        "2026-11-29 00:00",
        "2026\n11",
        "2026-11-29\t00:00",
        "2026\x0b11",
        "2026\u00a011",
        "\x1b[2J2026",
        "2026\x00",
        "2026\u200b",
        "/Users/alice/stamp",
        "AKIAABCDEFGHIJKLMNOP",
        20261129,
    ],
)
def test_generated_at_is_otherwise_null(given: object) -> None:
    assert build(generated_at=given)["generated_at"] is None


# ---- Sessions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["session_id", "session_ref"])
def test_each_single_session_key_is_read(key: str) -> None:
    assert session_of({key: "s1"})["session_refs"] == ["s1"]


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("session_refs", "session_refs"),
        ("linked_todo_ids", "linked_todo_ids"),
        ("todo_ids", "linked_todo_ids"),
        ("outcome_refs", "outcome_refs"),
    ],
)
def test_each_list_session_key_is_read_as_a_list_or_tuple(key: str, field: str) -> None:
    assert session_of({key: ["a", None, "b", "a"]})[field] == ["a", "b"]
    assert session_of({key: ("c",)})[field] == ["c"]
    # Text is not a list of one-letter ids.
    assert session_of({key: "abc"})[field] == []


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("todo_id", "linked_todo_ids"),
        ("outcome_id", "outcome_refs"),
        ("outcome_ref", "outcome_refs"),
    ],
)
def test_each_single_id_key_is_read(key: str, field: str) -> None:
    assert session_of({key: "x1"}, {key: "x2"}, {key: "x1"})[field] == ["x1", "x2"]


def test_single_keys_come_before_list_keys_and_lists_are_de_duplicated() -> None:
    session = session_of(
        {"session_refs": ["s2", "s1"], "session_id": "s1", "session_ref": "s3"},
        {"session_id": "s4"},
    )
    assert session["session_refs"] == ["s1", "s3", "s2", "s4"]


def test_sessions_may_be_one_mapping_and_text_is_no_sessions() -> None:
    assert session_of()["session_refs"] == []
    assert build(sessions={"session_id": "s1"})["session_projection"]["session_refs"] == ["s1"]
    assert build(sessions="s1")["session_projection"]["session_refs"] == []


def test_runtime_id_is_the_first_usable_one_and_defaults_to_session_runtime() -> None:
    assert session_of()["runtime_id"] == "session_runtime"
    assert session_of({"runtime_id": "a b"}, {"runtime_id": "rt2"}, {"runtime_id": "rt3"})[
        "runtime_id"
    ] == ("rt2")


@pytest.mark.parametrize("key", ["updated_at", "event_at", "created_at", "timestamp"])
def test_latest_event_ref_follows_each_timestamp_key(key: str) -> None:
    newer = {"latest_event_ref": "evt_new", key: "2026-02-01"}
    older = {"latest_event_ref": "evt_old", key: "2026-01-01"}
    assert session_of(newer, older)["latest_event_ref"] == "evt_new"
    assert session_of(older, newer)["latest_event_ref"] == "evt_new"


def test_a_blank_or_non_text_timestamp_is_skipped_for_the_next_key() -> None:
    newer = {"latest_event_ref": "evt_new", "updated_at": "  ", "event_at": "2026-02-01"}
    older = {"latest_event_ref": "evt_old", "updated_at": 5, "event_at": "2026-01-01"}
    assert session_of(newer, older)["latest_event_ref"] == "evt_new"
    # A timestamp is compared as the stripped string.
    padded = {"latest_event_ref": "evt_pad", "updated_at": " 2026-01-15"}
    assert session_of(padded, older)["latest_event_ref"] == "evt_pad"


def test_on_a_tie_or_without_timestamps_the_later_input_wins() -> None:
    first = {"latest_event_ref": "evt_1", "updated_at": "2026-01-01"}
    second = {"latest_event_ref": "evt_2", "updated_at": "2026-01-01"}
    assert session_of(first, second)["latest_event_ref"] == "evt_2"
    assert session_of({"latest_event_ref": "evt_1"}, {"latest_event_ref": "evt_2"})[
        "latest_event_ref"
    ] == ("evt_2")


def test_a_session_without_an_event_ref_never_takes_the_latest_place() -> None:
    with_ref = {"latest_event_ref": "evt_1", "updated_at": "2026-01-01"}
    assert session_of(with_ref, {"updated_at": "2026-02-01"})["latest_event_ref"] == "evt_1"
    assert session_of({"updated_at": "2026-02-01"})["latest_event_ref"] is None


def test_event_id_stands_in_for_latest_event_ref() -> None:
    assert session_of({"event_id": "evt_9"})["latest_event_ref"] == "evt_9"
    both = {"latest_event_ref": "evt_1", "event_id": "evt_9"}
    assert session_of(both)["latest_event_ref"] == "evt_1"


# ---- Memory -------------------------------------------------------------------------------


def test_retrieval_mode_defaults_to_preview_only_and_is_read_as_a_word() -> None:
    assert memory_of()["retrieval_mode"] == "preview_only"
    assert memory_of(retrieval_mode=" Disabled ")["retrieval_mode"] == "disabled"


def test_a_retrieval_mode_that_is_not_a_word_is_refused() -> None:
    enum = unknown("memory_projection.retrieval_mode")
    assert refused(memory={"namespace": "ns", "retrieval_mode": 5}) == [enum]
    assert refused(memory={"namespace": "ns", "retrieval_mode": "live"}) == [enum]


def test_the_namespace_is_required() -> None:
    assert memory_of(namespace=" ns2 ")["namespace"] == "ns2"
    assert refused(memory={}) == ["invalid_id: memory_projection.namespace"]


def test_candidates_is_read_only_when_candidate_refs_is_absent() -> None:
    given = [{"memory_ref_id": "mem_a"}]
    assert memory_of(candidates=given)["candidate_refs"][0]["memory_ref_id"] == "mem_a"
    assert memory_of(candidate_refs=[], candidates=given)["candidate_refs"] == []
    both = memory_of(candidate_refs=[{"memory_ref_id": "mem_b"}], candidates=given)
    assert [c["memory_ref_id"] for c in both["candidate_refs"]] == ["mem_b"]


def test_a_candidate_is_one_mapping_or_a_list_of_mappings() -> None:
    lone = memory_of(candidate_refs={"memory_ref_id": "mem_a"})["candidate_refs"]
    assert [c["memory_ref_id"] for c in lone] == ["mem_a"]
    assert memory_of(candidate_refs="mem_a")["candidate_refs"] == []


@pytest.mark.parametrize("ref", [None, "", "a b", "nomem_a", "MEM_a", 5, True])
def test_a_candidate_without_a_mem_id_is_dropped(ref: object) -> None:
    rows = [{"memory_ref_id": ref}, {"memory_ref_id": "mem_b"}]
    assert [c["memory_ref_id"] for c in memory_of(candidate_refs=rows)["candidate_refs"]] == [
        "mem_b"
    ]


def test_a_candidate_id_given_twice_is_kept_once_the_first() -> None:
    rows = [
        {"memory_ref_id": "mem_a", "summary": "first"},
        {"memory_ref_id": "mem_b"},
        {"memory_ref_id": " mem_a ", "summary": "second"},
    ]
    kept = memory_of(candidate_refs=rows)
    assert [(c["memory_ref_id"], c["summary"]) for c in kept["candidate_refs"]] == [
        ("mem_a", "first"),
        ("mem_b", WITHHELD),
    ]
    assert kept["top_k_preview"] == 2


@pytest.mark.parametrize(
    "kind", ["prior_issue", "session_outcome", "operator_note", "validation_summary", "unknown"]
)
def test_each_source_kind_is_kept(kind: str) -> None:
    rows = [{"memory_ref_id": "mem_a", "source_kind": f" {kind.upper()} "}]
    assert memory_of(candidate_refs=rows)["candidate_refs"][0]["source_kind"] == kind


@pytest.mark.parametrize("bucket", ["high", "medium", "low", "unknown"])
def test_each_score_bucket_is_kept(bucket: str) -> None:
    rows = [{"memory_ref_id": "mem_a", "score_bucket": f" {bucket.title()} "}]
    assert memory_of(candidate_refs=rows)["candidate_refs"][0]["score_bucket"] == bucket


@pytest.mark.parametrize("word", [None, "", "chat", "prior issue", 3])
def test_other_kinds_and_buckets_are_unknown(word: object) -> None:
    rows = [{"memory_ref_id": "mem_a", "source_kind": word, "score_bucket": word}]
    assert memory_of(candidate_refs=rows)["candidate_refs"] == [
        {
            "memory_ref_id": "mem_a",
            "source_kind": "unknown",
            "score_bucket": "unknown",
            "summary": WITHHELD,
            "raw_memory_copied": False,
        }
    ]


def test_a_candidate_summary_is_kept_when_public_safe() -> None:
    rows = [
        {"memory_ref_id": "mem_a", "summary": "a prior public fix"},
        {"memory_ref_id": "mem_b", "summary": "see /home/bob/notes"},
    ]
    kept = memory_of(candidate_refs=rows)["candidate_refs"]
    assert [c["summary"] for c in kept] == ["a prior public fix", WITHHELD]


def test_top_k_preview_defaults_to_the_usable_candidates_at_least_one() -> None:
    assert memory_of()["top_k_preview"] == 1
    rows = [{"memory_ref_id": f"mem_{i}"} for i in range(3)] + [{"memory_ref_id": "x"}]
    assert memory_of(candidate_refs=rows)["top_k_preview"] == 3


def test_top_k_preview_keeps_at_most_that_many_candidates() -> None:
    rows = [{"memory_ref_id": f"mem_{i}"} for i in range(3)]
    for top_k in (1, 2, 3, 4):
        kept = memory_of(candidate_refs=rows, top_k_preview=top_k)
        assert kept["top_k_preview"] == top_k
        assert [c["memory_ref_id"] for c in kept["candidate_refs"]] == [
            f"mem_{i}" for i in range(min(top_k, 3))
        ]


@pytest.mark.parametrize("top_k", [0, -1, True, "2"])
def test_a_top_k_preview_that_is_not_a_positive_int_is_refused(top_k: object) -> None:
    rows = [{"memory_ref_id": "mem_a"}]
    assert refused(memory={"namespace": "ns", "candidate_refs": rows, "top_k_preview": top_k}) == [
        "invalid_top_k_preview: memory_projection.top_k_preview (a positive int)"
    ]


# ---- Status -------------------------------------------------------------------------------


def test_defaults_with_nothing_to_do() -> None:
    for status in ({}, None, "waiting", ["x"]):
        assert status_of(status) == {
            "waiting_on": "none",
            "next_action": MONITOR,
            "user_action_required": False,
            "agent_can_continue": False,
            "first_agent_todo": None,
            "gate_state": "clear",
            "quota_state": "eligible",
            "memory_state": "preview_only",
        }


def test_an_agent_todo_lets_the_agent_continue_and_is_the_next_action() -> None:
    status = status_of({"first_agent_todo": "write the test"})
    assert (status["waiting_on"], status["agent_can_continue"], status["next_action"]) == (
        "agent",
        True,
        "write the test",
    )
    assert status["first_agent_todo"] == "write the test"


def test_a_given_next_action_wins_over_the_agent_todo() -> None:
    status = status_of({"first_agent_todo": "write the test", "next_action": "run the smoke"})
    assert status["next_action"] == "run the smoke"
    assert (
        status_of({"next_action": "see /Users/alice/x", "first_agent_todo": "t"})["next_action"]
        == "t"
    )


@pytest.mark.parametrize("given", [1, "true", "yes", None])
def test_only_true_is_an_open_user_action(given: object) -> None:
    status = status_of({"user_action_required": given, "first_agent_todo": "t"})
    assert (status["user_action_required"], status["agent_can_continue"]) == (False, True)
    assert (status["waiting_on"], status["gate_state"]) == ("agent", "clear")


def test_an_open_user_action_stops_the_agent_and_waits_on_the_user() -> None:
    status = status_of({"user_action_required": True, "first_agent_todo": "t"})
    assert status["user_action_required"] is True
    assert status["agent_can_continue"] is False
    assert (status["waiting_on"], status["gate_state"]) == ("user", "user_todo")
    # With nothing else given too.
    bare = status_of({"user_action_required": True})
    assert (bare["waiting_on"], bare["gate_state"], bare["next_action"]) == (
        "user",
        "user_todo",
        MONITOR,
    )


def test_a_given_agent_can_continue_bool_wins_over_the_todo() -> None:
    alone = status_of({"agent_can_continue": True})
    assert (alone["agent_can_continue"], alone["waiting_on"]) == (True, "agent")
    stopped = status_of({"agent_can_continue": False, "first_agent_todo": "t"})
    assert stopped["agent_can_continue"] is False
    # Who it waits on still follows the todo.
    assert stopped["waiting_on"] == "agent"


@pytest.mark.parametrize("given", [1, "true", "no", 0])
def test_a_non_bool_agent_can_continue_falls_back_to_the_todo(given: object) -> None:
    assert status_of({"agent_can_continue": given})["agent_can_continue"] is False
    assert (
        status_of({"agent_can_continue": given, "first_agent_todo": "t"})["agent_can_continue"]
        is True
    )


def test_a_given_waiting_on_wins_over_the_derived_one() -> None:
    assert status_of({"waiting_on": " Runtime ", "user_action_required": True})["waiting_on"] == (
        "runtime"
    )
    assert status_of({"waiting_on": "external_evidence", "first_agent_todo": "t"})[
        "waiting_on"
    ] == ("external_evidence")


@pytest.mark.parametrize("given", [5, "", "somebody"])
def test_a_waiting_on_outside_the_enum_is_refused(given: object) -> None:
    assert refused(status={"waiting_on": given}) == [unknown("status_projection.waiting_on")]


@pytest.mark.parametrize(
    ("field", "given", "shown"),
    [
        ("gate_state", " Deferred ", "deferred"),
        ("gate_state", "none", "clear"),
        ("quota_state", " Throttled ", "throttled"),
        ("memory_state", "blocked", "blocked"),
    ],
)
def test_given_states_are_read_as_words(field: str, given: str, shown: str) -> None:
    assert status_of({field: given})[field] == shown


def test_a_given_gate_state_wins_over_the_user_action() -> None:
    assert status_of({"gate_state": "operator_gate", "user_action_required": True})[
        "gate_state"
    ] == ("operator_gate")


@pytest.mark.parametrize("field", ["gate_state", "quota_state", "memory_state"])
def test_a_state_outside_its_enum_is_refused(field: str) -> None:
    assert refused(status={field: "open"}) == [unknown(f"status_projection.{field}")]


@pytest.mark.parametrize(
    ("mode", "state"),
    [("preview_only", "preview_only"), ("disabled", "disabled"), ("future_gated", "future_gated")],
)
def test_memory_state_defaults_from_the_retrieval_mode(mode: str, state: str) -> None:
    doc = build(memory={"namespace": "ns", "retrieval_mode": mode.upper()})
    assert doc["status_projection"]["memory_state"] == state
    given = build(
        memory={"namespace": "ns", "retrieval_mode": mode}, status={"memory_state": "blocked"}
    )
    assert given["status_projection"]["memory_state"] == "blocked"


# ---- Raw keys and the contract's own flags --------------------------------------------------


@pytest.mark.parametrize("section", ["issue", "memory", "status", "evidence"])
def test_a_raw_key_stops_the_agent_but_not_who_it_waits_on(section: str) -> None:
    inputs: dict[str, Any] = {
        "issue": {"repo": "o/r", "issue_number": 7},
        "memory": {"namespace": "ns"},
        "status": {"first_agent_todo": "t", "next_action": "n", "agent_can_continue": True},
        "evidence": {},
    }
    inputs[section]["transcript"] = "raw"
    status = build(**inputs)["status_projection"]
    assert (status["agent_can_continue"], status["next_action"], status["waiting_on"]) == (
        False,
        WITHOUT_RAW,
        "agent",
    )
    assert status["first_agent_todo"] == "t"


def test_a_raw_key_inside_a_session_candidate_or_ref_stops_the_agent() -> None:
    nested: list[dict[str, Any]] = [
        {"sessions": [{"session_id": "s1", "stdout": "x"}]},
        {
            "memory": {
                "namespace": "ns",
                "candidate_refs": [{"memory_ref_id": "mem_a", "body": "x"}],
            }
        },
        {"evidence": {"validation_refs": [{"kind": "smoke", "id": "v1", "stderr": "x"}]}},
        {"evidence": {"source_refs": [{"kind": "smoke", "id": "v1", "tool_output": "x"}]}},
    ]
    for overrides in nested:
        status = status_of({"first_agent_todo": "t"}, **overrides)
        assert (status["agent_can_continue"], status["next_action"]) == (False, WITHOUT_RAW)


def test_a_raw_key_is_dropped_and_its_neighbours_are_still_read() -> None:
    doc = build(
        issue={"repo": "o/r", "issue_number": 7, "body": "x", "title": "kept"},
        sessions=[{"session_id": "s1", "transcript": "x"}],
    )
    assert doc["issue_projection"]["title_summary"] == "kept"
    assert doc["session_projection"]["session_refs"] == ["s1"]


@pytest.mark.parametrize(
    "flag",
    [
        "raw_memory_copied",
        "issue_body_copied",
        "live_retrieval_allowed",
        "writeback_performed",
        "adapter_is_writable",
    ],
)
def test_a_contract_flag_that_is_false_is_no_raw_material(flag: str) -> None:
    status = status_of({"first_agent_todo": "t", flag: False})
    assert (status["agent_can_continue"], status["next_action"]) == (True, "t")


@pytest.mark.parametrize("value", [True, None, 0, "false", []])
def test_a_contract_flag_that_is_not_false_counts_as_raw(value: object) -> None:
    status = status_of({"first_agent_todo": "t", "issue_body_copied": value})
    assert (status["agent_can_continue"], status["next_action"]) == (False, WITHOUT_RAW)


def test_a_non_text_key_is_classified_not_read() -> None:
    doc = build(issue={"repo": "o/r", "issue_number": 7, 5: "x", None: "y"})
    assert doc["issue_projection"]["repo"] == "o/r"
    assert doc["status_projection"]["next_action"] == MONITOR


# ---- Evidence -------------------------------------------------------------------------------


def test_source_refs_are_derived_in_the_contract_order_then_the_callers() -> None:
    refs = source_refs(
        sessions=[{"session_id": "s1", "todo_id": "t1", "run_id": "r1"}],
        memory={"namespace": "ns", "candidate_refs": [{"memory_ref_id": "mem_a"}]},
        evidence={"source_refs": [{"kind": "pr", "id": "pr_1"}]},
    )
    assert refs == [
        ("goal", "goal-r"),
        ("issue", "github:o/r#7"),
        ("session", "s1"),
        ("todo", "t1"),
        ("run", "r1"),
        ("memory", "mem_a"),
        ("pr", "pr_1"),
    ]


def test_run_ids_come_from_sessions_then_evidence_then_given_run_refs() -> None:
    refs = source_refs(
        sessions=[{"run_ids": ["r1", "r2"]}, {"run_id": "r2"}],
        memory={"namespace": "ns", "candidate_refs": [{"memory_ref_id": "mem_a"}]},
        evidence={
            "run_id": "r3",
            "run_ids": ("r4", "r1"),
            "source_refs": [
                {"kind": "pr", "id": "pr_1"},
                {"kind": "run", "id": "r5"},
                {"kind": "run", "id": "r3"},
            ],
        },
    )
    assert refs == [
        ("goal", "goal-r"),
        ("issue", "github:o/r#7"),
        ("run", "r1"),
        ("run", "r2"),
        ("run", "r3"),
        ("run", "r4"),
        ("run", "r5"),
        ("memory", "mem_a"),
        ("pr", "pr_1"),
    ]


@pytest.mark.parametrize(
    "ref",
    [
        {"kind": "pr"},
        {"id": "pr_1"},
        {"kind": "1pr", "id": "pr_1"},
        {"kind": "p r", "id": "pr_1"},
        {"kind": "pr", "id": "a b"},
        {"kind": 5, "id": "pr_1"},
        "pr:pr_1",
    ],
)
def test_a_ref_without_a_kind_word_and_an_id_is_dropped(ref: object) -> None:
    evidence = {"source_refs": [ref], "validation_refs": [ref, {"kind": " Smoke ", "id": " v1 "}]}
    doc = build(evidence=evidence)["evidence_projection"]
    assert doc["validation_refs"] == [{"kind": "smoke", "id": "v1"}]
    assert [r["kind"] for r in doc["source_refs"]] == ["goal", "issue"]


def test_refs_are_de_duplicated() -> None:
    ref = {"kind": "smoke", "id": "v1"}
    evidence = {
        "validation_refs": [ref, dict(ref)],
        "source_refs": [{"kind": "goal", "id": "goal-r"}],
    }
    doc = build(evidence=evidence)["evidence_projection"]
    assert doc["validation_refs"] == [ref]
    assert [r["kind"] for r in doc["source_refs"]] == ["goal", "issue"]


def test_public_safe_summary_is_read_before_summary() -> None:
    def summary(**evidence: Any) -> object:
        return build(evidence=evidence)["evidence_projection"]["public_safe_summary"]

    assert summary(public_safe_summary="first", summary="second") == "first"
    assert summary(summary="second") == "second"
    assert summary(public_safe_summary="see /Users/alice/x", summary="second") == "second"
    assert summary() is None

"""The compact projection's secret/path filter: one test per pattern it must drop, the
text it must keep, and two rules of the latest facts (non-string timestamps, `validated:
false`)."""

from __future__ import annotations

import pytest

from loopx_chat.session_runtime import (
    build_session_runtime_readonly_contract,
    build_session_runtime_readonly_projection,
    compact_session_runtime_readonly_projection,
)
from loopx_chat.session_runtime._text import public_safe_text

LEAKS = {
    "token=": "retry with token=abc123def",
    "token:": "header token: abc123def",
    "access_key=": "use access_key=AKIDEXAMPLE",
    "sk_live_": "charged with sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "ak=": "cfg ak=LTAI5tExample",
    "sk=": "cfg sk=wJalrXUtnFEMI",
    "client_secret=": "oauth client_secret=s3cr3tvalue",
    "Authorization: Basic": "sent Authorization: Basic dXNlcjpwYXNzd29yZA==",
    "Basic credentials": "curl -H Basic dXNlcjpwYXNzd29yZA==",
    "user:pass@ URL": "cloned https://alice:hunter2@git.example.com/repo.git",
    "/etc/": "read /etc/shadow",
    "/srv/": "deployed to /srv/app/releases",
    "/workspace/": "edited /workspace/project/main.py",
    "/var/log/": "tail /var/log/syslog",
    # what the filter caught before, still caught
    "sk-": "key sk-abcdefghijklmnopqrstu",
    "password=": "password=hunter2",
    "/Users/": "opened /Users/alice/notes.txt",
    "bearer": "Bearer abcdefghijklmnop",
}
KEPT = [
    "ran the tests: 12 passed",
    "ask: should we merge?",
    "the token budget is 5000",
    "see https://example.com/docs",
    "tokens used: 120",
]


@pytest.mark.parametrize("pattern", sorted(LEAKS))
def test_each_leak_pattern_is_dropped(pattern: str) -> None:
    assert public_safe_text(LEAKS[pattern], 180) is None


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_is_kept(text: str) -> None:
    assert public_safe_text(text, 180) == text


def test_a_leak_never_reaches_the_compact_projection() -> None:
    outcomes = [
        {"outcome_id": f"o{n}", "kind": "validation", "status": "passed", "summary": text,
         "created_at": f"2026-01-01T00:00:{n:02d}Z"}
        for n, text in enumerate(LEAKS.values())
    ]  # fmt: skip
    compact = compact_session_runtime_readonly_projection(
        build_session_runtime_readonly_projection(goal_id="g", outcomes=outcomes)
    )
    rendered = repr(compact)
    for text in LEAKS.values():
        assert text not in rendered


@pytest.mark.parametrize("pattern", sorted(LEAKS))
def test_a_leak_never_reaches_the_public_contract(pattern: str) -> None:
    # The same text under every key the contract's texts come from: the gate's question
    # (first_user_todo, next_action), an agent todo, a validation, a blocker.
    text = LEAKS[pattern]
    for gates in ([], [{"gate_id": "g1", "status": "pending", "actor": "owner", "question": text}]):
        contract = build_session_runtime_readonly_contract(
            goal_id="g",
            gates=gates,
            decision_results=[{"ref_id": "h1", "recommended_action": text}],
            outcomes=[
                {"outcome_id": "o1", "status": "ok", "validation_summary": text, "created_at": "1"},
                {"outcome_id": "o2", "status": "failed", "blocker": text, "created_at": "2"},
            ],
        )
        assert text not in repr(contract)
        assert contract["goal_projection"]["next_action"]  # never left without a next action


@pytest.mark.parametrize("stamp", [False, True, 0, 99999999999, 1.5])
def test_a_non_string_timestamp_never_wins_as_latest(stamp: object) -> None:
    events = [
        {"event_id": "e1", "created_at": "2026-01-02T00:00:00Z", "summary": "real"},
        {"event_id": "e2", "created_at": stamp, "summary": "bogus"},
    ]
    projection = build_session_runtime_readonly_projection(goal_id="g", events=events)
    assert projection["source"]["latest_fact_at"] == "2026-01-02T00:00:00Z"


def test_validated_false_is_not_a_validation() -> None:
    outcomes = [{"outcome_id": "o1", "validated": False, "created_at": "2026-01-01T00:00:00Z"}]
    first = build_session_runtime_readonly_projection(goal_id="g", outcomes=outcomes)
    assert not first["first_screen"]["latest_validation"]
    outcomes[0]["validated"] = True
    second = build_session_runtime_readonly_projection(goal_id="g", outcomes=outcomes)
    assert second["first_screen"]["latest_validation"]

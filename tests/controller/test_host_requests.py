"""The desk's pure rules: what a host gate records, what each choice answers, the carried line."""

from __future__ import annotations

import pytest

from loopx_chat.controller.host_requests import (
    Binding,
    Choice,
    carry_line,
    compact_facts,
    program_of,
    reply_for,
    summary,
)
from loopx_chat.goals.gate_store import Gate


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/bin/bash -lc 'touch /secret/place/f'", ("touch", 1)),
        ("/bin/sh -c 'npm install --save left-pad'", ("npm", 3)),
        ("/usr/local/bin/python3 -m pip install x", ("python3", 4)),
        (["/opt/x/bin/cargo", "build"], ("cargo", 1)),
        ("'/tmp/we ird;rm -rf ~'", ("a program", 0)),
        ("/bin/bash -lc 'unbalanced", ("a program", 0)),
        ("", ("a program", 0)),
    ],
)
def test_a_command_is_kept_as_its_base_name_and_argument_count(
    command: object, expected: tuple[str, int]
) -> None:
    assert program_of(command) == expected


def test_compact_facts_never_keep_the_command_the_cwd_or_the_question_text() -> None:
    params = {
        "threadId": "t",
        "turnId": "u",
        "itemId": "call_1",
        "command": "/bin/bash -lc 'touch /home/me/CANARY/f'",
        "cwd": "/home/me/CANARY",
        "reason": "CANARY reason",
    }
    facts = compact_facts("command", params, Binding("s", "g"), 7)
    assert "CANARY" not in repr(facts)
    assert summary(facts) == "Codex asks to run `touch` (1 argument)"
    question = {
        "threadId": "t",
        "questions": [
            {
                "id": "q",
                "header": "Database",
                "question": "CANARY which?",
                "isSecret": True,
                "options": [{"label": "SQLite"}, {"label": "token sk-abcdefghijklmnopqrstuvwx"}],
            }
        ],
    }
    facts = compact_facts("question", question, Binding("s", "g"), "r")
    assert "CANARY" not in repr(facts) and "sk-" not in repr(facts)
    assert facts["secret"] is True and facts["options"] == ["SQLite"]


@pytest.mark.parametrize(
    ("kind", "choice", "result"),
    [
        ("command", Choice("approve"), {"decision": "accept"}),
        ("command", Choice("approve", for_session=True), {"decision": "acceptForSession"}),
        ("command", Choice("decline"), {"decision": "decline"}),
        ("command", Choice("cancel"), {"decision": "cancel"}),
        ("file_change", Choice("approve"), {"decision": "accept"}),
        ("question", Choice("answer", answer="yes"), {"answers": {"q": {"answers": ["yes"]}}}),
        ("question", Choice("decline"), {"answers": {}}),
        ("permissions", Choice("decline"), {"permissions": {}, "scope": "turn"}),
        (
            "permissions",
            Choice("approve", for_session=True),
            {"permissions": {"network": {"enabled": True}}, "scope": "session"},
        ),
    ],
)
def test_each_choice_is_the_answer_codex_takes(
    kind: str, choice: Choice, result: dict[str, object]
) -> None:
    params = {"questions": [{"id": "q"}], "permissions": {"network": {"enabled": True}}}
    assert reply_for(kind, params, choice) == result


def test_the_home_rule_is_sent_only_when_codex_offered_it() -> None:
    offered = {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["npm", "test"]}}
    params = {"availableDecisions": ["accept", offered, "cancel"]}
    assert reply_for("command", params, Choice("amend")) == {"decision": offered}
    with pytest.raises(Exception, match="no rule"):
        reply_for("command", {"availableDecisions": ["accept"]}, Choice("amend"))


def _gate(status: str, **host: object) -> Gate:
    return Gate("host-1", "g", "q", "owner", True, status, "t", "t", host=dict(host))


def test_the_carried_line_says_what_was_decided_and_never_a_secret() -> None:
    approved = _gate("approved", kind="command", program="npm", argc=3)
    assert carry_line(approved) == "The owner approved running `npm` (3 arguments); run it again."
    declined = _gate("rejected", kind="command", program="rm", argc=1)
    assert carry_line(declined) == "The owner declined running `rm` (1 argument); do not run it."
    answered = _gate("approved", kind="question", header="Database", answer="SQLite")
    assert carry_line(answered) == 'The owner answered "Database": SQLite'
    secret = _gate("approved", kind="question", header="Token", secret=True)
    assert "not kept" in carry_line(secret)

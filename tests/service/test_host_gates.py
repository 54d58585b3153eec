"""A host gate's card: live details escaped, a secret question's password field, the home
rule only as its own worded choice, and the decision body read strictly."""

from __future__ import annotations

import pytest

from loopx_chat.errors import UsageError
from loopx_chat.goals.gate_store import Gate
from loopx_chat.service.host_gates import choice_from, render_host_gate


def _gate(**host: object) -> Gate:
    return Gate(
        "host-1",
        "g",
        "Codex asks to run `rm` (2 arguments)",
        "owner",
        True,
        "pending",
        "2026-12-01T00:00:00Z",
        "t",
        host={"state": "live", **host},
    )


def test_live_details_are_escaped_and_every_choice_is_offered() -> None:
    details = {
        "kind": "command",
        "command": "rm -rf '<script>alert(1)</script>'",
        "cwd": '/tmp/"x"',
        "reason": "<b>why</b>",
        "amendment": True,
    }
    html = render_host_gate("g", _gate(kind="command"), details)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;why" in html
    for label in ("Approve once", "Approve for this session", "Decline", "Stop the turn"):
        assert label in html
    assert "every thread of this Codex home" in html
    assert 'data-decision="amend"' in html


def test_no_home_rule_button_unless_codex_offered_one_and_not_live_says_so() -> None:
    html = render_host_gate("g", _gate(kind="command"), {"kind": "command", "amendment": False})
    assert 'data-decision="amend"' not in html
    gone = render_host_gate(
        "g", _gate(kind="command", state="expired", expired="host restarted"), None
    )
    assert "expired: host restarted" in gone and "Stop the turn" not in gone


def test_a_secret_question_gets_a_password_field() -> None:
    details = {
        "kind": "question",
        "questions": [
            {
                "id": "q",
                "header": "Token",
                "question": "Which <token>?",
                "secret": True,
                "options": ['a "b"'],
            }
        ],
    }
    html = render_host_gate("g", _gate(kind="question", secret=True, header="Token"), details)
    assert 'type="password"' in html and "Which &lt;token&gt;?" in html
    assert 'data-answer="a &quot;b&quot;"' in html


@pytest.mark.parametrize(
    "doc",
    [
        {"decision": "always"},
        {"decision": "approve", "for_session": "yes"},
        {"decision": "answer"},
        {"decision": "answer", "answer": 3},
        {"decision": "answer", "answer": "x" * 5000},
    ],
)
def test_a_bad_decision_body_is_a_usage_error(doc: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        choice_from(doc)


def test_reject_means_decline() -> None:
    assert choice_from({"decision": "reject"}).decision == "decline"


def test_several_questions_each_get_their_own_options_and_field() -> None:
    details = {
        "kind": "question",
        "questions": [
            {"id": "db", "header": "Database", "question": "Which <db>?", "options": ["SQLite"]},
            {"id": "token", "header": "Token", "question": "Which token?", "secret": True},
        ],
    }
    host = {
        "kind": "question",
        "questions": [{"id": "db", "secret": False}, {"id": "token", "secret": True}],
    }
    html = render_host_gate("g", _gate(**host), details)
    assert '<div class="q" data-qid="db">' in html and "Which &lt;db&gt;?" in html
    assert 'data-qid="db" type="text"' in html and 'data-qid="token" type="password"' in html
    assert 'data-fill="SQLite"' in html and 'data-answer="SQLite"' not in html
    assert "Send answers" in html
    # The secret question is left to the CLI's prompt without echo: never `--answer` on argv.
    assert "--decision approve --answer db=TEXT</code>" in html and "token=TEXT" not in html
    # Not live any more: still one field per question, from the recorded ids.
    gone = render_host_gate("g", _gate(**host, state="window_passed"), None)
    assert 'data-qid="db"' in gone and 'data-qid="token" type="password"' in gone


def test_an_mcp_servers_request_shows_its_message_and_fields_escaped() -> None:
    details = {
        "kind": "elicitation",
        "server": "asker",
        "message": "Your <name>?",
        "tool_approval": False,
        "fields": [
            {"id": "name", "title": "Name", "type": "string", "options": [], "required": True},
            {"id": "colour", "title": "Colour", "type": "string", "options": ["red", "<g>"]},
            {"id": "ok", "title": "OK", "type": "boolean", "options": []},
        ],
    }
    html = render_host_gate("g", _gate(kind="elicitation", server="asker", fields=3), details)
    assert "Your &lt;name&gt;?" in html and "<name>" not in html
    assert 'input class="answer" data-qid="name"' in html and "Name (required)" in html
    assert 'select class="answer" data-qid="colour"' in html and "&lt;g&gt;" in html
    assert '<option value="true">' in html
    for label in ("Accept", "Decline", "Cancel"):
        assert label in html
    assert 'data-decision="answer"' in html
    gone = render_host_gate("g", _gate(kind="elicitation", server="asker", fields=3), None)
    assert "Your" not in gone and 'data-decision="approve"' in gone


def test_answers_are_read_per_question_id_and_strictly() -> None:
    choice = choice_from({"decision": "answer", "answers": {"db": "SQLite", "token": " "}})
    assert choice.answers == (("db", "SQLite"),)
    for bad in ({"db": 1}, ["db"], {f"q{n}": "x" for n in range(21)}, {"db": "x" * 5000}):
        with pytest.raises(UsageError):
            choice_from({"decision": "answer", "answers": bad})

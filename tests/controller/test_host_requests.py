"""The desk's pure rules: what a host gate records, what each choice answers, the carried line."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopx_chat.controller.host_requests import (
    NOT_ANSWERED,
    Binding,
    Choice,
    HostRequestDesk,
    carry_line,
    compact_facts,
    kept_answers,
    live_details,
    normalized,
    program_of,
    reply_for,
    summary,
    window_choice,
)
from loopx_chat.errors import StateError, UsageError
from loopx_chat.goals.gate_store import Gate, GateStore


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
    with pytest.raises(UsageError, match="no rule") as refused:
        reply_for("command", {"availableDecisions": ["accept"]}, Choice("amend"))
    assert refused.value.error_code == "usage_error"


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


# -- several questions, the window's note, an MCP server's elicitation --------------------

TWO = {
    "threadId": "t",
    "questions": [
        {"id": "db", "header": "Database", "question": "CANARY db?", "options": [{"label": "A"}]},
        {"id": "token", "header": "Token", "question": "CANARY token?", "isSecret": True},
    ],
}


def test_two_questions_are_recorded_per_id_and_answered_per_id() -> None:
    facts = compact_facts("question", TWO, Binding("s", "g"), 1)
    assert "CANARY" not in repr(facts)
    assert facts["questions"] == [
        {"id": "db", "header": "Database", "secret": False},
        {"id": "token", "header": "Token", "secret": True},
    ]
    assert summary(facts) == "Codex asks: Database (A) and 1 more question"
    choice = Choice("answer", answers=(("db", "A"), ("token", "t0k")))
    assert reply_for("question", TWO, choice) == {
        "answers": {"db": {"answers": ["A"]}, "token": {"answers": ["t0k"]}}
    }


def test_a_bare_answer_fits_one_question_only_and_an_unknown_id_is_refused() -> None:
    assert normalized(Choice("answer", answer="x"), ["q"]).answers == (("q", "x"),)
    with pytest.raises(UsageError) as several:
        normalized(Choice("answer", answer="x"), ["db", "token"])
    assert several.value.error_code == "answer_needs_question_id"
    with pytest.raises(UsageError) as unknown:
        normalized(Choice("answer", answers=(("nope", "x"),)), ["db", "token"])
    assert unknown.value.error_code == "unknown_question_id"


def test_the_window_answers_every_question_that_the_owner_has_not_answered() -> None:
    choice = window_choice("question", TWO)
    assert reply_for("question", TWO, choice) == {
        "answers": {"db": {"answers": [NOT_ANSWERED]}, "token": {"answers": [NOT_ANSWERED]}}
    }
    assert window_choice("command", {}) == Choice("decline")


def test_the_carried_line_of_two_questions_names_each_and_never_the_secret() -> None:
    host = {
        "kind": "question",
        "questions": [
            {"id": "db", "header": "Database", "secret": False},
            {"id": "token", "header": "Token", "secret": True},
        ],
        "answers": {"db": "SQLite"},
    }
    line = carry_line(_gate("approved", **host))
    assert line == (
        'The owner answered: "Database": SQLite; "Token": (the answer is not kept; ask again)'
    )


ELICIT = {
    "threadId": "t",
    "turnId": "u",
    "serverName": "asker",
    "mode": "form",
    "_meta": None,
    "message": "CANARY what is your name?",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "CANARY name"},
            "age": {"type": "integer"},
            "ok": {"type": "boolean"},
            "colour": {"type": "string", "enum": ["red", "green"]},
        },
        "required": ["name"],
    },
}
TOOL_APPROVAL = {
    "threadId": "t",
    "serverName": "asker",
    "mode": "form",
    "_meta": {
        "codex_approval_kind": "mcp_tool_call",
        "tool_name": "ask",
        "tool_params_display": [{"name": "message", "value": "CANARY", "display_name": "m"}],
    },
    "message": 'Allow the asker MCP server to run tool "ask"?',
    "requestedSchema": {"type": "object", "properties": {}},
}


def test_an_elicitation_records_the_server_and_the_field_count_only() -> None:
    facts = compact_facts("elicitation", ELICIT, Binding("s", "g"), "r")
    assert "CANARY" not in repr(facts) and "name" not in repr({**facts, "kind": ""})
    assert (facts["server"], facts["fields"], facts["secret"]) == ("asker", 4, True)
    assert summary(facts) == "The MCP server `asker` asks for input (4 fields)"
    tool = compact_facts("elicitation", TOOL_APPROVAL, Binding("s", "g"), "r")
    assert summary(tool) == "Codex asks to run the tool `ask` of the MCP server `asker`"
    assert "CANARY" not in repr(tool)
    # Before 0.167.2 codex names the tool only in its message (recorded on 0.160.0).
    legacy_meta = {k: v for k, v in TOOL_APPROVAL["_meta"].items() if k != "tool_name"}
    legacy = compact_facts(
        "elicitation", {**TOOL_APPROVAL, "_meta": legacy_meta}, Binding("s", "g"), "r"
    )
    assert summary(legacy) == "Codex asks to run the tool `ask` of the MCP server `asker`"
    other_server = {**TOOL_APPROVAL, "_meta": legacy_meta, "serverName": "other"}
    assert compact_facts("elicitation", other_server, Binding("s", "g"), "r")["tool"] == "a tool"
    odd_params = {**ELICIT, "serverName": "/home/me/x y"}
    odd = compact_facts("elicitation", odd_params, Binding("s", "g"), 1)
    assert odd["server"] == "an MCP server"


def test_an_elicitation_is_answered_per_its_schema() -> None:
    answers = (("name", "Ada"), ("age", "36"), ("ok", "yes"), ("colour", "green"))
    assert reply_for("elicitation", ELICIT, Choice("answer", answers=answers)) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 36, "ok": True, "colour": "green"},
    }
    assert reply_for("elicitation", ELICIT, Choice("decline")) == {"action": "decline"}
    assert reply_for("elicitation", ELICIT, Choice("cancel")) == {"action": "cancel"}
    assert reply_for("elicitation", TOOL_APPROVAL, Choice("approve")) == {
        "action": "accept",
        "content": {},
    }
    with pytest.raises(UsageError) as missing:
        reply_for("elicitation", ELICIT, Choice("answer", answers=(("age", "3"),)))
    assert missing.value.error_code == "answer_missing"
    with pytest.raises(UsageError) as typed:
        reply_for("elicitation", ELICIT, Choice("answer", answers=(("name", "x"), ("age", "old"))))
    assert typed.value.error_code == "input_invalid"
    # A field the server did not ask for (none, for a tool approval) is the owner's typo.
    with pytest.raises(UsageError) as unknown:
        reply_for("elicitation", TOOL_APPROVAL, Choice("answer", answers=(("x", "1"),)))
    assert unknown.value.error_code == "unknown_question_id"
    assert window_choice("elicitation", ELICIT) == Choice("decline")


def test_an_elicitations_live_details_carry_the_message_and_each_field() -> None:
    details = live_details("elicitation", ELICIT)
    assert details["message"] == "CANARY what is your name?"
    fields = {f["id"]: f for f in details["fields"]}
    assert fields["name"]["required"] is True and fields["name"]["title"] == "CANARY name"
    assert fields["colour"]["options"] == ["red", "green"]
    tool = live_details("elicitation", TOOL_APPROVAL)
    assert tool["tool_approval"] is True
    assert tool["tool_params"] == [{"name": "m", "value": "CANARY"}]


def test_fields_for_an_mcp_server_nobody_here_holds_are_refused_and_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    goals = GateStore(tmp_path)
    facts = compact_facts("elicitation", ELICIT, Binding("s", "g"), 1)
    facts["holder_pid"] = -1  # held by no process of this test
    gate = goals.request_gate("g", summary(facts), actor="owner", host=facts)
    log = tmp_path / "goals" / "g" / "gates.jsonl"
    before = log.read_bytes()
    desk = HostRequestDesk(goals)
    with pytest.raises(StateError) as refused:
        desk.decide(
            "g", gate.gate_id, Choice("answer", answers=(("name", "Ada"),)), actor="owner-cli"
        )
    assert refused.value.error_code == "elicitation_not_held"
    assert log.read_bytes() == before
    declined = desk.decide("g", gate.gate_id, Choice("decline"), actor="owner-cli")
    assert declined.status == "rejected"


def test_an_answer_is_kept_only_for_a_question_on_record_as_not_secret() -> None:
    params = {
        "questions": [
            {"id": "/home/me/secret-id", "header": "Token", "isSecret": True},
            {"id": "db", "header": "Database"},
        ]
    }
    facts = compact_facts("question", params, Binding("s", "g"), 1)
    assert [q["id"] for q in facts["questions"]] == ["q0", "db"]
    choice = Choice("answer", answers=(("/home/me/secret-id", "hunter2"), ("db", "SQLite")))
    assert kept_answers(facts, choice) == {"answers": {"db": "SQLite"}}


class _RecordingProc:
    """Stands in for the app-server connection: what the desk answered codex."""

    def __init__(self) -> None:
        self.replies: list[tuple[object, object]] = []

    def reply(self, request_id: object, result: object = None, **_: object) -> bool:
        self.replies.append((request_id, result))
        return True


def test_a_decision_the_record_would_refuse_is_never_answered_to_codex(tmp_path: Path) -> None:
    """Codex acts on an answer at once, so what the gate log would refuse (an unknown
    decider, an unsafe reason) is refused before the answer, and the request stays live."""
    from loopx_chat.codex.host_connection import ServerRequest

    goals = GateStore(tmp_path)
    desk = HostRequestDesk(goals, decision_timeout=600)
    desk.bind("thread-1", "s", "g")
    proc = _RecordingProc()
    params = {
        "threadId": "thread-1",
        "turnId": "t",
        "itemId": "i",
        "command": "/bin/bash -lc 'touch f'",
        "cwd": str(tmp_path),
    }
    request = ServerRequest(7, "item/commandExecution/requestApproval", params)
    try:
        assert desk.take(proc, request)  # type: ignore[arg-type]
        (gate,) = goals.gates("g")
        log = tmp_path / "goals" / "g" / "gates.jsonl"
        before = log.read_bytes()
        for actor, reason in (("someone", None), ("owner-cli", "line\x1b[2Jone")):
            with pytest.raises(UsageError) as refused:
                desk.decide("g", gate.gate_id, Choice("approve"), actor=actor, reason=reason)
            assert refused.value.error_code in ("usage_error", "unsafe_text")
        assert proc.replies == [] and desk.live(gate.gate_id) is not None
        assert log.read_bytes() == before
        decided = desk.decide("g", gate.gate_id, Choice("approve"), actor="owner-cli")
        assert decided.status == "approved"
        assert proc.replies == [(7, {"decision": "accept"})]
    finally:
        desk.close()

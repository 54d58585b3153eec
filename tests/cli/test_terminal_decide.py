"""What the lines typed at a foreground chat's terminal mean, per question or field."""

from __future__ import annotations

from typing import Any

from loopx_chat.cli.terminal_decide import choice_for_each
from loopx_chat.codex.host_connection import ServerRequest
from loopx_chat.controller.host_requests import Choice, Live


def _live(kind: str, details: dict[str, Any]) -> Live:
    request = ServerRequest(1, "m", {})
    return Live("host-1", "g", "s", "t", kind, None, request, details, 0.0)  # type: ignore[arg-type]


def test_each_question_takes_its_own_line_a_number_meaning_its_option() -> None:
    asked = _live(
        "question",
        {
            "questions": [
                {"id": "db", "options": ["SQLite", "Postgres"]},
                {"id": "name", "options": ["main"]},
                {"id": "skip", "options": []},
            ]
        },
    )
    assert choice_for_each(asked, ["2\n", "my-db\n", "\n"]) == Choice(
        "answer", answers=(("db", "Postgres"), ("name", "my-db"))
    )
    assert choice_for_each(asked, ["\n", "\n", "\n"]) == Choice("decline")
    one = _live("question", {"questions": [{"id": "db", "options": ["SQLite"]}]})
    assert choice_for_each(one, ["1\n"]) == Choice("answer", answer="SQLite")


def test_an_mcp_servers_fields_each_take_a_line_and_a_tool_approval_one_word() -> None:
    fields = _live(
        "elicitation",
        {"fields": [{"id": "name", "options": []}, {"id": "colour", "options": ["red", "green"]}]},
    )
    assert choice_for_each(fields, ["Ada\n", "2\n"]) == Choice(
        "answer", answers=(("name", "Ada"), ("colour", "green"))
    )
    tool = _live("elicitation", {"fields": []})
    assert choice_for_each(tool, ["y\n"]) == Choice("approve")
    assert choice_for_each(tool, ["c\n"]) == Choice("cancel")
    assert choice_for_each(tool, ["\n"]) == Choice("decline")

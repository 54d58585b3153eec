"""The one control-character filter: ESCAPES keeps a value on one printable line and loses
nothing (the PICTURES mode is tested with the terminal, tests/cli/test_terminal_text.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loopx_chat.visible_text import ControlMode, visible_text


@given(st.text())
def test_escapes_leave_one_printable_line_that_decodes_back(text: str) -> None:
    shown = visible_text(text, ControlMode.ESCAPES)
    assert shown.isprintable() and "\n" not in shown
    if "\\" not in text:  # a backslash the text had is kept as it is, so only then it decodes
        assert shown.encode("latin-1", "backslashreplace").decode("unicode_escape") == text


def test_escapes_name_what_a_log_line_must_not_obey() -> None:
    line = visible_text("GET /x\r\nforged: 1\u202e\x1b[2J", ControlMode.ESCAPES)
    assert line == "GET /x\\r\\nforged: 1\\u202e\\x1b[2J"
    assert visible_text("plain", ControlMode.ESCAPES) == "plain"

"""The fast path's option table is the click commands' options, and its parser reads a line
the way click does or not at all (`cli/chat_argv.py`)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from loopx_chat.cli import main
from loopx_chat.cli.chat_argv import CHAT, GLOBAL, SEND, SEND_ARGUMENTS, Kind, Opt, parse
from loopx_chat.cli.chat_cmd import chat, chat_send


def _as_table(command: click.Command) -> set[Opt]:
    """A click command's options (help and version aside) as the fast path's table says them."""
    rows = set()
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in ("help", "version"):
            continue
        (flag,) = param.opts
        assert not param.secondary_opts and not param.multiple and param.nargs == 1, flag
        kind, choices = Kind.TEXT, ()
        if param.is_flag:
            kind = Kind.FLAG
        elif isinstance(param.type, click.Choice):
            kind, choices = Kind.CHOICE, tuple(param.type.choices)
        elif isinstance(param.type, click.FloatRange):
            assert (param.type.min, param.type.min_open, param.type.max) == (0, True, None)
            kind = Kind.SECONDS
        elif isinstance(param.type, click.Path):
            assert not param.type.exists and not param.type.allow_dash, flag
            assert not param.type.resolve_path and param.type.readable, flag
            kind = Kind.PATH
        else:
            assert param.type is click.STRING, flag
        rows.add(Opt(flag, str(param.name), kind, choices, param.envvar))
    return rows


@pytest.mark.parametrize(
    ("command", "table"), [(main, GLOBAL), (chat, CHAT), (chat_send, SEND)], ids=str
)
def test_the_table_is_the_click_commands_options(command: click.Command, table: tuple) -> None:
    assert _as_table(command) == set(table)


def test_the_arguments_are_the_click_commands() -> None:
    arguments = [p for p in chat_send.params if isinstance(p, click.Argument)]
    assert [a.name for a in arguments] == list(SEND_ARGUMENTS)
    assert [a.required for a in arguments] == [True, False]


def test_it_reads_what_click_reads() -> None:
    line = parse(
        [
            *("--state-dir", "/s", "chat", "--sandbox=workspace-write", "--idle-timeout", "30"),
            *("send", "--plan", "S", "--decision-timeout", "2.5", "--", "--json"),
        ]
    )
    assert line is not None
    assert line.global_options == {"state_dir": "/s"}
    assert line.chat_options == {"sandbox": "workspace-write", "idle_timeout": 30.0}
    assert line.send_options == {"plan": True, "decision_timeout": 2.5}
    assert (line.session_id, line.message) == ("S", "--json")


@pytest.mark.parametrize(
    "words",
    [
        ["chat", "send", "S", "--help"],
        ["-h", "chat", "send", "S", "m"],
        ["--version"],
        ["chat", "new", "--goal", "g", "m"],
        ["chat", "send"],
        ["chat", "send", "S", "a", "b"],
        ["chat", "--idle-timeout", "-1", "send", "S", "m"],
        ["chat", "--idle-timeout", "0.0", "send", "S", "m"],
        ["chat", "--idle-timeout", " 5", "send", "S", "m"],
        ["chat", "send", "S", "--approval", "NEVER", "m"],
        ["chat", "send", "S", "--plan=yes", "m"],
        ["chat", "send", "S", "--client-turn-id"],
        ["chat", "send", "S", "--client-turn-id", "--json", "m"],
        ["chat", "send", "S", "--jso", "m"],
        ["--state-dir=", "chat", "send", "S", "m"],
        ["chat", "send", "S", "caf\udce9"],
        ["status"],
        [],
    ],
)
def test_it_leaves_to_click_what_it_might_read_otherwise(words: list[str]) -> None:
    assert parse(words) is None


def test_importing_the_command_line_loads_no_click() -> None:
    code = "import sys, loopx_chat.cli, loopx_chat.cli.served_send; print('click' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"

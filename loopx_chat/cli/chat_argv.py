"""The command line of `loopx-chat [global options] chat [chat options] send ...`, read
without click: the option table and a small parser that reads only what click would read
the same way.

Owns `GLOBAL`, `CHAT` and `SEND`, the options of the click group `main`, the group `chat`
and the command `chat send` as data (a test proves them equal to the click commands'
parameters, so the two never drift), and `parse`, which answers a `ChatLine` for a command
line it reads exactly as click does, else None: `--help`, `--version`, an option it does not
know, a value click would convert otherwise or refuse (a number it does not write the plain
way, a choice not spelled exactly), too few or too many arguments, or a word that is not
valid text. None is never an error: the caller then hands the line to click, which answers
it (and says any error) itself. Pure: no I/O, no click.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from loopx_chat.codex.turn_defaults import APPROVAL_POLICIES, FIRST_OUTPUT_ENV
from loopx_chat.valid_text import invalid_at


class Kind(Enum):
    FLAG = "flag"  # no value: True when given
    TEXT = "text"  # any string
    PATH = "path"  # a path (click.Path: what it names is checked by the caller)
    CHOICE = "choice"  # one of `choices`, spelled exactly
    SECONDS = "seconds"  # a positive number of seconds (click.FloatRange(min=0, min_open))


@dataclass(frozen=True)
class Opt:
    flag: str  # the one spelling, `--name`
    dest: str  # the click parameter's name
    kind: Kind
    choices: tuple[str, ...] = ()
    envvar: str | None = None  # click reads it when the option is not given


GLOBAL: tuple[Opt, ...] = (
    Opt("--state-dir", "state_dir", Kind.PATH),
    Opt("--codex-bin", "codex_bin", Kind.TEXT),
    Opt("--direct", "direct", Kind.FLAG),
)
CHAT: tuple[Opt, ...] = (
    Opt("--sandbox", "sandbox", Kind.CHOICE, ("read-only", "workspace-write")),
    Opt("--idle-timeout", "idle_timeout", Kind.SECONDS),
    Opt("--turn-timeout", "turn_timeout", Kind.SECONDS),
    Opt("--first-output-timeout", "first_output_timeout", Kind.SECONDS, envvar=FIRST_OUTPUT_ENV),
)
SEND: tuple[Opt, ...] = (
    Opt("--client-turn-id", "client_turn_id", Kind.TEXT),
    Opt("--approval", "approval", Kind.CHOICE, APPROVAL_POLICIES),
    Opt("--plan", "plan", Kind.FLAG),
    Opt("--decision-timeout", "decision_timeout", Kind.SECONDS),
    Opt("--json", "as_json", Kind.FLAG),
    Opt("--file", "message_file", Kind.PATH),
)
SEND_ARGUMENTS = ("session_id", "message")  # SESSION_ID required, MESSAGE optional
# A number as click's float() reads it and as a person writes it; anything else is click's.
_PLAIN_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?\Z")

Value = str | float | bool


@dataclass(frozen=True)
class ChatLine:
    """A `chat send` command line, read: each level's options given (by click name, converted
    as click converts them), and the command's arguments."""

    global_options: Mapping[str, Value]
    chat_options: Mapping[str, Value]
    send_options: Mapping[str, Value]
    session_id: str
    message: str | None


def _value(opt: Opt, raw: str) -> Value | None:
    """`raw` converted as click converts it for `opt`, or None when click's reading might
    differ (or click would refuse it)."""
    if opt.kind is Kind.CHOICE:
        return raw if raw in opt.choices else None
    if opt.kind is Kind.SECONDS:
        if not _PLAIN_NUMBER.match(raw) or float(raw) <= 0:
            return None
        return float(raw)
    if opt.kind is Kind.PATH and not raw:
        return None
    return raw


def _option(
    table: Sequence[Opt], words: Sequence[str], at: int, into: dict[str, Value]
) -> int | None:
    """Read the option at `words[at]` into `into`; the index after it, or None."""
    name, eq, inline = words[at].partition("=")
    opt = next((o for o in table if o.flag == name), None)
    if opt is None:
        return None
    if opt.kind is Kind.FLAG:
        if eq:
            return None  # click: "does not take a value"
        into[opt.dest] = True
        return at + 1
    if eq:
        raw, after = inline, at + 1
    elif at + 1 < len(words) and not words[at + 1].startswith("-"):
        raw, after = words[at + 1], at + 2
    else:
        return None  # no value, or one that looks like an option: click's to judge
    value = _value(opt, raw)
    if value is None:
        return None
    into[opt.dest] = value
    return after


def _group(
    table: Sequence[Opt], words: Sequence[str], at: int, into: dict[str, Value]
) -> int | None:
    """A group's options up to its subcommand's name: that name's index, or None."""
    while at < len(words) and words[at].startswith("-"):
        found = _option(table, words, at, into)
        if found is None:
            return None
        at = found
    return at if at < len(words) else None


def parse(words: Sequence[str]) -> ChatLine | None:
    """`words` (argv after the program) as a `chat send` line, or None (see the module)."""
    if any(invalid_at(word) is not None for word in words):
        return None  # click's `invalid_text`, said the one way
    global_options: dict[str, Value] = {}
    chat_options: dict[str, Value] = {}
    send_options: dict[str, Value] = {}
    at = _group(GLOBAL, words, 0, global_options)
    if at is None or words[at] != "chat":
        return None
    at = _group(CHAT, words, at + 1, chat_options)
    if at is None or words[at] != "send":
        return None
    arguments: list[str] = []
    at += 1
    while at < len(words):
        word = words[at]
        if word == "--":
            arguments += words[at + 1 :]
            break
        if word.startswith("-") and word != "-":
            found = _option(SEND, words, at, send_options)
            if found is None:
                return None
            at = found
        else:
            arguments.append(word)
            at += 1
    if not 1 <= len(arguments) <= len(SEND_ARGUMENTS):
        return None
    return ChatLine(
        global_options,
        chat_options,
        send_options,
        arguments[0],
        arguments[1] if len(arguments) > 1 else None,
    )

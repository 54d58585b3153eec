"""A foreground `chat new|send` or `goal run` on a terminal asks the owner there, as codex does.

Owns the prompt: when codex asks during this command's turn, the request is shown on stderr
(the full command, its folder and the justification, or the question and its options;
this is the owner's own terminal) and one line is read from stdin: `y` approve once, `s`
approve for this session, `c` stop the turn, anything else (or Enter) declines; for a
question, an option's number or a typed answer (a secret one without echo), each question
of the request in turn; for an MCP server's request, each field in turn (Enter on every
one declines), or, with no fields, `y` / `c` / anything else declines. The answers go
to the live request through the desk (`owner-terminal`); a decision made meanwhile on
another surface wins, and the line is then dropped. Nothing typed is logged or stored.
"""

from __future__ import annotations

import getpass
import queue
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.host_requests import Choice, Live
from loopx_chat.errors import LoopxChatError
from loopx_chat.visible_text import ControlMode, visible_text

_APPROVAL_WORDS = {"y": Choice("approve"), "s": Choice("approve", for_session=True)}


def printable(text: str) -> str:
    return visible_text(text, ControlMode.PICTURES)


def _show(live: Live, out: TextIO) -> None:
    details = live.details
    print(f"\n[loopx-chat] Codex asks ({live.kind}, gate {live.gate_id}):", file=out)
    for key, label in (
        ("command", "run"),
        ("cwd", "in"),
        ("reason", "why"),
        ("server", "MCP server"),
        ("message", "asks"),
        ("url", "opens"),
    ):
        if details.get(key):
            print(f"  {label}: {printable(str(details[key]))}", file=out)
    for param in details.get("tool_params") or []:
        name, value = printable(str(param.get("name"))), printable(str(param.get("value")))
        print(f"  {name}: {value}", file=out)
    out.flush()


def _show_question(q: Mapping[str, Any], out: TextIO) -> None:
    print(
        f"  {printable(str(q.get('header', '')))}: {printable(str(q.get('question', '')))}",
        file=out,
    )
    for number, option in enumerate(q.get("options") or [], start=1):
        print(f"    {number}. {printable(str(option))}", file=out)
    out.flush()


def _show_field(spec: Mapping[str, Any], out: TextIO) -> None:
    need = " (required)" if spec.get("required") else ""
    about = f" - {printable(str(spec['description']))}" if spec.get("description") else ""
    print(f"  {printable(str(spec.get('title', '')))}{need}{about}", file=out)
    for number, option in enumerate(spec.get("options") or [], start=1):
        print(f"    {number}. {printable(str(option))}", file=out)
    out.flush()


def answer_for(options: Sequence[str], line: str) -> str:
    """An option's number means that option; anything else is the typed text."""
    text = line.strip()
    if text.isdigit() and 1 <= int(text) <= len(options):
        return str(options[int(text) - 1])
    return text


def _each(asked: Sequence[Mapping[str, Any]], lines: Sequence[str]) -> Choice:
    """One line per question (or field), in order; an empty line leaves it unanswered."""
    pairs = tuple(
        (str(q.get("id")), answer_for(list(q.get("options") or []), line))
        for q, line in zip(asked, lines, strict=False)
    )
    kept = tuple(pair for pair in pairs if pair[1])
    return Choice("answer", answers=kept) if kept else Choice("decline")


def choice_for_each(live: Live, lines: Sequence[str]) -> Choice:
    """What the lines typed for each question (or field), in order, mean together."""
    if live.kind == "elicitation":
        fields = live.details.get("fields") or []
        if fields:
            return _each(fields, lines)
        # codex's own "may this MCP tool run?", or a request with no fields
        word = lines[0].strip().lower() if lines else ""
        return {"y": Choice("approve"), "c": Choice("cancel")}.get(word, Choice("decline"))
    questions = live.details.get("questions") or []
    if len(questions) > 1:
        return _each(questions, lines)
    return choice_for(live, lines[0] if lines else "")


def choice_for(live: Live, line: str) -> Choice:
    """What a typed line means for a one-question request or an approval."""
    text = line.strip()
    if live.kind != "question":
        if text.lower() == "c":
            return Choice("cancel")
        return _APPROVAL_WORDS.get(text.lower(), Choice("decline"))
    if not text:
        return Choice("decline")
    questions = live.details.get("questions") or []
    options = list(questions[0].get("options") or []) if questions else []
    return Choice("answer", answer=answer_for(options, text))


class TerminalDecider:
    """One prompt at a time, on its own thread, while the turn runs on the main one."""

    def __init__(self, controller: ChatController, out: TextIO = sys.stderr) -> None:
        self._controller = controller
        self._out = out
        self._asks: queue.Queue[Live] = queue.Queue()
        threading.Thread(target=self._work, name="terminal-decide", daemon=True).start()
        controller.host_requests.listeners.append(self._asks.put)

    def _line(self, prompt: str, secret: bool) -> str:
        if secret:
            return getpass.getpass(prompt, stream=self._out)
        print(prompt, end="", file=self._out, flush=True)
        return sys.stdin.readline()

    def _read(self, live: Live) -> list[str]:
        """One line per question (or field), each asked in turn; one for an approval."""
        answer = "  your answer (a number, text, or Enter to skip): "
        if live.kind == "question":
            lines = []
            for q in live.details.get("questions") or []:
                _show_question(q, self._out)
                lines.append(self._line(answer, bool(q.get("secret"))))
            return lines
        if live.kind == "elicitation" and live.details.get("fields"):
            lines = []
            for spec in live.details["fields"]:
                _show_field(spec, self._out)
                lines.append(self._line(answer, False))
            return lines
        if live.kind == "elicitation":
            return [self._line("  allow? [y]es / [c]ancel / [N]o: ", False)]
        return [self._line("  approve? [y]es once / [s]ession / [c]ancel the turn / [N]o: ", False)]

    def _work(self) -> None:
        while True:
            live = self._asks.get()
            _show(live, self._out)
            lines = self._read(live)
            desk = self._controller.host_requests
            if desk.live(live.gate_id) is None:
                print("  (decided elsewhere meanwhile)", file=self._out, flush=True)
                continue
            try:
                desk.decide(
                    live.goal_id,
                    live.gate_id,
                    choice_for_each(live, lines),
                    actor="owner-terminal",
                )
            except LoopxChatError as exc:
                print(f"  not recorded [{exc.error_code}]", file=self._out, flush=True)

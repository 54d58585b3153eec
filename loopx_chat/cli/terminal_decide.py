"""A foreground `chat new|send` on a terminal asks the owner there, as codex's own UI does.

Owns the prompt: when codex asks during this command's turn, the request is shown on stderr
(the full command, its folder and the justification, or the question and its options;
this is the owner's own terminal) and one line is read from stdin: `y` approve once, `s`
approve for this session, `c` stop the turn, anything else (or Enter) declines; for a
question, an option's number or a typed answer (a secret one without echo). The answer goes
to the live request through the desk (`owner-terminal`); a decision made meanwhile on
another surface wins, and the line is then dropped. Nothing typed is logged or stored.
"""

from __future__ import annotations

import getpass
import queue
import sys
import threading
from typing import TextIO

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
    for key, label in (("command", "run"), ("cwd", "in"), ("reason", "why")):
        if details.get(key):
            print(f"  {label}: {printable(str(details[key]))}", file=out)
    for q in details.get("questions") or []:
        print(
            f"  {printable(str(q.get('header', '')))}: {printable(str(q.get('question', '')))}",
            file=out,
        )
        for number, option in enumerate(q.get("options") or [], start=1):
            print(f"    {number}. {printable(str(option))}", file=out)
    out.flush()


def choice_for(live: Live, line: str) -> Choice:
    """What a typed line means for this request."""
    text = line.strip()
    if live.kind != "question":
        if text.lower() == "c":
            return Choice("cancel")
        return _APPROVAL_WORDS.get(text.lower(), Choice("decline"))
    if not text:
        return Choice("decline")
    questions = live.details.get("questions") or []
    options = list(questions[0].get("options") or []) if questions else []
    if text.isdigit() and 1 <= int(text) <= len(options):
        return Choice("answer", answer=str(options[int(text) - 1]))
    return Choice("answer", answer=text)


class TerminalDecider:
    """One prompt at a time, on its own thread, while the turn runs on the main one."""

    def __init__(self, controller: ChatController, out: TextIO = sys.stderr) -> None:
        self._controller = controller
        self._out = out
        self._asks: queue.Queue[Live] = queue.Queue()
        threading.Thread(target=self._work, name="terminal-decide", daemon=True).start()
        controller.host_requests.listeners.append(self._asks.put)

    def _read(self, live: Live) -> str:
        secret = any(q.get("secret") for q in live.details.get("questions") or [])
        if live.kind == "question":
            prompt = "  your answer (a number, text, or Enter to skip): "
        else:
            prompt = "  approve? [y]es once / [s]ession / [c]ancel the turn / [N]o: "
        if secret:
            return getpass.getpass(prompt, stream=self._out)
        print(prompt, end="", file=self._out, flush=True)
        return sys.stdin.readline()

    def _work(self) -> None:
        while True:
            live = self._asks.get()
            _show(live, self._out)
            line = self._read(live)
            desk = self._controller.host_requests
            if desk.live(live.gate_id) is None:
                print("  (decided elsewhere meanwhile)", file=self._out, flush=True)
                continue
            try:
                desk.decide(
                    live.goal_id, live.gate_id, choice_for(live, line), actor="owner-terminal"
                )
            except LoopxChatError as exc:
                print(f"  not recorded [{exc.error_code}]", file=self._out, flush=True)

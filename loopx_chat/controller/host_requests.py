"""What codex asks its owner (approvals, questions, MCP elicitations), held live until the
owner decides.

Owns the desk: each approval, question or MCP server's elicitation codex sends during a turn
becomes a blocking host gate on the goal (compact facts only, see `compact_facts`), while
the request itself and its live details (the full command, its cwd, the justification, the
questions and their options, an MCP server's message and fields) stay in this process's
memory, for the page and the terminal, and are never written to state, logs, status, events
or notices. A decision from any surface is answered to the live request; one recorded by
another process (`gate resolve` without the service) is picked up by polling the goal's gate
log. A request with several questions (or an MCP server's several fields) is answered per
question id; a secret question's answer, and every answer to an MCP server, is sent to codex
and never recorded. When the decision window passes, the gate stays open and the model is
told the owner has not answered yet: a question gets that as its answer, and an approval or
an MCP server's request is declined after `turn/steer` added the note to the waiting turn.
A decision that can no longer reach codex (window passed, turn ended, host restarted) is
carried into the session's next turn as one line.

It never answers a request the owner did not decide, except when the window passes, and
never re-asks codex for a request codex forgot: when the holder dies, the gate is marked
`expired` on the next start.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopx_chat.codex.host_connection import HostConnection, ServerRequest
from loopx_chat.codex.turn_defaults import DECISION_TIMEOUT_SEC
from loopx_chat.controller import elicitation
from loopx_chat.errors import LoopxChatError, StateError, UsageError
from loopx_chat.goals.gate_store import (
    HOST_GATE_PREFIX,
    Gate,
    GateStore,
    check_decision,
    public_text,
)
from loopx_chat.pids import pid_alive

KINDS = {
    "item/commandExecution/requestApproval": "command",
    "item/fileChange/requestApproval": "file_change",
    "item/permissions/requestApproval": "permissions",
    "item/tool/requestUserInput": "question",
    elicitation.METHOD: "elicitation",
}
POLL_SEC = 0.5
STEER_TIMEOUT_SEC = 5.0
HOLD_WAIT_SEC = 1.0
# What the model is told when the decision window passes and the owner has not decided.
NOT_ANSWERED = (
    "The owner has not answered yet. The request stays open for them; their decision "
    "comes in a later turn. Do not ask again until then."
)
# What the owner may choose. `amend` (acceptWithExecpolicyAmendment) writes a rule into the
# user's Codex home that allows the command's prefix in every thread from then on.
CHOICES = ("approve", "decline", "cancel", "amend", "answer")
_SAFE_NAME = re.compile(r"[A-Za-z0-9._+-]{1,40}")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})


@dataclass(frozen=True)
class Choice:
    decision: str  # one of CHOICES
    for_session: bool = False
    answer: str | None = None  # a one-question request's answer (an option label or text)
    # Per question id (or an MCP server's field name): (id, text) pairs, in order.
    answers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Binding:
    session_id: str
    goal_id: str
    decision_timeout: float | None = None  # the turn's own window, else the desk's


@dataclass
class Live:
    """One pending request in this process. `details` never leave memory."""

    gate_id: str
    goal_id: str
    session_id: str
    thread_id: str
    kind: str
    proc: HostConnection
    request: ServerRequest
    details: dict[str, Any]
    received: float  # monotonic
    timer: threading.Timer | None = None
    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


# -- pure helpers --------------------------------------------------------------------------


def program_of(command: object) -> tuple[str, int]:
    """(base name of the program, argument count) of a command, through one `sh -c` layer.

    Never the arguments, never a path: a name that is not a plain word is "a program"."""
    try:
        if isinstance(command, str):
            argv = shlex.split(command)
        elif isinstance(command, Iterable):
            argv = [str(c) for c in command]
        else:
            return "a program", 0
        if len(argv) >= 3 and posixpath.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc"):
            argv = shlex.split(argv[2])
    except (ValueError, TypeError):
        return "a program", 0
    if not argv:
        return "a program", 0
    name = posixpath.basename(argv[0])
    return (name if _SAFE_NAME.fullmatch(name) else "a program"), len(argv) - 1


def _safe(text: object, what: str) -> str | None:
    try:
        return public_text(text, what)[:80]
    except UsageError:
        return None


def _questions(params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = params.get("questions")
    return [q for q in found if isinstance(q, Mapping)] if isinstance(found, list) else []


def compact_facts(
    kind: str, params: Mapping[str, Any], binding: Binding, request_id: object
) -> dict[str, Any]:
    """What a host gate records: kind, ids and a public-safe summary, nothing else."""
    facts: dict[str, Any] = {
        "kind": kind,
        "session_id": binding.session_id,
        "thread_id": str(params.get("threadId", ""))[:80],
        "turn_id": str(params.get("turnId", ""))[:80],
        "item_id": str(params.get("itemId", ""))[:80],
        "request_id": request_id if isinstance(request_id, int) else str(request_id)[:80],
        "state": "live",
        "holder_pid": os.getpid(),
        "received_at": time.time(),
    }
    if kind == "command":
        facts["program"], facts["argc"] = program_of(params.get("command", ""))
    if kind == "question":
        questions = _questions(params)
        first = questions[0] if questions else {}
        facts["header"] = _safe(first.get("header"), "question header") or "a question"
        labels = [
            _safe(o.get("label"), "option")
            for o in first.get("options") or []
            if isinstance(o, Mapping)
        ]
        facts["options"] = [label for label in labels if label][:8]
        facts["secret"] = any(bool(q.get("isSecret")) for q in questions)
        facts["questions"] = [
            {
                "id": _safe(q.get("id"), "question id") or f"q{n}",
                "header": _safe(q.get("header"), "question header") or "a question",
                "secret": bool(q.get("isSecret")),
            }
            for n, q in enumerate(questions[:8])
        ]
    if kind == "elicitation":
        facts.update(elicitation.facts(params))
        facts["secret"] = True  # what the owner gives an MCP server is never recorded
    return facts


def summary(facts: Mapping[str, Any]) -> str:
    kind = facts.get("kind")
    if kind == "command":
        argc = int(facts.get("argc", 0))
        plural = "" if argc == 1 else "s"
        return f"Codex asks to run `{facts.get('program')}` ({argc} argument{plural})"
    if kind == "question":
        options = facts.get("options") or []
        listed = f" ({' / '.join(options)})" if options else ""
        count = len(facts.get("questions") or [])
        more = f" and {count - 1} more question{'' if count == 2 else 's'}" if count > 1 else ""
        return f"Codex asks: {facts.get('header')}{listed}{more}"
    if kind == "elicitation":
        return elicitation.summary(facts)
    if kind == "file_change":
        return "Codex asks to change files"
    return "Codex asks for more permissions"


def live_details(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """What the owner sees while deciding; memory only."""
    if kind == "elicitation":
        return elicitation.details(params)
    details: dict[str, Any] = {"kind": kind}
    for key in ("command", "cwd", "reason", "grantRoot"):
        if isinstance(params.get(key), str):
            details[key] = params[key]
    if kind == "command":
        details["amendment"] = _amendment(params) is not None
    if kind == "permissions":
        details["permissions"] = params.get("permissions")
    if kind == "question":
        details["questions"] = [
            {
                "id": str(q.get("id", "")),
                "header": str(q.get("header", "")),
                "question": str(q.get("question", "")),
                "secret": bool(q.get("isSecret")),
                "other": bool(q.get("isOther", True)),
                "options": [
                    str(o.get("label", ""))
                    for o in q.get("options") or []
                    if isinstance(o, Mapping)
                ],
            }
            for q in _questions(params)
        ]
    return details


def _amendment(params: Mapping[str, Any]) -> Any:
    for option in params.get("availableDecisions") or []:
        if isinstance(option, Mapping) and "acceptWithExecpolicyAmendment" in option:
            return dict(option)
    return None


def reply_for(kind: str, params: Mapping[str, Any], choice: Choice) -> dict[str, Any]:
    """The JSON-RPC result codex 0.171.0 takes for this choice."""
    if kind == "elicitation":
        return elicitation.reply(params, choice.decision, dict(choice.answers))
    if kind == "question":
        if choice.decision != "answer":
            return {"answers": {}}
        if choice.answers:
            return {"answers": {qid: {"answers": [text]} for qid, text in choice.answers}}
        if choice.answer is None:
            return {"answers": {}}
        return {
            "answers": {
                str(q.get("id", "")): {"answers": [choice.answer]} for q in _questions(params)
            }
        }
    if kind == "permissions":
        if choice.decision == "approve":
            scope = "session" if choice.for_session else "turn"
            return {"permissions": params.get("permissions") or {}, "scope": scope}
        return {"permissions": {}, "scope": "turn"}
    if choice.decision == "approve":
        return {"decision": "acceptForSession" if choice.for_session else "accept"}
    if choice.decision == "amend":
        amendment = _amendment(params)
        if amendment is None:
            raise UsageError("codex offered no rule for this command", error_code="usage_error")
        return {"decision": amendment}
    if choice.decision == "cancel":
        return {"decision": "cancel"}
    return {"decision": "decline"}


def window_choice(kind: str, params: Mapping[str, Any]) -> Choice:
    """The answer when the window passes: a question is told, per question, that the owner
    has not answered yet; anything else is declined (the model is told by a steer)."""
    if kind != "question":
        return Choice("decline")
    ids = [str(q.get("id", "")) for q in _questions(params)]
    return Choice("answer", answers=tuple((qid, NOT_ANSWERED) for qid in ids))


def question_ids(kind: str, params: Mapping[str, Any] | None, host: Mapping[str, Any]) -> list[str]:
    """The ids a per-question answer may name: from the live request, else the gate's facts
    (None-free; an old gate without them gives [])."""
    if params is not None:
        if kind == "elicitation":
            return elicitation.field_ids(params)
        return [str(q.get("id", "")) for q in _questions(params)]
    return [str(q.get("id")) for q in host.get("questions") or [] if isinstance(q, Mapping)]


def normalized(choice: Choice, ids: list[str]) -> Choice:
    """A bare answer becomes the one question's answer; a bare answer to several questions,
    or an answer to an id the request does not have, is refused."""
    unknown = [qid for qid, _ in choice.answers if ids and qid not in ids]
    if unknown:
        raise UsageError(
            f"the request has no question {unknown[0]!r}; its questions: {', '.join(ids)}",
            error_code="unknown_question_id",
        )
    if choice.answer is None or choice.answers:
        return choice
    if len(ids) > 1:
        raise UsageError(
            f"this request asks {len(ids)} questions: answer each as ID=TEXT "
            f"(ids: {', '.join(ids)})",
            error_code="answer_needs_question_id",
        )
    if len(ids) == 1:
        pair = ((ids[0], choice.answer),)
        return Choice(choice.decision, choice.for_session, choice.answer, pair)
    return choice


def gate_decision(choice: Choice) -> str:
    """The goal gate's own decision word for a host choice."""
    return "approve" if choice.decision in ("approve", "amend", "answer") else "reject"


def carry_line(gate: Gate) -> str:
    """The one compact line a decision that could not reach codex becomes in the next turn."""
    host = gate.host or {}
    kind = host.get("kind")
    if kind == "command":
        argc = int(host.get("argc", 0))
        what = f"running `{host.get('program')}` ({argc} argument{'' if argc == 1 else 's'})"
        if gate.status == "approved":
            return f"The owner approved {what}; run it again."
        return f"The owner declined {what}; do not run it."
    if kind == "elicitation":
        server = host.get("server", "an MCP server")
        if gate.status == "approved":
            return (
                f"The owner accepted the `{server}` MCP server's request; "
                "ask again if you still need it."
            )
        return f"The owner declined the `{server}` MCP server's request."
    if kind == "question" and len(host.get("questions") or []) > 1:
        answers = host.get("answers")
        if not isinstance(answers, Mapping):
            answers = {}
        said = []
        for q in host["questions"]:
            text = answers.get(q.get("id"))
            if q.get("secret") and gate.status == "approved":
                text = "(the answer is not kept; ask again)"
            said.append(f'"{q.get("header")}": {text or "(not answered)"}')
        return "The owner answered: " + "; ".join(said)
    if kind == "question":
        header = host.get("header", "your question")
        if host.get("secret"):
            return f'The owner answered "{header}" (the answer is not kept); ask again.'
        if host.get("answer"):
            return f'The owner answered "{header}": {host["answer"]}'
        return f'The owner did not answer "{header}".'
    verb = "approved" if gate.status == "approved" else "declined"
    return f"The owner {verb} your request ({kind}); ask again if you still need it."


# -- the desk ------------------------------------------------------------------------------


class HostRequestDesk:
    """Pending host requests of one controller; thread-safe."""

    def __init__(
        self,
        goals: GateStore,
        *,
        decision_timeout: float = DECISION_TIMEOUT_SEC,
    ) -> None:
        self.goals = goals
        self.decision_timeout = decision_timeout
        self._lock = threading.Lock()
        self._bindings: dict[str, Binding] = {}
        self._live: dict[str, Live] = {}
        self.listeners: list[Callable[[Live], None]] = []
        # Called with each host gate once it is recorded, before any listener hears of it,
        # on the app-server's reader: it puts the gate in the inbox of a goal run of this
        # process (`running_goals.gate_posted`) and must never wait on that run.
        self.on_gate: Callable[[Gate], object] | None = None
        # Called on the window's timer before the window's answer goes to codex, with the
        # goal and gate: a goal run of this process takes every input before it (this gate's
        # included) and so has set the goal `blocked` before codex hears the answer and may
        # start a continuation. A bounded wait on the run, never on codex's reader.
        self.before_window: Callable[[str, str], object] | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    # -- binding threads to sessions --------------------------------------------------------
    def bind(
        self,
        thread_id: str,
        session_id: str,
        goal_id: str,
        decision_timeout: float | None = None,
    ) -> None:
        with self._lock:
            self._bindings[thread_id] = Binding(session_id, goal_id, decision_timeout)

    def unbind(self, thread_id: str) -> None:
        """The thread was let go (its app-server closed): it asks nothing more here."""
        with self._lock:
            self._bindings.pop(thread_id, None)

    # -- codex asks ---------------------------------------------------------------------------
    def take(self, proc: HostConnection, request: ServerRequest) -> bool:
        """The app-server reader's holder: True when the request became a live host gate."""
        kind = KINDS.get(request.method)
        thread_id = str(request.params.get("threadId", ""))
        with self._lock:
            binding = self._bindings.get(thread_id)
        if kind is None or binding is None:
            return False
        facts = compact_facts(kind, request.params, binding, request.request_id)
        try:
            gate = self.goals.request_gate(
                binding.goal_id, summary(facts), actor="owner", host=facts
            )
        except LoopxChatError:
            return False  # not recorded: answered by policy (decline), never silently held
        live = Live(
            gate_id=gate.gate_id,
            goal_id=binding.goal_id,
            session_id=binding.session_id,
            thread_id=thread_id,
            kind=kind,
            proc=proc,
            request=request,
            details=live_details(kind, request.params),
            received=time.monotonic(),
        )
        window = binding.decision_timeout or self.decision_timeout
        live.timer = threading.Timer(window, self._window_passed, (gate.gate_id,))
        live.timer.daemon = True
        with self._lock:
            self._live[gate.gate_id] = live
        live.timer.start()
        self._ensure_poller()
        if self.on_gate is not None:
            with contextlib.suppress(Exception):
                self.on_gate(gate)
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):
                listener(live)
        return True

    def live(self, gate_id: str) -> Live | None:
        with self._lock:
            return self._live.get(gate_id)

    def live_gates(self) -> list[Live]:
        with self._lock:
            return list(self._live.values())

    # -- the owner decides -----------------------------------------------------------------
    def decide(
        self, goal_id: str, gate_id: str, choice: Choice, *, actor: str, reason: str | None = None
    ) -> Gate:
        """Answer the live request (if this process holds it) and record the decision."""
        if choice.decision not in CHOICES:
            raise UsageError(
                f"decision must be one of {', '.join(CHOICES)}", error_code="usage_error"
            )
        gate = self.goals.gate(goal_id, gate_id)
        if gate.host is None:
            raise UsageError(f"gate {gate_id} is not a host gate", error_code="usage_error")
        live = self._held(gate)
        if gate.status != "pending":
            raise StateError(
                f"gate {gate_id} was already {gate.status}", error_code="gate_already_resolved"
            )
        host = gate.host or {}
        ids = question_ids(str(host.get("kind")), live.request.params if live else None, host)
        choice = normalized(choice, ids)
        if host.get("kind") == "elicitation" and choice.answers and live is None:
            # What an MCP server is given is never recorded, so it cannot wait in the log.
            raise StateError(
                f"gate {gate_id}: what you give an MCP server goes only to the process that "
                "holds its request (the running service, or the terminal of the chat that "
                "asked); answer it there, or accept/decline without fields",
                error_code="elicitation_not_held",
            )
        record: dict[str, Any] = {"choice": choice.decision, "for_session": choice.for_session}
        record.update(kept_answers(host, choice))
        # Refused now, not after codex was answered: a decision codex acted on is on record.
        check_decision(gate_decision(choice), reason, actor)
        if live is not None and self._answer(live, choice):
            record.update(state="answered", decided_after_ms=_ms_since(live.received))
        else:
            received = (gate.host or {}).get("received_at")
            if isinstance(received, (int, float)):
                record["decided_after_ms"] = int((time.time() - received) * 1000)
        return self.goals.resolve_gate(
            goal_id, gate_id, gate_decision(choice), reason, decided_by=actor, host=record
        )

    def _held(self, gate: Gate) -> Live | None:
        """The live request of `gate` when this process holds it. The gate is on record a
        moment before its request is registered here (`take`), so a decision that arrives in
        between waits for it (at most `HOLD_WAIT_SEC`) rather than missing it."""
        deadline = time.monotonic() + HOLD_WAIT_SEC
        while (live := self.live(gate.gate_id)) is None:
            host = gate.host or {}
            mine = host.get("state") == "live" and host.get("holder_pid") == os.getpid()
            if not mine or time.monotonic() >= deadline:
                return None
            time.sleep(0.01)
        return live

    def _answer(self, live: Live, choice: Choice) -> bool:
        """Send the answer once; False when it was already answered or codex is gone."""
        result = reply_for(live.kind, live.request.params, choice)  # may raise usage_error
        return self._settle(live) and live.proc.reply(live.request.request_id, result=result)

    def _window_passed(self, gate_id: str) -> None:
        live = self.live(gate_id)
        if live is None:
            return
        if self.before_window is not None:
            with contextlib.suppress(Exception):
                self.before_window(live.goal_id, gate_id)
        if live.kind != "question":
            self._steer_not_answered(live)
        with contextlib.suppress(LoopxChatError):
            if self._answer(live, window_choice(live.kind, live.request.params)):
                self.goals.note_host(
                    live.goal_id, gate_id, {"state": "window_passed", "window_passed": True}
                )

    def _steer_not_answered(self, live: Live) -> None:
        """Before the decline: add the note to the waiting turn (`turn/steer`), so the model
        reads it beside "rejected by user". Best effort: a refused steer leaves the decline."""
        params = live.request.params
        turn_id = params.get("turnId")
        if not isinstance(turn_id, str) or not turn_id:
            return
        steer = {
            "threadId": live.thread_id,
            "expectedTurnId": turn_id,
            "input": [
                {"type": "text", "text": f"[loopx-chat] {NOT_ANSWERED}", "text_elements": []}
            ],
        }
        with contextlib.suppress(Exception):
            live.proc.request("turn/steer", steer, STEER_TIMEOUT_SEC)

    def turn_ended(self, thread_id: str) -> None:
        """Codex forgets a request when its turn ends: what is still live here is expired."""
        with self._lock:
            ended = [live for live in self._live.values() if live.thread_id == thread_id]
        for live in ended:
            self._expire(live, "turn ended")

    def close(self) -> None:
        self._stop.set()
        for live in self.live_gates():
            self._expire(live, "host stopped")

    def _expire(self, live: Live, why: str) -> None:
        if not self._settle(live):
            return
        with contextlib.suppress(LoopxChatError):
            self.goals.note_host(live.goal_id, live.gate_id, {"state": "expired", "expired": why})

    def _settle(self, live: Live) -> bool:
        """Mark the request done and no longer live here; False when it already was (answered
        or expired), so each request is settled once."""
        with live.lock:
            if live.done:
                return False
            live.done = True
        if live.timer is not None:
            live.timer.cancel()
        with self._lock:
            self._live.pop(live.gate_id, None)
        return True

    # -- decisions recorded elsewhere --------------------------------------------------------
    def _ensure_poller(self) -> None:
        with self._lock:
            if self._poller is not None:
                return
            self._poller = threading.Thread(target=self._poll, name="host-requests", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SEC):
            self.deliver_decided()

    def deliver_decided(self, goal_id: str | None = None) -> None:
        """Send now the decisions recorded elsewhere (another shell's `gate resolve`) on the
        goal's requests this process holds (every goal's: None), rather than at the next poll."""
        for live in self.live_gates():
            if goal_id is not None and live.goal_id != goal_id:
                continue
            with contextlib.suppress(LoopxChatError):
                gate = self.goals.gate(live.goal_id, live.gate_id)
                if gate.status != "pending":
                    self._deliver_recorded(live, gate)

    def _deliver_recorded(self, live: Live, gate: Gate) -> None:
        host = gate.host or {}
        kept = host.get("answers")
        if not isinstance(kept, Mapping):
            kept = {}
        choice = Choice(
            str(host.get("choice") or ("approve" if gate.status == "approved" else "decline")),
            bool(host.get("for_session")),
            host.get("answer") if isinstance(host.get("answer"), str) and not kept else None,
            tuple((str(k), str(v)) for k, v in kept.items()),
        )
        try:
            answered = self._answer(live, choice)
        except UsageError:
            answered = self._answer(
                live, Choice("answer" if live.kind == "question" else "decline")
            )
        if answered:
            self.goals.note_host(
                live.goal_id,
                live.gate_id,
                {"state": "answered", "decided_after_ms": _ms_since(live.received)},
            )

    # -- after the fact ----------------------------------------------------------------------
    def expire_orphans(self, gates: Iterable[Gate]) -> None:
        """Mark the live host gates among `gates` whose holder process is gone
        `expired: host restarted`."""
        for gate in gates:
            if (gate.host or {}).get("state") != "live" or self._still_waiting(gate):
                continue
            self.goals.note_host(
                gate.goal_id, gate.gate_id, {"state": "expired", "expired": "host restarted"}
            )

    def carries(self, goal_id: str, session_id: str) -> list[tuple[str, str]]:
        """Decisions on this session's host gates that never reached codex: (gate id, its
        line). Nothing is marked here: the caller marks them (`mark_carried`) once codex
        took the turn or the goal that carries them, so a failed start loses none."""
        found: list[tuple[str, str]] = []
        for gate in self.goals.gates(goal_id):
            host = gate.host or {}
            if (
                not gate.gate_id.startswith(HOST_GATE_PREFIX)
                or gate.status == "pending"
                or host.get("session_id") != session_id
                or host.get("state") == "answered"
                or host.get("carried")
                or self._still_waiting(gate)
            ):
                continue
            found.append((gate.gate_id, carry_line(gate)))
        return found

    def _still_waiting(self, gate: Gate) -> bool:
        """Codex still waits on the gate's request in a process that is alive (this one, or
        another that holds it): the decision is that request's answer, never carried."""
        host = gate.host or {}
        if host.get("state") != "live":
            return False
        if gate.gate_id in self._live:
            return True
        pid = host.get("holder_pid")
        return isinstance(pid, int) and pid != os.getpid() and pid_alive(pid)

    def mark_carried(self, goal_id: str, carried: Iterable[tuple[str, str]]) -> None:
        for gate_id, _ in carried:
            self.goals.note_host(goal_id, gate_id, {"carried": True})


def kept_answers(host: Mapping[str, Any], choice: Choice) -> dict[str, Any]:
    """What of an answer the gate may record: each non-secret question's answer through the
    text rules; nothing of a secret question's, nor of an MCP server's."""
    if host.get("kind") == "elicitation" or (choice.answer is None and not choice.answers):
        return {}
    recorded = [q for q in host.get("questions") or [] if isinstance(q, Mapping)]
    if not recorded and host.get("secret"):
        return {}  # an older gate: one secret flag for the whole request
    # Fail closed: only an id on record as not secret keeps its answer (an id that was not
    # a plain word is on record as `q<N>`, so its answer is never kept).
    public = {q.get("id") for q in recorded if not q.get("secret")}
    kept = {
        qid: _safe(text, "answer") or "(not shown)" for qid, text in choice.answers if qid in public
    }
    out: dict[str, Any] = {"answers": kept} if kept else {}
    if len(choice.answers) == 1 and kept:
        out["answer"] = next(iter(kept.values()))  # the one question's (the carried line)
    elif not choice.answers and choice.answer is not None:
        out["answer"] = _safe(choice.answer, "answer") or "(not shown)"
    return out


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)

"""Host gates on the service: the owner's decision from the page or a program, and the card.

Owns reading a decision body (`decision`: approve | decline | cancel | amend | answer, with
`for_session` and `answer`) into the desk's `Choice`, and the HTML of a host gate: the
compact summary, then (while codex still waits in this process) the live details escaped
(the full command and its folder, the justification, the question and its options; a
secret question gets a password field), and the choices. Pure but for the desk it is
handed. Live details are rendered, never logged or stored; a typed answer is never echoed.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from html import escape
from typing import Any

from loopx_chat.controller.host_requests import CHOICES, Choice, HostRequestDesk
from loopx_chat.errors import UsageError
from loopx_chat.goals.gate_store import Gate

ANSWER_LIMIT = 4096


def choice_from(doc: Mapping[str, Any]) -> Choice:
    decision = doc.get("decision")
    if decision == "reject":
        decision = "decline"
    if decision not in CHOICES:
        raise UsageError(f"decision must be one of {', '.join(CHOICES)}", error_code="usage_error")
    for_session = doc.get("for_session", False)
    if not isinstance(for_session, bool):
        raise UsageError("for_session must be true or false", error_code="usage_error")
    answer = doc.get("answer")
    if answer is not None and (not isinstance(answer, str) or len(answer) > ANSWER_LIMIT):
        raise UsageError(
            f"answer must be text of at most {ANSWER_LIMIT} characters", error_code="usage_error"
        )
    if decision == "answer" and not (answer or "").strip():
        raise UsageError("an answer needs text (or decline)", error_code="usage_error")
    return Choice(str(decision), for_session, answer)


def decide(
    desk: HostRequestDesk, goal_id: str, gate_id: str, doc: Mapping[str, Any], *, actor: str
) -> Gate:
    reason = doc.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise UsageError("reason must be a string", error_code="usage_error")
    return desk.decide(goal_id, gate_id, choice_from(doc), actor=actor, reason=reason or None)


def _cli(goal_id: str, gate_id: str, decision: str) -> str:
    words = ("loopx-chat", "gate", "resolve", gate_id, "--goal", goal_id, "--decision", decision)
    return escape(" ".join(shlex.quote(w) for w in words))


def _button(label: str, decision: str, css: str = "", **data: str) -> str:
    extra = "".join(f' data-{k.replace("_", "-")}="{escape(v)}"' for k, v in data.items())
    return (
        f'<button class="{css}" data-decision="{escape(decision)}"{extra}>{escape(label)}</button>'
    )


def _state_words(host: Mapping[str, Any], live: bool) -> str:
    if live:
        return "Codex is waiting for you now."
    state = host.get("state")
    if state == "window_passed":
        return "Codex was told you have not answered yet; your decision goes into the next turn."
    if state == "expired":
        why = host.get("expired", "the request ended")
        return f"expired: {why}; your decision goes into the next turn."
    return "Codex is no longer waiting; your decision goes into the next turn."


def render_host_gate(goal_id: str, gate: Gate, details: Mapping[str, Any] | None) -> str:
    """One host gate's block on its card. `details`: the live request's, or None."""
    host = gate.host or {}
    gid = escape(gate.gate_id)
    kind = str(host.get("kind", ""))
    parts = [
        f'<div class="gate host" data-gate="{gid}" data-kind="{escape(kind)}">',
        f'<p class="question">{escape(gate.question)}</p>',
        f'<p class="meta">host gate <span class="id">{gid}</span> · asked '
        f"{escape(gate.created_at)} · {escape(_state_words(host, details is not None))}</p>",
    ]
    if details is not None and kind in ("command", "file_change", "permissions"):
        if details.get("command"):
            parts.append(f'<pre class="live command">{escape(str(details["command"]))}</pre>')
        if details.get("cwd"):
            parts.append(f'<p class="live cwd">in <code>{escape(str(details["cwd"]))}</code></p>')
        if details.get("reason"):
            parts.append(f'<p class="live reason-text">Why: {escape(str(details["reason"]))}</p>')
    questions = (details or {}).get("questions") or []
    if kind == "question":
        secret = bool(host.get("secret"))
        for q in questions:
            parts.append(f'<p class="live ask">{escape(str(q.get("question", "")))}</p>')
        options = questions[0].get("options", []) if questions else list(host.get("options", []))
        buttons = "".join(_button(str(o), "answer", "approve", answer=str(o)) for o in options)
        field = "password" if secret else "text"
        parts.append(
            f'<div class="decide">{buttons}</div><div class="decide">'
            f'<input class="answer" type="{field}" autocomplete="off" maxlength="{ANSWER_LIMIT}" '
            f'aria-label="your answer for {gid}" placeholder="or type an answer">'
            f"{_button('Send answer', 'answer', 'approve')}"
            f"{_button('Do not answer', 'decline', 'reject')}</div>"
        )
    else:
        buttons = _button("Approve once", "approve", "approve")
        if kind != "permissions" or details is not None:
            buttons += _button("Approve for this session", "approve", "approve", for_session="1")
        buttons += _button("Decline", "decline", "reject")
        if details is not None and kind != "permissions":
            buttons += _button("Stop the turn", "cancel", "reject")
        parts.append(f'<div class="decide">{buttons}</div>')
        if details is not None and details.get("amendment"):
            parts.append(
                '<div class="decide amend">'
                + _button(
                    "Always allow commands like this, in every thread of this Codex home "
                    "(writes a rule into your Codex home)",
                    "amend",
                    "reject",
                )
                + "</div>"
            )
    parts.append(f'<p class="cli">or: <code>{_cli(goal_id, gate.gate_id, "approve")}</code></p>')
    parts.append("</div>")
    return "".join(parts)

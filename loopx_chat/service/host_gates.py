"""Host gates on the service: the owner's decision from the page or a program, and the card.

Owns reading a decision body (`decision`: approve | decline | cancel | amend | answer, with
`for_session`, `answer` (one question) or `answers` ({question id: text}, several
questions or an MCP server's fields)) into the desk's `Choice`, and the HTML of a host
gate: the compact summary, then (while codex still waits in this process) the live details
escaped (the full command and its folder, the justification; each question with its own
options and field, a secret one a password field; an MCP server's message and its fields),
and the choices. Pure but for the desk it is handed. Live details are rendered, never
logged or stored; a typed answer is never echoed.
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
MAX_ANSWERS = 20


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
    answers = _answers(doc.get("answers"))
    if decision == "answer" and not (answer or "").strip() and not answers:
        raise UsageError("an answer needs text (or decline)", error_code="usage_error")
    return Choice(str(decision), for_session, answer, answers)


def _answers(found: object) -> tuple[tuple[str, str], ...]:
    """`answers`: {question id: text}, every text within the limit; blanks are dropped."""
    if found is None:
        return ()
    if (
        not isinstance(found, Mapping)
        or len(found) > MAX_ANSWERS
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items())
        or any(len(v) > ANSWER_LIMIT for v in found.values())
    ):
        raise UsageError(
            f"answers must map question ids to text of at most {ANSWER_LIMIT} characters "
            f"(at most {MAX_ANSWERS})",
            error_code="usage_error",
        )
    return tuple((k, v) for k, v in found.items() if v.strip())


def decide(
    desk: HostRequestDesk, goal_id: str, gate_id: str, doc: Mapping[str, Any], *, actor: str
) -> Gate:
    reason = doc.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise UsageError("reason must be a string", error_code="usage_error")
    return desk.decide(goal_id, gate_id, choice_from(doc), actor=actor, reason=reason or None)


def _cli(goal_id: str, gate_id: str, decision: str, answers: list[str]) -> str:
    words = ["loopx-chat", "gate", "resolve", gate_id, "--goal", goal_id, "--decision", decision]
    for answer in answers:
        words += ["--answer", answer]
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
    if kind == "question":
        parts.append(_question_block(gid, host, details))
    elif kind == "elicitation":
        parts.append(_elicitation_block(gid, details))
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
    asked = host.get("questions") or [] if kind == "question" else []
    # A secret question is never shown with --answer: the CLI asks for it without echo.
    answers = [f"{q.get('id')}=TEXT" for q in asked if not q.get("secret")]
    cli = _cli(goal_id, gate.gate_id, "approve", answers if len(asked) > 1 else [])
    parts.append(f'<p class="cli">or: <code>{cli}</code></p>')
    parts.append("</div>")
    return "".join(parts)


def _field(gid: str, qid: str, label: str, secret: bool) -> str:
    return (
        f'<input class="answer" data-qid="{escape(qid)}" type="{"password" if secret else "text"}" '
        f'autocomplete="off" maxlength="{ANSWER_LIMIT}" '
        f'aria-label="{escape(label)} ({gid})" placeholder="your answer">'
    )


def _question_block(gid: str, host: Mapping[str, Any], details: Mapping[str, Any] | None) -> str:
    """One question: its options answer at once, or a typed answer. Several: each question
    with its own options (they fill its field) and field, sent together as `answers`."""
    questions = list((details or {}).get("questions") or [])
    recorded = list(host.get("questions") or [])
    if details is None and len(recorded) > 1:
        questions = [dict(q, question="", options=[]) for q in recorded]
    if len(questions) > 1:
        blocks = []
        for q in questions:
            qid = str(q.get("id", ""))
            header = escape(str(q.get("header", "")))
            fills = "".join(
                f'<button type="button" class="fill" data-fill="{escape(str(o))}">'
                f"{escape(str(o))}</button>"
                for o in q.get("options") or []
            )
            blocks.append(
                f'<div class="q" data-qid="{escape(qid)}"><p class="live ask"><b>{header}</b> '
                f"{escape(str(q.get('question', '')))}</p>"
                f'<div class="decide">{fills}'
                f"{_field(gid, qid, str(q.get('header', '')), bool(q.get('secret')))}</div></div>"
            )
        return (
            "".join(blocks)
            + f'<div class="decide">{_button("Send answers", "answer", "approve")}'
            + f"{_button('Do not answer', 'decline', 'reject')}</div>"
        )
    parts = [f'<p class="live ask">{escape(str(q.get("question", "")))}</p>' for q in questions]
    options = questions[0].get("options", []) if questions else list(host.get("options", []))
    buttons = "".join(_button(str(o), "answer", "approve", answer=str(o)) for o in options)
    field = "password" if host.get("secret") else "text"
    parts.append(
        f'<div class="decide">{buttons}</div><div class="decide">'
        f'<input class="answer" type="{field}" autocomplete="off" maxlength="{ANSWER_LIMIT}" '
        f'aria-label="your answer for {gid}" placeholder="or type an answer">'
        f"{_button('Send answer', 'answer', 'approve')}"
        f"{_button('Do not answer', 'decline', 'reject')}</div>"
    )
    return "".join(parts)


def _elicitation_field(gid: str, spec: Mapping[str, Any]) -> str:
    qid = escape(str(spec.get("id", "")))
    title = str(spec.get("title", ""))
    need = " (required)" if spec.get("required") else ""
    options = list(spec.get("options") or [])
    if spec.get("type") == "boolean":
        options = ["true", "false"]
    if options:
        choices = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in options)
        control = (
            f'<select class="answer" data-qid="{qid}" aria-label="{escape(title)} ({gid})">'
            f'<option value=""></option>{choices}</select>'
        )
    else:
        control = _field(gid, str(spec.get("id", "")), title, False)
    about = f" <small>{escape(str(spec['description']))}</small>" if spec.get("description") else ""
    return f'<label class="live field">{escape(title)}{need}{about} {control}</label>'


def _elicitation_block(gid: str, details: Mapping[str, Any] | None) -> str:
    """An MCP server's request: its message and fields live; Accept (with the fields'
    content) / Decline / Cancel. Without the live request only a decision is left."""
    if details is None:
        return (
            f'<div class="decide">{_button("Accept", "approve", "approve")}'
            f"{_button('Decline', 'decline', 'reject')}</div>"
        )
    parts = [f'<p class="live ask">{escape(str(details.get("message", "")))}</p>']
    for param in details.get("tool_params") or []:
        parts.append(
            f'<p class="live param"><code>{escape(str(param.get("name", "")))}</code>: '
            f"{escape(str(param.get('value', '')))}</p>"
        )
    if details.get("url"):
        parts.append(f'<p class="live url">opens <code>{escape(str(details["url"]))}</code></p>')
    fields = list(details.get("fields") or [])
    parts.extend(_elicitation_field(gid, spec) for spec in fields)
    accept = "Allow the tool" if details.get("tool_approval") else "Accept"
    parts.append(
        f'<div class="decide">{_button(accept, "answer" if fields else "approve", "approve")}'
        f"{_button('Decline', 'decline', 'reject')}"
        f"{_button('Cancel', 'cancel', 'reject')}</div>"
    )
    return "".join(parts)

"""`gate resolve` for a host gate (what codex asked): through the running service when there
is one, since the live request lives there; else recorded here, for the process that holds
the request (a foreground `chat send`) to pick up, or for the session's next turn.

Owns only the routing and the choice words (`--decision approve|decline|cancel`,
`--for-session`, `--answer TEXT` for a one-question request, `--answer ID=TEXT` repeated
for several questions or an MCP server's fields). An answer is never printed or logged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from loopx_chat.cli.context import CliContext
from loopx_chat.cli.delegation import service_for
from loopx_chat.controller.host_requests import Choice, HostRequestDesk
from loopx_chat.errors import UsageError

_FIELD = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _ids(host: Mapping[str, Any]) -> list[str]:
    """The ids an ID=TEXT answer may name: the gate's questions (an MCP server's fields are
    never recorded, so any `NAME=` names a field there)."""
    return [str(q.get("id")) for q in host.get("questions") or [] if isinstance(q, Mapping)]


def host_choice(
    decision: str, for_session: bool, answers: Sequence[str], host: Mapping[str, Any]
) -> Choice:
    """The choice the words mean: `ID=TEXT` per question when ID is one of the request's
    question ids (or, for an MCP server's request, any field name), else one bare answer;
    a bare answer to several questions is `answer_needs_question_id` (checked by the desk)."""
    word = {"approve": "approve", "reject": "decline"}.get(decision, decision)
    if not answers:
        return Choice(word, for_session)
    ids = _ids(host)
    pairs: list[tuple[str, str]] = []
    bare: list[str] = []
    for given in answers:
        name, sep, text = given.partition("=")
        if sep and (name in ids or (host.get("kind") == "elicitation" and _FIELD.fullmatch(name))):
            pairs.append((name, text))
        else:
            bare.append(given)
    if bare and (pairs or len(bare) > 1):
        raise UsageError(
            "give either one --answer TEXT, or one --answer ID=TEXT per question"
            + (f" (ids: {', '.join(ids)})" if ids else ""),
            error_code="answer_needs_question_id",
        )
    return Choice("answer", for_session, bare[0] if bare else None, tuple(pairs))


def resolve_host_gate(
    cli: CliContext, goal_id: str, gate_id: str, choice: Choice, reason: str | None
) -> dict[str, Any]:
    service = service_for(cli)
    if service is not None:
        return service.resolve_gate(
            goal_id,
            gate_id,
            choice.decision,
            reason,
            for_session=choice.for_session,
            answer=choice.answer,
            answers=dict(choice.answers) or None,
        )
    desk = HostRequestDesk(cli.gate_store())
    return desk.decide(goal_id, gate_id, choice, actor="owner-cli", reason=reason).to_dict()

"""`gate resolve` for a host gate (what codex asked): through the running service when there
is one, since the live request lives there; else recorded here, for the process that holds
the request (a foreground `chat send`) to pick up, or for the session's next turn.

Owns only the routing and the choice words (`--decision approve|decline|cancel`,
`--for-session`, `--answer TEXT`). An answer is never printed or logged.
"""

from __future__ import annotations

from typing import Any

from loopx_chat.cli.context import CliContext
from loopx_chat.cli.delegation import service_for
from loopx_chat.controller.host_requests import Choice, HostRequestDesk


def host_choice(decision: str, for_session: bool, answer: str | None) -> Choice:
    if answer is not None:
        return Choice("answer", answer=answer)
    word = {"approve": "approve", "reject": "decline"}.get(decision, decision)
    return Choice(word, for_session)


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
        )
    desk = HostRequestDesk(cli.gate_store())
    return desk.decide(goal_id, gate_id, choice, actor="owner-cli", reason=reason).to_dict()

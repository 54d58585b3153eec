"""`gate resolve` for a host gate (what codex asked): through the running service when there
is one, since the live request lives there; else recorded here, for the process that holds
the request (a foreground `chat send`) to pick up, or for the session's next turn.

Owns only the routing and the choice words (`--decision approve|decline|cancel`,
`--for-session`, `--answer TEXT`). The owner's secret goes only into the Authorization
header of one loopback request; an answer is never printed.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any

from loopx_chat.cli.context import CliContext
from loopx_chat.controller.host_requests import Choice, HostRequestDesk
from loopx_chat.errors import LoopxChatError
from loopx_chat.goals.goal_store import GoalStore
from loopx_chat.state.service_runtime import read_runtime, read_secret

SERVICE_TIMEOUT_SEC = 10.0


def host_choice(decision: str, for_session: bool, answer: str | None) -> Choice:
    if answer is not None:
        return Choice("answer", answer=answer)
    word = {"approve": "approve", "reject": "decline"}.get(decision, decision)
    return Choice(word, for_session)


def _through_service(cli: CliContext, goal_id: str, gate_id: str, body: dict[str, Any]) -> Any:
    """The gate the service recorded, or None when no service answers."""
    runtime = read_runtime(cli.state_dir)
    secret = read_secret(cli.state_dir) if runtime else None
    if runtime is None or secret is None:
        return None
    path = (
        f"/api/goals/{urllib.parse.quote(goal_id, safe='')}/gates/"
        f"{urllib.parse.quote(gate_id, safe='')}/decision"
    )
    conn = http.client.HTTPConnection("127.0.0.1", runtime.port, timeout=SERVICE_TIMEOUT_SEC)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "Host": f"127.0.0.1:{runtime.port}",
                "Authorization": f"Bearer {secret}",
                "X-Loopx-Surface": "cli",
            },
        )
        response = conn.getresponse()
        doc = json.loads(response.read() or b"{}")
    except (OSError, ValueError):
        return None  # not answering: decided here instead
    finally:
        conn.close()
    if not doc.get("ok"):
        raise LoopxChatError(
            str(doc.get("error", "the service refused the decision")),
            error_code=str(doc.get("error_code", "internal_error")),
        )
    return doc.get("gate")


def resolve_host_gate(
    cli: CliContext,
    goal_id: str,
    gate_id: str,
    choice: Choice,
    reason: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "decision": choice.decision,
        "for_session": choice.for_session,
        "answer": choice.answer,
        "reason": reason,
    }
    found = _through_service(cli, goal_id, gate_id, body)
    if found is not None:
        return dict(found)
    desk = HostRequestDesk(GoalStore(cli.state_dir))
    return desk.decide(goal_id, gate_id, choice, actor="owner-cli", reason=reason).to_dict()

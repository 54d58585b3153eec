"""The Codex host target of controlled writeback: a thread's goal (`thread/goal/*`).

Owns reading, setting and clearing the goal of a session's thread, always with origin
`automatic`, through an app-server that loads no thread (`ChatController.thread_metadata`):
codex keeps the goal in the home's state database, and a thread that is never resumed cannot
start a goal-continuation turn, so a preview, apply or revert costs no model request and adds
no turn. It refuses to set status `active`: an active goal can make the host continue on its
own, which would be a hidden launch; `blocked` and `paused` are hints, never approvals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.errors import CodexError

ALLOWED_STATUSES = frozenset({"blocked", "paused"})


@dataclass(frozen=True)
class HostGoal:
    objective: str
    status: str
    token_budget: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> HostGoal | None:
        goal = result.get("goal")
        if not isinstance(goal, dict):
            return None
        budget = goal.get("tokenBudget")
        return cls(
            objective=str(goal.get("objective", "")),
            status=str(goal.get("status", "")),
            token_budget=budget if isinstance(budget, int) else None,
        )


GoalCall = Callable[[str, dict[str, Any]], dict[str, Any]]


@contextlib.contextmanager
def thread_goal(controller: ChatController, session_id: str) -> Iterator[ThreadGoal]:
    """The goal of one session's thread, for the span of one preview, apply or revert."""
    with controller.thread_metadata(session_id) as call:
        yield ThreadGoal(call)


class ThreadGoal:
    def __init__(self, call: GoalCall) -> None:
        self.call = call

    def read(self) -> HostGoal | None:
        return HostGoal.from_result(self.call("thread/goal/get", {}))

    def write(self, objective: str, status: str) -> HostGoal:
        if status not in ALLOWED_STATUSES:
            raise CodexError(
                f"refusing to set a thread goal to {status!r}: only blocked or paused are hints",
                error_code="writeback_refused",
            )
        result = self.call(
            "thread/goal/set", {"objective": objective, "status": status, "origin": "automatic"}
        )
        goal = HostGoal.from_result(result)
        if goal is None:
            raise CodexError(
                "Codex did not return the goal it set", error_code="app_server_protocol"
            )
        return goal

    def restore(self, prior: HostGoal | None) -> None:
        """Put back exactly what was there before (a prior `active` goal included: the thread
        is not loaded, so it continues only when its owner next resumes it, as before)."""
        if prior is None:
            self.call("thread/goal/clear", {"origin": "automatic"})
            return
        params: dict[str, Any] = {
            "objective": prior.objective,
            "status": prior.status,
            "origin": "automatic",
        }
        if prior.token_budget is not None:
            params["tokenBudget"] = prior.token_budget
        self.call("thread/goal/set", params)

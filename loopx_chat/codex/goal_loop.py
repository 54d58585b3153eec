"""Codex's own goal loop on a loaded thread: the thread goal, and what the loop does.

Owns `thread/goal/get|set` on the app-server that holds the thread (the only process whose
`active` starts continuation turns), `turn/interrupt` of a continuation turn, which turn
codex says runs now (`thread/turns/list`, ids and statuses only), the goal's own
notifications (`thread/goal/updated`; the usage limit's reset from a rate-limit notice),
and which loop turn runs and since when it is silent. A turn's events (its
tokens as they grow, so a run can hold its budget inside a turn; its end, tool items and
answer digest) come from `turn_events.TurnEvents`, the decoder chat turns use too.

It never decides whether a loop may run (the controller's goal run does, on the owner's
recorded authority), never sets a goal `active` on its own account, and keeps no text:
ids, statuses, numbers and answer digests only (a goal's objective is sent, never read
back into state).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.thread import CodexThread, _exited_error, _rpc
from loopx_chat.codex.turn_events import TurnEvent, TurnEvents, count
from loopx_chat.errors import CodexError

# What the loop's followers read: the other events only move `silent_since`.
LOOP_KINDS = frozenset({"turn_started", "turn_ended", "delta", "usage", "notice"})
LoopEvent = TurnEvent  # one step of the host's loop: a turn started or ended, the goal changed

GOAL_STATUSES = ("active", "paused", "blocked", "usageLimited", "budgetLimited", "complete")


@dataclass(frozen=True)
class HostGoalState:
    """A thread goal as codex reports it, without its objective text."""

    status: str
    token_budget: int | None
    tokens_used: int
    time_used_seconds: int

    @classmethod
    def from_wire(cls, goal: object) -> HostGoalState | None:
        if not isinstance(goal, dict):
            return None
        status = goal.get("status")
        budget = goal.get("tokenBudget")
        return cls(
            status=status if status in GOAL_STATUSES else "unknown",
            token_budget=budget
            if isinstance(budget, int) and not isinstance(budget, bool)
            else None,
            tokens_used=count(goal.get("tokensUsed")),
            time_used_seconds=count(goal.get("timeUsedSeconds")),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class GoalLoopWatch:
    """The goal of a thread this process holds, and the events of the loop it runs."""

    def __init__(self, thread: CodexThread) -> None:
        self.thread = thread
        # Since when the running turn has produced nothing (no reply, reasoning or tool call):
        # the run stops it at the first-output timeout. None: it has, or none runs.
        self.silent_since: float | None = None
        self.events = TurnEvents(thread)
        self.running_turn_id: str | None = None
        # After a set, the status codex answered with: goal updates still queued from before
        # it (a resume reports the goal as it was) are stale until codex reports this one.
        self._expect_status: str | None = None
        # When the account's usage limit resets (epoch seconds), if a rate-limit notice said.
        self.usage_resets_at: int | None = None

    def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        t = self.thread
        return _rpc(
            t.proc, method, {"threadId": t.thread_id, **params}, t.timeouts.request, t.log_path
        )

    def get(self) -> HostGoalState | None:
        return HostGoalState.from_wire(self._call("thread/goal/get", {}).get("goal"))

    def set(
        self, status: str, *, objective: str | None = None, token_budget: int | None = None
    ) -> HostGoalState:
        """Set the goal, always with origin `user`: the caller acts on a recorded owner action."""
        params: dict[str, Any] = {"status": status, "origin": "user"}
        if objective is not None:
            params["objective"] = objective
        if token_budget is not None:
            params["tokenBudget"] = token_budget
        goal = HostGoalState.from_wire(self._call("thread/goal/set", params).get("goal"))
        if goal is None:
            raise CodexError(
                "Codex did not return the goal it set", error_code="app_server_protocol"
            )
        self._expect_status = goal.status
        return goal

    def _see_rate_limits(self, limits: object) -> None:
        if not isinstance(limits, dict):
            return
        resets = [
            window.get("resetsAt")
            for window in (limits.get("primary"), limits.get("secondary"))
            if isinstance(window, dict)
        ]
        known = [r for r in resets if isinstance(r, int) and not isinstance(r, bool)]
        if known:
            self.usage_resets_at = max(known)

    def running_turn(self) -> str | None:
        """The id of the turn codex says runs on the thread now (its newest, `inProgress`),
        read by `thread/turns/list` without the turn's items (no text), or None. Everything
        codex said before this answer was read first: its notifications and the answer
        share one ordered stream."""
        page = self._call(
            "thread/turns/list", {"limit": 1, "sortDirection": "desc", "itemsView": "notLoaded"}
        )
        data = page.get("data")
        newest = data[0] if isinstance(data, list) and data else None
        if not isinstance(newest, dict) or newest.get("status") != "inProgress":
            return None
        turn_id = newest.get("id")
        return turn_id if isinstance(turn_id, str) else None

    def interrupt(self, turn_id: str) -> None:
        """Stop a continuation turn now (its `turn/completed` says `interrupted`)."""
        self.thread.abandon_turn(turn_id)

    def stop_turn(self, turn_id: str) -> None:
        """Interrupt a turn that is well under way (asked once: codex has taken it up)."""
        self.thread._send_interrupt(turn_id)

    def ended(self) -> CodexError:
        """What the loop's app-server ending is, as an error (`app_server_exited`)."""
        return _exited_error(self.thread.proc, self.thread.log_path, "during the goal loop")

    def see(self, note: Notification) -> LoopEvent | None:
        """The loop event one notification of the thread's app-server makes, if any."""
        if note.method == "account/rateLimits/updated":
            self._see_rate_limits(note.params.get("rateLimits"))
            return None
        if note.method == "thread/goal/updated":
            return self._goal_updated(note.params)
        event = self.events.see(note)
        if event is None:
            return None
        kind = event.kind
        if kind == "turn_started":
            self.running_turn_id = event.turn_id
            self.silent_since = time.monotonic()
        elif kind == "turn_ended":
            if self.running_turn_id == event.turn_id:
                self.running_turn_id = None
                self.silent_since = None
            self.thread.turn_ended(str(event.turn_id))
        elif kind in ("produced", "delta"):
            self.silent_since = None
        return event if kind in LOOP_KINDS and (kind != "delta" or event.text is not None) else None

    def _goal_updated(self, params: Any) -> LoopEvent | None:
        if params.get("threadId") not in (None, self.thread.thread_id):
            return None
        goal = HostGoalState.from_wire(params.get("goal"))
        if goal is None:
            return None
        if self._expect_status is not None:
            if goal.status != self._expect_status:
                return None  # queued before our set: no longer true
            self._expect_status = None
        return LoopEvent("goal_updated", goal=goal)

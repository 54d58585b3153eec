"""Codex's own goal loop on a loaded thread: the thread goal, and what the loop does.

Owns `thread/goal/get|set` on the app-server that holds the thread (the only process whose
`active` starts continuation turns), `turn/interrupt` of a continuation turn, and turning
that app-server's notifications (`turn/started`, `turn/completed`, `item/completed`,
`thread/tokenUsage/updated`, `thread/goal/updated`) into compact loop events. A turn's tokens
are the growth of the thread's total over the turn, counted as `CodexThread` counts a turn,
and reported as they grow (`usage`), so a run can hold its budget inside a turn; a finished
turn says how many tool items it ran and a digest of its final answer (never the text).

It never decides whether a loop may run (the controller's goal run does, on the owner's
recorded authority), never sets a goal `active` on its own account, and keeps no text:
ids, statuses, numbers and answer digests only (a goal's objective is sent, never read
back into state).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.thread import (
    ENDED_AS,
    FAILED_AS,
    CodexThread,
    TurnOutcome,
    _exited_error,
    _rpc,
    _TurnUsage,
    _usage_total,
)
from loopx_chat.codex.turn_notices import retry_notice
from loopx_chat.errors import CodexError

# Items of a turn that are not a tool's work: a turn with only these made no call.
TALK_ITEMS = frozenset({"userMessage", "agentMessage", "reasoning", "plan", "contextCompaction"})

GOAL_STATUSES = ("active", "paused", "blocked", "usageLimited", "budgetLimited", "complete")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
            tokens_used=_int(goal.get("tokensUsed")),
            time_used_seconds=_int(goal.get("timeUsedSeconds")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "token_budget": self.token_budget,
            "tokens_used": self.tokens_used,
            "time_used_seconds": self.time_used_seconds,
        }


@dataclass(frozen=True)
class LoopEvent:
    """One step of the host's loop: a turn started or ended, or the goal changed."""

    kind: str  # turn_started | turn_ended | goal_updated | delta | usage | notice
    turn_id: str | None = None
    outcome: TurnOutcome | None = None
    goal: HostGoalState | None = None
    text: str | None = None  # a delta of the agent's reply: for a terminal, never for state
    # (or, for a notice, our own line on what codex said while it retries)
    tokens: int | None = None  # usage: the running turn's tokens so far, as codex reports them
    # turn_ended: how many tool items the turn ran, and a digest of its final answer (never
    # its text), so a loop that repeats itself can be told from one that gets somewhere.
    tool_calls: int = 0
    answer: str | None = None


class GoalLoopWatch:
    """The goal of a thread this process holds, and the events of the loop it runs."""

    def __init__(self, thread: CodexThread) -> None:
        self.thread = thread
        # Since when the running turn has produced nothing (no reply, reasoning or tool call):
        # the run stops it at the first-output timeout. None: it has, or none runs.
        self.silent_since: float | None = None
        self._retries = 0
        self._usage: dict[str, _TurnUsage] = {}
        # turn → (tool items, digest of its last answer, whether its last item was that answer)
        self._marks: dict[str, tuple[int, str | None, bool]] = {}
        self.running_turn_id: str | None = None
        self.interrupted: set[str] = set()
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

    def interrupt(self, turn_id: str) -> None:
        """Stop a continuation turn now (its `turn/completed` says `interrupted`)."""
        self.interrupted.add(turn_id)
        self.thread.abandon_turn(turn_id)

    def _mark(self, params: dict[str, Any]) -> None:
        """Count a finished item of a running turn: a tool's, or the agent's answer (kept
        as a digest only)."""
        turn_id, item = str(params.get("turnId")), params.get("item")
        if turn_id not in self._usage or not isinstance(item, dict):
            return
        tools, answer, _ = self._marks.get(turn_id, (0, None, False))
        kind, text = item.get("type"), item.get("text")
        if kind == "agentMessage" and isinstance(text, str):
            answer = hashlib.sha256(text.strip().encode()).hexdigest()[:16]
        elif kind not in TALK_ITEMS:
            tools += 1
        self._marks[turn_id] = (tools, answer, kind == "agentMessage")

    def answered(self, turn_id: str) -> bool:
        """Whether the turn's last finished item is the agent's answer: the response just
        counted ended the turn, and codex is not asking the model again."""
        return self._marks.get(turn_id, (0, None, False))[2]

    def stop_turn(self, turn_id: str) -> None:
        """Interrupt a turn that is well under way (asked once: codex has taken it up)."""
        self.interrupted.add(turn_id)
        self.thread._send_interrupt(turn_id)

    def ended(self) -> CodexError:
        """What the loop's app-server ending is, as an error (`app_server_exited`)."""
        return _exited_error(self.thread.proc, self.thread.log_path, "during the goal loop")

    def see(self, note: Notification) -> LoopEvent | None:
        """The loop event one notification of the thread's app-server makes, if any."""
        t = self.thread
        params = note.params
        if note.method == "account/rateLimits/updated":
            self._see_rate_limits(params.get("rateLimits"))
            return None
        if params.get("threadId") not in (None, t.thread_id):
            return None
        if note.method == "thread/tokenUsage/updated":
            total = _usage_total(params.get("tokenUsage"))
            usage = self._usage.get(str(params.get("turnId")))
            if usage is not None:
                usage.see(total, True)
                t.usage_total = usage.latest
                # Each model response's usage, while the turn runs: what a hard budget reads.
                return LoopEvent(
                    "usage", turn_id=str(params.get("turnId")), tokens=usage.charged().total_tokens
                )
            if total is not None:
                t.usage_total = total  # a resume repeats the thread's total: the baseline
            return None
        if note.method == "item/completed":
            self._mark(params)
            return None
        if note.method == "error":
            self._retries += 1
            line = retry_notice(params, self._retries)
            return LoopEvent("notice", turn_id=params.get("turnId"), text=line) if line else None
        if note.method == "item/started":
            item = params.get("item")
            if isinstance(item, dict) and item.get("type") not in (None, "userMessage"):
                self.silent_since = None
            return None
        if note.method == "item/agentMessage/delta":
            self.silent_since = None
            delta = params.get("delta")
            return (
                LoopEvent("delta", turn_id=params.get("turnId"), text=delta)
                if isinstance(delta, str)
                else None
            )
        if note.method == "turn/started":
            turn = params.get("turn")
            turn_id = turn.get("id") if isinstance(turn, dict) else None
            if not isinstance(turn_id, str) or turn_id in self._usage:
                return None
            self._usage[turn_id] = _TurnUsage(t.usage_total)
            self.running_turn_id = turn_id
            self.silent_since = time.monotonic()
            return LoopEvent("turn_started", turn_id=turn_id)
        if note.method == "turn/completed":
            turn = params.get("turn")
            turn_id = turn.get("id") if isinstance(turn, dict) else None
            usage = self._usage.pop(str(turn_id), None)
            if usage is None or not isinstance(turn, dict):
                return None
            status, code = ENDED_AS.get(turn.get("status"), FAILED_AS)
            outcome = TurnOutcome(str(turn_id), status, code, usage.charged())
            if self.running_turn_id == turn_id:
                self.running_turn_id = None
                self.silent_since = None
            t.turn_ended(str(turn_id))
            tools, answer, _ = self._marks.pop(str(turn_id), (0, None, False))
            return LoopEvent(
                "turn_ended", turn_id=str(turn_id), outcome=outcome, tool_calls=tools, answer=answer
            )
        if note.method == "thread/goal/updated":
            goal = HostGoalState.from_wire(params.get("goal"))
            if goal is None:
                return None
            if self._expect_status is not None:
                if goal.status != self._expect_status:
                    return None  # queued before our set: no longer true
                self._expect_status = None
            return LoopEvent("goal_updated", goal=goal)
        return None

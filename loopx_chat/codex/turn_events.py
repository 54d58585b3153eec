"""Codex's turn notifications as typed events: the one decoder for chat turns and loop turns.

Owns reading what codex says about a thread's turns (started, completed, token usage,
deltas, items, owner waits, retries) into `TurnEvent`s, and each turn's tokens (the growth
of the thread's total over it: codex repeating an earlier total costs nothing), tool items
and answer digest. `CodexThread.wait_turn` (a chat turn, begun at its `turn/start`) and
`GoalLoopWatch` (codex's loop, turns begun by `turn/started`) read it; each keeps its timers.

PURE: no I/O, no clock, nothing sent to codex. It never keeps text: a delta's text is only
passed on, an answer kept as a digest, a retry is our own line (`turn_notices`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.turn_notices import retry_notice
from loopx_chat.state.session_records import TokenCounts, TurnStatus

if TYPE_CHECKING:
    from loopx_chat.codex.goal_loop import HostGoalState

# Items of a turn that are not a tool's work: a turn with only these made no call.
TALK_ITEMS = frozenset({"userMessage", "agentMessage", "reasoning", "plan", "contextCompaction"})
# What `thread/status/changed` names while codex waits on the owner (an approval, a question).
OWNER_WAIT_FLAGS = frozenset({"waitingOnApproval", "waitingOnUserInput"})
# A finished turn's status as codex reports it -> ours (anything else failed: `turn_failed`).
ENDINGS: Mapping[object, tuple[TurnStatus, str | None]] = {
    "completed": (TurnStatus.COMPLETED, None),
    "interrupted": (TurnStatus.INTERRUPTED, None),
}
FAILED = (TurnStatus.FAILED, "turn_failed")
COUNTS = ("input_tokens", "output_tokens", "total_tokens")


@dataclass(frozen=True)
class TurnOutcome:
    upstream_turn_id: str
    status: TurnStatus  # completed | failed | interrupted
    error_code: str | None
    tokens: TokenCounts


class TurnEvent(NamedTuple):
    """One thing codex said about a turn (or, from `GoalLoopWatch`, about the goal). A
    NamedTuple, immutable: one is made per streamed delta (0.3 us; a frozen dataclass 1.0)."""

    # turn_started | turn_ended | delta | usage | notice | produced | status | goal_updated
    kind: str
    turn_id: str | None = None
    outcome: TurnOutcome | None = None
    goal: HostGoalState | None = None
    text: str | None = None  # a delta, for a terminal (never for state); a notice: our line
    tokens: int | None = None  # usage: the running turn's tokens so far
    tool_calls: int = 0  # turn_ended: its tool items, and a digest of its final answer
    answer: str | None = None  # (never its text): a loop that repeats itself shows
    waiting: bool = False  # status: codex waits on the owner (a turn's timers pause)


class ThreadTotals(Protocol):
    """A decoder's thread: its id, and its total as codex last reported it (the baseline)."""

    thread_id: str
    usage_total: TokenCounts | None


@dataclass(slots=True)
class TotalsSeen:
    """A `ThreadTotals` of a decoder that only watches the thread (codex's reader's trips):
    the total it last saw, moved by the decoder itself."""

    thread_id: str
    usage_total: TokenCounts | None = None


def usage_total(usage: object) -> TokenCounts | None:
    """The cumulative `total` of a `thread/tokenUsage/updated` payload, or None."""
    total = usage.get("total") if isinstance(usage, dict) else None
    if not isinstance(total, dict):
        return None
    return TokenCounts(
        *(count(total.get(k)) for k in ("inputTokens", "outputTokens", "totalTokens"))
    )


def count(value: object) -> int:
    """A count codex reports, or 0 when it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(slots=True)
class _Turn:
    """A followed turn, while it runs (mutable working state, never stored)."""

    before: TokenCounts  # the thread total it started from
    end: TokenCounts | None = None  # the last total reported for it
    tools: int = 0
    answer: str | None = None  # a digest of its last answer
    answered: bool = False  # its last finished item is that answer

    def charged(self) -> TokenCounts:
        end, before = self.end or self.before, self.before
        return TokenCounts(*(max(0, getattr(end, f) - getattr(before, f)) for f in COUNTS))


class TurnEvents:
    """The decoder of one thread's turn notifications. A turn is followed from `begin` (the
    caller started it) or its `turn/started` until its `turn/completed`; a turn it does not
    follow is not its to count (a report for one still moves the thread's total)."""

    def __init__(self, thread: ThreadTotals) -> None:
        self.thread = thread
        self._turns: dict[str, _Turn] = {}
        self._retries = 0

    def begin(self, turn_id: str) -> bool:
        """Follow `turn_id` from now, charged from the thread's total; False if it already is."""
        if turn_id in self._turns:
            return False
        self._turns[turn_id] = _Turn(self.thread.usage_total or TokenCounts())
        return True

    def stopped(self, turn_id: str, code: str | None) -> TurnOutcome:
        """A turn over without codex saying so: interrupted, charged what it cost so far."""
        turn = self._turns.pop(turn_id, None)
        tokens = TokenCounts() if turn is None else turn.charged()
        return TurnOutcome(turn_id, TurnStatus.INTERRUPTED, code, tokens)

    def answered(self, turn_id: str) -> bool:
        """Whether the turn's last finished item is the agent's answer: the response just
        counted ended the turn, and codex is not asking the model again."""
        turn = self._turns.get(turn_id)
        return turn is not None and turn.answered

    def see(self, note: Notification) -> TurnEvent | None:
        """The event one notification of the thread's app-server makes, if any."""
        params = note.params
        if params.get("threadId") not in (None, self.thread.thread_id):
            return None
        # Most frequent first: a reply streams many deltas, each response reports usage.
        if note.method == "item/agentMessage/delta":  # positional: the hot path
            delta = params.get("delta")
            text = delta if isinstance(delta, str) else None
            return TurnEvent("delta", params.get("turnId"), None, None, text)
        if note.method == "thread/tokenUsage/updated":
            return self._usage(params)
        if note.method == "item/started":
            item = params.get("item")
            kind = item.get("type") if isinstance(item, dict) else None
            produced = isinstance(kind, str) and kind != "userMessage"
            return TurnEvent("produced", params.get("turnId")) if produced else None
        if note.method == "item/completed":
            self._item_completed(params)
            return None
        if note.method == "thread/status/changed":
            status = params.get("status")
            flags = status.get("activeFlags") if isinstance(status, dict) else None
            waiting = isinstance(flags, list) and not OWNER_WAIT_FLAGS.isdisjoint(map(str, flags))
            return TurnEvent("status", waiting=waiting)
        if note.method == "turn/started":
            turn = params.get("turn")
            turn_id = turn.get("id") if isinstance(turn, dict) else None
            if not isinstance(turn_id, str) or not self.begin(turn_id):
                return None
            return TurnEvent("turn_started", turn_id)
        if note.method == "turn/completed":
            return self._turn_completed(params.get("turn"))
        if note.method == "error":
            self._retries += 1
            line = retry_notice(params, self._retries)
            return None if line is None else TurnEvent("notice", params.get("turnId"), text=line)
        return None

    def _usage(self, params: Mapping[str, Any]) -> TurnEvent | None:
        total = usage_total(params.get("tokenUsage"))
        turn_id = params.get("turnId")
        if total is not None:
            self.thread.usage_total = total
            for followed, turn in self._turns.items():
                if followed == turn_id:
                    turn.end = total
                elif turn.end is None:  # an earlier turn's total (a resume repeats it)
                    turn.before = total
        current = self._turns.get(turn_id) if isinstance(turn_id, str) else None
        if current is None:
            return None
        # Each model response's usage, while the turn runs: what a hard budget reads.
        return TurnEvent("usage", turn_id, tokens=current.charged().total_tokens)

    def _item_completed(self, params: Mapping[str, Any]) -> None:
        """Count a finished item of a followed turn: a tool's, or the agent's answer (kept
        as a digest only)."""
        turn_id, item = params.get("turnId"), params.get("item")
        turn = self._turns.get(turn_id) if isinstance(turn_id, str) else None
        if turn is None or not isinstance(item, dict):
            return
        kind, text = item.get("type"), item.get("text")
        if kind == "agentMessage" and isinstance(text, str):
            turn.answer = hashlib.sha256(text.strip().encode()).hexdigest()[:16]
        elif not isinstance(kind, str) or kind not in TALK_ITEMS:  # hashable or not
            turn.tools += 1
        turn.answered = kind == "agentMessage"

    def _turn_completed(self, turn: object) -> TurnEvent | None:
        if not isinstance(turn, dict) or not isinstance(turn_id := turn.get("id"), str):
            return None
        followed = self._turns.pop(turn_id, None)
        if followed is None:
            return None
        status, code = ENDINGS.get(str(turn.get("status")), FAILED)
        outcome = TurnOutcome(turn_id, status, code, followed.charged())
        return TurnEvent(
            "turn_ended", turn_id, outcome, tool_calls=followed.tools, answer=followed.answer
        )

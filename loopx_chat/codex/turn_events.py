"""Codex's turn notifications as typed events: the one decoder for chat turns and loop turns.

Owns reading what codex says about a thread's turns (`turn/started`, `turn/completed`,
`thread/tokenUsage/updated`, `item/started`, `item/completed`, `item/agentMessage/delta`,
`thread/status/changed`, `error`) into `TurnEvent`s, and the per-turn state that takes:
a turn's tokens (the growth of the thread's total over the turn, so codex repeating an
earlier total costs nothing), how many tool items it ran and a digest of its final answer,
and how often codex said it retries. `CodexThread.wait_turn` (a chat turn, begun by its
`turn/start`) and `GoalLoopWatch` (codex's own loop, whose turns begin with `turn/started`)
read the same events, so a turn's outcome and tokens are decided here once; each caller
keeps its own timers and decides what to do with them.

PURE: no I/O, no clock, no process, nothing sent to codex. It never keeps text: a delta's
text is passed to the caller in its event and dropped, an answer is kept as a digest only,
a retry becomes our own line (`turn_notices`), never codex's message.
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
NO_MARKS: tuple[int, str | None, bool] = (0, None, False)


@dataclass(frozen=True)
class TurnOutcome:
    upstream_turn_id: str
    status: TurnStatus  # completed | failed | interrupted
    error_code: str | None
    tokens: TokenCounts


class TurnEvent(NamedTuple):
    """One thing codex said about a turn (or, from `GoalLoopWatch`, about the goal).

    Immutable like a frozen dataclass, but a NamedTuple: one is made for every streamed
    delta of every chat turn, and it is made in 0.3 us against the dataclass's 1.0 us."""

    # turn_started | turn_ended | delta | usage | notice | produced | status (this decoder);
    # goal_updated (GoalLoopWatch)
    kind: str
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
    waiting: bool = False  # status: codex waits on the owner (its turn's timers pause)


class ThreadTotals(Protocol):
    """The thread a decoder reads for: its id, and its token total as codex last reported
    it (shared by every decoder of the thread: the next turn's baseline)."""

    thread_id: str
    usage_total: TokenCounts | None


def usage_total(usage: object) -> TokenCounts | None:
    """The cumulative `total` of a `thread/tokenUsage/updated` payload, or None."""
    total = usage.get("total") if isinstance(usage, dict) else None
    if not isinstance(total, dict):
        return None

    def num(key: str) -> int:
        value = total.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return TokenCounts(
        input_tokens=num("inputTokens"),
        output_tokens=num("outputTokens"),
        total_tokens=num("totalTokens"),
    )


class _TurnUsage:
    """One turn's tokens: the thread total it ended on minus the total it started from."""

    def __init__(self, before: TokenCounts | None) -> None:
        self.before = before or TokenCounts()
        self.end: TokenCounts | None = None

    def see(self, total: TokenCounts, ours: bool) -> None:
        if ours:
            self.end = total
        elif self.end is None:
            # A report for an earlier turn (a resume repeats the thread's total): the baseline.
            self.before = total

    def charged(self) -> TokenCounts:
        if self.end is None:
            return TokenCounts()
        return TokenCounts(
            input_tokens=max(0, self.end.input_tokens - self.before.input_tokens),
            output_tokens=max(0, self.end.output_tokens - self.before.output_tokens),
            total_tokens=max(0, self.end.total_tokens - self.before.total_tokens),
        )


def _item_type(params: Mapping[str, Any]) -> str | None:
    item = params.get("item")
    kind = item.get("type") if isinstance(item, dict) else None
    return kind if isinstance(kind, str) else None


def _turn_id(params: Mapping[str, Any]) -> str | None:
    """The id of the turn a `turn/started` or `turn/completed` carries."""
    turn = params.get("turn")
    turn_id = turn.get("id") if isinstance(turn, dict) else None
    return turn_id if isinstance(turn_id, str) else None


class TurnEvents:
    """The decoder of one thread's turn notifications, with the state of the turns it follows.

    A turn is followed from `begin` (the caller started it) or its `turn/started`, until its
    `turn/completed`; usage, items and the outcome of a turn it does not follow are not its
    to count (a report for one still moves the thread's total: the next turn's baseline).
    """

    def __init__(self, thread: ThreadTotals) -> None:
        self.thread = thread
        self._usage: dict[str, _TurnUsage] = {}
        # turn → (tool items, digest of its last answer, whether its last item was that answer)
        self._marks: dict[str, tuple[int, str | None, bool]] = {}
        self._retries = 0

    def begin(self, turn_id: str) -> bool:
        """Follow `turn_id` from now, charged from the thread's total; False if it already is."""
        if turn_id in self._usage:
            return False
        self._usage[turn_id] = _TurnUsage(self.thread.usage_total)
        return True

    def charged(self, turn_id: str) -> TokenCounts:
        """What a followed turn has cost so far (nothing, if it is not followed)."""
        usage = self._usage.get(turn_id)
        return TokenCounts() if usage is None else usage.charged()

    def answered(self, turn_id: str) -> bool:
        """Whether the turn's last finished item is the agent's answer: the response just
        counted ended the turn, and codex is not asking the model again."""
        return self._marks.get(turn_id, NO_MARKS)[2]

    def see(self, note: Notification) -> TurnEvent | None:
        """The event one notification of the thread's app-server makes, if any."""
        params = note.params
        if params.get("threadId") not in (None, self.thread.thread_id):
            return None
        # Most frequent first: a reply streams many deltas, each response reports usage.
        if note.method == "item/agentMessage/delta":  # inline, and positional: the hot path
            delta = params.get("delta")
            text = delta if isinstance(delta, str) else None
            return TurnEvent("delta", params.get("turnId"), None, None, text)
        if note.method == "thread/tokenUsage/updated":
            return self._token_usage(params)
        if note.method == "item/started":
            return self._item_started(params)
        if note.method == "item/completed":
            return self._item_completed(params)
        if note.method == "thread/status/changed":
            return self._status(params)
        if note.method == "turn/started":
            return self._turn_started(params)
        if note.method == "turn/completed":
            return self._turn_completed(params)
        if note.method == "error":
            return self._error(params)
        return None

    # -- one per method ---------------------------------------------------------------------
    def _status(self, params: Mapping[str, Any]) -> TurnEvent:
        status = params.get("status")
        flags = status.get("activeFlags") if isinstance(status, dict) else None
        waiting = isinstance(flags, list) and any(f in OWNER_WAIT_FLAGS for f in flags)
        return TurnEvent("status", waiting=waiting)

    def _token_usage(self, params: Mapping[str, Any]) -> TurnEvent | None:
        total = usage_total(params.get("tokenUsage"))
        turn_id = params.get("turnId")
        if total is not None:
            self.thread.usage_total = total
            for followed, usage in self._usage.items():
                usage.see(total, followed == turn_id)
        usage = self._usage.get(turn_id) if isinstance(turn_id, str) else None
        if usage is None:
            return None
        # Each model response's usage, while the turn runs: what a hard budget reads.
        return TurnEvent("usage", turn_id=turn_id, tokens=usage.charged().total_tokens)

    def _item_started(self, params: Mapping[str, Any]) -> TurnEvent | None:
        if _item_type(params) in (None, "userMessage"):
            return None
        return TurnEvent("produced", turn_id=params.get("turnId"))

    def _item_completed(self, params: Mapping[str, Any]) -> None:
        """Count a finished item of a followed turn: a tool's, or the agent's answer (kept
        as a digest only)."""
        turn_id, item = params.get("turnId"), params.get("item")
        if not isinstance(turn_id, str) or turn_id not in self._usage or not isinstance(item, dict):
            return
        tools, answer, _ = self._marks.get(turn_id, NO_MARKS)
        kind, text = item.get("type"), item.get("text")
        if kind == "agentMessage" and isinstance(text, str):
            answer = hashlib.sha256(text.strip().encode()).hexdigest()[:16]
        elif kind not in TALK_ITEMS:
            tools += 1
        self._marks[turn_id] = (tools, answer, kind == "agentMessage")

    def _error(self, params: Mapping[str, Any]) -> TurnEvent | None:
        self._retries += 1
        line = retry_notice(params, self._retries)
        if line is None:
            return None
        return TurnEvent("notice", turn_id=params.get("turnId"), text=line)

    def _turn_started(self, params: Mapping[str, Any]) -> TurnEvent | None:
        turn_id = _turn_id(params)
        if turn_id is None or not self.begin(turn_id):
            return None
        return TurnEvent("turn_started", turn_id=turn_id)

    def _turn_completed(self, params: Mapping[str, Any]) -> TurnEvent | None:
        turn_id = _turn_id(params)
        usage = self._usage.pop(turn_id, None) if turn_id is not None else None
        if usage is None or turn_id is None:
            return None
        status, code = ENDINGS.get(params["turn"].get("status"), FAILED)
        tools, answer, _ = self._marks.pop(turn_id, NO_MARKS)
        outcome = TurnOutcome(turn_id, status, code, usage.charged())
        return TurnEvent(
            "turn_ended", turn_id=turn_id, outcome=outcome, tool_calls=tools, answer=answer
        )

"""codex/budget_trip.py: the budget's interrupt, decided on the notifications codex sends.

The notifications are in the wire shape the recordings show (`turn/started`,
`item/completed`, `thread/tokenUsage/updated` with the thread's cumulative total,
`turn/completed`); what the trip sends is kept in a list instead of written to codex.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopx_chat.codex.budget_trip import BudgetTrip
from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.turn_events import TotalsSeen, TurnEvents
from loopx_chat.state.session_records import TokenCounts

THREAD = "thread-1"


def _trip(budget: int, spent: int = 0) -> tuple[BudgetTrip, list[tuple[str, Any]], Any]:
    """The trip, what it sent, and `see`: a notification through the reader's decoder, then
    the trip (as `RunLimits.arm` wires them)."""
    sent: list[tuple[str, Any]] = []

    def send(method: str, params: Mapping[str, Any]) -> None:
        sent.append((method, dict(params)))

    # The thread's total before the run: 1,000 tokens of earlier chat turns.
    events = TurnEvents(TotalsSeen(THREAD, TokenCounts(900, 100, 1000)))
    trip = BudgetTrip(THREAD, events, budget=budget, spent=spent, send=send)
    return trip, sent, lambda note: trip.on(events.see(note))


def _note(method: str, **params: Any) -> Notification:
    return Notification(method, {"threadId": THREAD, **params})


def _started(turn: str) -> Notification:
    return _note("turn/started", turn={"id": turn, "status": "inProgress"})


def _item(turn: str, kind: str) -> Notification:
    item = {"type": kind, "id": "i", **({"text": "done"} if kind == "agentMessage" else {})}
    return _note("item/completed", turnId=turn, item=item)


def _usage(turn: str, total: int) -> Notification:
    counts = {"inputTokens": total - 10, "outputTokens": 10, "totalTokens": total}
    return _note("thread/tokenUsage/updated", turnId=turn, tokenUsage={"total": counts})


def _completed(turn: str) -> Notification:
    return _note("turn/completed", turn={"id": turn, "status": "completed"})


def _interrupt(turn: str) -> tuple[str, Any]:
    return ("turn/interrupt", {"threadId": THREAD, "turnId": turn})


def test_a_turn_of_tool_calls_is_interrupted_once_as_its_count_reaches_the_budget() -> None:
    trip, sent, see = _trip(5000)
    for note in (_started("t1"), _item("t1", "commandExecution"), _usage("t1", 4000)):
        see(note)
    assert sent == [] and not trip.tripped("t1")  # 3,000 of 5,000
    see(_item("t1", "commandExecution"))
    see(_usage("t1", 6000))  # 5,000: more requests to come in this turn
    assert sent == [_interrupt("t1")] and trip.tripped("t1")
    see(_item("t1", "commandExecution"))
    see(_usage("t1", 7000))
    assert sent == [_interrupt("t1")]  # asked once


def test_a_turn_whose_answer_reaches_the_budget_is_left_to_end_by_itself() -> None:
    trip, sent, see = _trip(5000)
    for note in (_started("t1"), _item("t1", "agentMessage"), _usage("t1", 9000)):
        see(note)
    assert sent == [] and not trip.tripped("t1")


def test_the_count_is_the_runs_finished_turns_plus_the_running_ones() -> None:
    trip, sent, see = _trip(5000, spent=1000)  # a turn of 1,000 before (a recovered run's ledger)
    for note in (_started("t1"), _item("t1", "agentMessage"), _usage("t1", 3000)):
        see(note)
    see(_completed("t1"))  # 2,000 more: 3,000 spent
    see(_started("t2"))
    see(_item("t2", "commandExecution"))
    see(_usage("t2", 4500))  # 1,500 in t2: 4,500
    assert sent == []
    trip.count_more(500)  # what the ledger had that the trip did not count
    see(_usage("t2", 4500))
    assert sent == [_interrupt("t2")]


def test_other_threads_and_notifications_move_nothing() -> None:
    _, sent, see = _trip(100)
    see(Notification("turn/started", {"threadId": "other", "turn": {"id": "x"}}))
    see(Notification("thread/tokenUsage/updated", {"threadId": "other", "turnId": "x"}))
    see(_note("item/agentMessage/delta", turnId="t1", delta="hi"))
    see(_usage("t1", 99999))  # a turn it did not see start is not its to count
    assert sent == []

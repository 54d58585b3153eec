"""codex/runaway_trip.py: the guard's rule, and the reader's stop of the turns past it.

The notifications are in the wire shape the recordings show (as in `test_budget_trip.py`);
what the trip sends is kept in a list instead of written to codex.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.runaway_trip import (
    ASKS_PER_TURN,
    NO_PROGRESS_TURNS,
    RunawayTrip,
    guard_reason,
    repeats_after,
)
from loopx_chat.codex.turn_events import TotalsSeen, TurnEvents

THREAD = "thread-1"


def _trip(max_turns: int | None = None, **state: Any) -> tuple[RunawayTrip, list[str], Any]:
    """The trip, the turns it asked to stop, and `see`: a notification through the reader's
    decoder, then the trip (as `RunLimits.arm` wires them)."""
    asked: list[str] = []

    def send(method: str, params: Mapping[str, Any]) -> None:
        assert method == "turn/interrupt" and params["threadId"] == THREAD
        asked.append(str(params["turnId"]))

    start = {"repeats": 0, "last_answer": None, "finished": 0, **state}
    trip = RunawayTrip(THREAD, max_turns=max_turns, send=send, **start)
    events = TurnEvents(TotalsSeen(THREAD))
    return trip, asked, lambda note: trip.on(events.see(note), note.params.get("turnId"))


def _note(method: str, **params: Any) -> Notification:
    return Notification(method, {"threadId": THREAD, **params})


def _turn(turn: str, *items: tuple[str, str | None]) -> list[Notification]:
    """A whole turn: started, its items completed, completed."""
    notes = [_note("turn/started", turn={"id": turn, "status": "inProgress"})]
    for kind, text in items:
        item = {"type": kind, "id": f"{turn}-{kind}", **({"text": text} if text else {})}
        notes.append(_note("item/completed", turnId=turn, item=item))
    notes.append(_note("turn/completed", turn={"id": turn, "status": "completed"}))
    return notes


def _see(see: Any, notes: list[Notification]) -> None:
    for note in notes:
        see(note)


def test_the_rule_counts_turns_with_no_tool_and_the_same_answer() -> None:
    assert repeats_after(0, None, 0, "a") == 1
    assert repeats_after(1, "a", 0, "a") == 2
    assert repeats_after(2, "a", 0, "b") == 1  # a new answer: progress, counted afresh
    assert repeats_after(2, "a", 1, "a") == 0  # a tool call is progress
    assert guard_reason(NO_PROGRESS_TURNS - 1, 9, None) is None
    assert "no progress in 3 turns" in str(guard_reason(NO_PROGRESS_TURNS, 3, None))
    assert "limit of 2 turns" in str(guard_reason(0, 2, 2))


def test_after_the_third_same_answer_each_turn_codex_starts_is_asked_to_stop() -> None:
    trip, asked, see = _trip()
    for n in (1, 2):
        _see(see, _turn(f"t{n}", ("agentMessage", "still thinking")))
    assert not trip.tripped and asked == []
    _see(see, _turn("t3", ("agentMessage", "still thinking")))
    assert trip.tripped and asked == []  # nothing runs yet: nothing to stop
    see(_note("turn/started", turn={"id": "t4", "status": "inProgress"}))
    assert asked == ["t4"] and trip.asked("t4")
    # Refused in a turn's first milliseconds: asked again at its next notes, a few times.
    for _ in range(5):
        see(_note("item/started", turnId="t4", item={"type": "reasoning", "id": "r"}))
    assert asked == ["t4"] * ASKS_PER_TURN
    assert not trip.asked("t5")


def test_a_tool_call_between_the_answers_is_progress() -> None:
    trip, _, see = _trip()
    _see(see, _turn("t1", ("agentMessage", "same")))
    _see(see, _turn("t2", ("commandExecution", None), ("agentMessage", "same")))
    _see(see, _turn("t3", ("agentMessage", "same")))
    _see(see, _turn("t4", ("agentMessage", "same")))
    assert not trip.tripped  # 2 in a row after the tool call
    _see(see, _turn("t5", ("agentMessage", "same")))
    assert trip.tripped


def test_max_turns_and_a_recovered_runs_count_carry_on_from_where_the_run_was() -> None:
    trip, _, see = _trip(max_turns=3, finished=2)
    _see(see, _turn("t3", ("agentMessage", "step 3")))
    assert trip.tripped
    trip, _, see = _trip(repeats=2, last_answer=None)
    _see(see, _turn("t1", ("agentMessage", "x")))
    assert not trip.tripped  # the digest differs from none: counted afresh


def test_once_the_owner_paused_the_run_no_turn_is_asked_to_stop() -> None:
    """The owner's pause is first in the run's order: the turn codex starts then finishes as
    after any pause, whether the guard's count was reached before or after it."""
    for paused_after_end in (False, True):
        owner_paused = threading.Event()
        trip, asked, see = _trip(max_turns=1, stood_down=owner_paused)
        if not paused_after_end:
            owner_paused.set()
        _see(see, _turn("t1", ("agentMessage", "step 1")))
        owner_paused.set()
        see(_note("turn/started", turn={"id": "t2", "status": "inProgress"}))
        see(_note("item/started", turnId="t2", item={"type": "reasoning", "id": "r"}))
        assert asked == [] and not trip.asked("t2")


def test_another_threads_turns_are_not_counted() -> None:
    trip, asked, see = _trip(max_turns=1)
    other = {"threadId": "thread-2", "turn": {"id": "o1", "status": "inProgress"}}
    see(Notification("turn/started", other))
    see(Notification("turn/completed", {**other, "turn": {"id": "o1", "status": "completed"}}))
    assert not trip.tripped and asked == []

"""A goal run's hard budget, acted on by the app-server's reader as codex reports tokens.

Owns `BudgetTrip`: fed each event of the thread's app-server on the reader thread, before
the notification reaches the run's inbox (`HostConnection.tap`; the reader's one decoder,
`turn_events.TurnEvents`, shared with the runaway guard's trip, makes the events), it counts
the run's tokens the way the run does (each followed turn charged the growth of the
thread's total) and, once they reach the budget in a turn
whose last finished item is not the agent's answer (more model requests to come), sends
`turn/interrupt` for it at once, answered to nobody (`HostConnection.fire`). Codex checks a
goal's budget only between turns, and within a turn of quick tool calls its next model
request follows the response that reached the budget within milliseconds: the run's own
thread, which takes the same count from its inbox later (later still on a loaded machine),
loses that race; the reader, which reads it first, does not wait on anything to act.

It never waits (the reader must never block on the run or on codex's answer), never decides
anything but this one interrupt (the run still records the turn, marks the goal
budget-limited and interrupts a turn codex starts after), and keeps numbers and ids only.
A turn whose last response was its answer is left to the run: it ends by itself, and
codex, counting as the ledger does, marks the goal budget-limited.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from loopx_chat.codex.turn_events import TurnEvent, TurnEvents

# Fire and forget: `send(method, params)` writes one request whose answer nobody awaits.
Send = Callable[[str, Mapping[str, Any]], object]


class BudgetTrip:
    """One run's budget on one thread: `on` each event the reader's decoder makes."""

    def __init__(
        self, thread_id: str, events: TurnEvents, *, budget: int, spent: int, send: Send
    ) -> None:
        self.budget = budget
        self._spent = spent  # the run's finished turns, as the ledger counts them
        self._send = send
        self._events = events  # the decoder that makes the events: what each turn answered
        self._thread_id = thread_id
        self._lock = threading.Lock()
        self._tripped: set[str] = set()

    def count_more(self, tokens: int) -> None:
        """Finished turns the run found since (a recovered run reads its ledger)."""
        with self._lock:
            self._spent += tokens

    def tripped(self, turn_id: str) -> bool:
        """Whether this trip already asked codex to interrupt `turn_id` (any thread may ask)."""
        with self._lock:
            return turn_id in self._tripped

    def on(self, event: TurnEvent | None) -> None:
        if event is None or event.turn_id is None:
            return
        with self._lock:
            if event.kind == "turn_ended" and event.outcome is not None:
                self._spent += event.outcome.tokens.total_tokens
                return
            if event.kind != "usage" or self._spent + (event.tokens or 0) < self.budget:
                return
            if self._events.answered(event.turn_id) or event.turn_id in self._tripped:
                return  # its answer ended it (no model request more in it), or asked already
            self._tripped.add(event.turn_id)
        self._send("turn/interrupt", {"threadId": self._thread_id, "turnId": event.turn_id})

"""A goal run's runaway guard: its rule, and the reader's first stop of the turns past it.

Owns the rule (`repeats_after`, `guard_reason`: turns in a row with no tool call and the same
final answer, or the owner's `--max-turns`), which the run's own thread applies at each turn's
end (`controller.run_limits`), and `RunawayTrip`, which applies the same rule on the
app-server's reader thread (`HostConnection.tap`, beside `budget_trip.BudgetTrip`, on the
events of the same decoder). Codex
starts a continuation turn within milliseconds of the last one's end, and on a loaded machine
the run's thread reads that end after codex has started the next turn, and sometimes
finished it and started another: the guard said "after 3" and the loop ran 5. The reader
reads it first, so from the end of the turn that trips the guard it stops every turn codex
starts (`turn/interrupt`, answered to nobody), and codex starts no turn by itself after an
interrupt.

It stands down once the owner pauses the run (`stood_down`, set by the run as the owner's
Pause is asked, before it is put in the run's inbox, and as it takes a `goal stop` or a
rejected gate): the owner's pause is first in the run's order, so the run opens no gate, and
a turn codex starts meanwhile finishes as after any pause. An end the run took before the
Pause still pauses it by the guard; the run's own thread then stops the turns past it.

It never waits, never changes the goal, opens no gate and records nothing: the run does all
of that at the same turn's end, by the same rule; this only stops a turn sooner. It keeps
ids, counts and answer digests only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopx_chat.codex.turn_events import TurnEvent

# Continuation turns in a row with no tool call and the same final answer before the run is
# paused with an owner gate: a loop that repeats itself spends the budget for nothing.
NO_PROGRESS_TURNS = 3
# `turn/interrupt` is refused for the first milliseconds of a turn (`CodexThread.
# _send_interrupt`): a turn past the guard is asked at its start and at its next notes.
ASKS_PER_TURN = 3
Send = Callable[[str, Mapping[str, Any]], object]


def repeats_after(
    repeats: int, last_answer: str | None, tool_calls: int, answer: str | None
) -> int:
    """Turns in a row that made no progress, once a turn ended with `tool_calls` and the
    digest `answer` (a turn with no tool call counts one; the same answer again, one more)."""
    same = tool_calls == 0 and answer is not None and answer == last_answer
    return repeats + 1 if same else int(tool_calls == 0)


def guard_reason(repeats: int, finished: int, max_turns: int | None) -> str | None:
    """Why the guard pauses the run after its `finished`-th turn, in words; None: it does not."""
    if repeats >= NO_PROGRESS_TURNS:
        return (
            f"Codex made no progress in {repeats} turns in a row (no command or tool, "
            "the same answer each time)"
        )
    if max_turns is not None and finished >= max_turns:
        return f"the run reached its limit of {max_turns} turns (--max-turns)"
    return None


class RunawayTrip:
    """One run's guard on one thread: `on` each event the reader's decoder makes."""

    def __init__(
        self,
        thread_id: str,
        *,
        repeats: int,
        last_answer: str | None,
        finished: int,
        max_turns: int | None,
        send: Send,
        stood_down: threading.Event | None = None,
    ) -> None:
        self._thread_id = thread_id
        self._repeats, self._last_answer = repeats, last_answer
        self._finished, self._max_turns = finished, max_turns
        self._send = send
        self._stood_down = stood_down or threading.Event()
        self._lock = threading.Lock()
        self.tripped = False
        self._asks: dict[str, int] = {}  # turns started past the guard: interrupts sent

    def asked(self, turn_id: str) -> bool:
        """Whether this trip asked codex to interrupt `turn_id` (any thread may ask)."""
        with self._lock:
            return turn_id in self._asks

    def on(self, event: TurnEvent | None, note_turn: object) -> None:
        """`event`: what the decoder made of a notification (None: nothing), `note_turn` the
        turn that notification names (an item's, which the decoder makes no event of)."""
        turn_id = event.turn_id if event is not None else note_turn
        if event is not None and event.kind == "turn_ended" and event.outcome is not None:
            self._ended(event.tool_calls, event.answer)
            return
        # Not stood down yet: the end that tripped this was put in the run's inbox before the
        # owner's Pause (put after `stood_down` is set), so the run takes it first too.
        if not self.tripped or self._stood_down.is_set() or not isinstance(turn_id, str):
            return
        with self._lock:
            if event is not None and event.kind == "turn_started":
                self._asks.setdefault(turn_id, 0)
            asks = self._asks.get(turn_id)
            if asks is None or asks >= ASKS_PER_TURN:
                return
            self._asks[turn_id] = asks + 1
        self._send("turn/interrupt", {"threadId": self._thread_id, "turnId": turn_id})

    def _ended(self, tool_calls: int, answer: str | None) -> None:
        self._repeats = repeats_after(self._repeats, self._last_answer, tool_calls, answer)
        self._last_answer = answer
        self._finished += 1
        if guard_reason(self._repeats, self._finished, self._max_turns) is not None:
            self.tripped = True

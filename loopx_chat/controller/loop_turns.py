"""The turns of a goal loop no run of ours follows, put in the turn ledger like any other.

Owns turning one `GoalLoopWatch`'s events into turn records of a session (`origin:
goal_loop`, no run id): a draft when codex starts a continuation turn, its outcome when it
ends, and `interrupted` for one still open when the thread is let go. It never sets, reads
or changes the host goal and never decides how long anything is followed: its callers do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopx_chat.codex.goal_loop import LoopEvent
from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.controller.turn_ledger import TurnLedger
from loopx_chat.state.session_records import TokenCounts, TurnRecord


@dataclass
class LoopTurns:
    """The continuation turns of one session's loop, recorded as they start and end."""

    turns: TurnLedger
    session_id: str
    warm: Any = None  # the loaded thread: its running turn is ours to show while it runs
    open_turns: dict[str, TurnRecord] = field(default_factory=dict)
    recorded: int = 0

    def on(self, event: LoopEvent) -> None:
        if event.kind == "turn_started" and event.turn_id:
            turn = self.turns.draft(
                self.session_id, None, origin="goal_loop", upstream_turn_id=event.turn_id
            )
            self.turns.begin(turn)
            self.open_turns[event.turn_id] = turn
            if self.warm is not None:
                self.warm.running_turn_id = turn.turn_id
        elif event.kind == "turn_ended" and event.outcome is not None:
            turn = self.open_turns.pop(str(event.turn_id), None)
            if turn is not None:
                self.turns.finish(turn, event.outcome)
                self.recorded += 1
                if self.warm is not None:
                    self.warm.running_turn_id = None

    def settle(self) -> None:
        """The thread is let go: a turn still open ends with it, recorded interrupted."""
        for upstream, turn in self.open_turns.items():
            self.turns.finish(turn, TurnOutcome(upstream, "interrupted", None, TokenCounts()))
            self.recorded += 1
        self.open_turns.clear()
        if self.warm is not None:
            self.warm.running_turn_id = None

"""The continuation turns of one followed goal loop, in the ledger: `LoopTurns`.

Owns the one bookkeeping of a loop's turns (`origin: goal_loop`, a run's id or none): a
draft when codex starts a continuation turn, its outcome when it ends, `interrupted` for one
still open when the thread is let go or the follow ends. Every follower
(`loop_follower.LoopFollower`, a run of ours or a loop we did not start) records through it.

It never talks to codex, never decides when a loop stops, and keeps no text.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.state.session_records import TokenCounts, TurnRecord

if TYPE_CHECKING:
    from loopx_chat.codex.goal_loop import LoopEvent
    from loopx_chat.controller.host_requests import HostRequestDesk
    from loopx_chat.controller.turn_ledger import TurnLedger
    from loopx_chat.controller.warm_threads import Warm


@dataclass
class LoopTurns:
    """The continuation turns of one session's loop, recorded as they start and end."""

    turns: TurnLedger
    session_id: str
    warm: Warm | None = None  # the loaded thread: its running turn is ours to show
    run_id: str | None = None  # the goal run the turns belong to, if one of ours
    desk: HostRequestDesk | None = None  # codex forgets what it asked when a turn ends
    open_turns: dict[str, TurnRecord] = field(default_factory=dict)
    recorded: int = 0

    def on(self, event: LoopEvent) -> TurnRecord | None:
        """Record a turn codex started or ended; the record of a turn that ended."""
        if event.kind == "turn_started" and event.turn_id:
            turn = self.turns.draft(
                self.session_id,
                None,
                origin="goal_loop",
                run_id=self.run_id,
                upstream_turn_id=event.turn_id,
            )
            # Open before it is written: a stop inside `begin` (after the turn's record,
            # before the session names it) leaves a turn that `settle` still records.
            self.open_turns[event.turn_id] = turn
            self.turns.begin(turn)
            if self.warm is not None:
                self.warm.running_turn_id = turn.turn_id
        elif event.kind == "turn_ended" and event.outcome is not None:
            turn = self.open_turns.pop(str(event.turn_id), None)
            if turn is None:
                return None
            result = self.turns.finish(turn, event.outcome)
            self.recorded += 1
            if self.warm is not None:
                self.warm.running_turn_id = None
                if self.desk is not None:
                    self.desk.turn_ended(self.warm.thread.thread_id)
            return result.turn
        return None

    def settle(self, code: str | None = None) -> list[TurnRecord]:
        """The thread is let go: a turn still open ends with it, recorded interrupted."""
        settled: list[TurnRecord] = []
        for upstream, turn in self.open_turns.items():
            self.turns.finish(turn, TurnOutcome(upstream, "interrupted", code, TokenCounts()))
            settled.append(replace(turn, status="interrupted"))
        self.recorded += len(settled)
        self.open_turns.clear()
        if self.warm is not None:
            self.warm.running_turn_id = None
        return settled

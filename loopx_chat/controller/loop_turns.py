"""The continuation turns of one followed goal loop, in the ledger: `LoopTurns`.

Owns the one bookkeeping of a loop's turns (`origin: goal_loop`, a run's id or none): a
draft when codex starts a continuation turn, its outcome when it ends, `interrupted` for one
still open when the thread is let go or the follow ends. Every follower
(`loop_follower.LoopFollower`, a run of ours or a loop we did not start) records through it,
and asks it whether the owner asked, from another process, to stop one of them (`chat
interrupt`: the session's interrupt marker, `interrupt_asked`; one stat a look, read only
when it changed).

It never talks to codex, never decides when a loop stops, and keeps no text.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.errors import LoopxChatError
from loopx_chat.state.safe_read import read_regular
from loopx_chat.state.session_records import TokenCounts, TurnRecord, TurnStatus

if TYPE_CHECKING:
    from loopx_chat.codex.goal_loop import LoopEvent
    from loopx_chat.controller.host_requests import HostRequestDesk
    from loopx_chat.controller.turn_ledger import TurnLedger
    from loopx_chat.controller.warm_threads import Warm
    from loopx_chat.state.file_change import FileChange


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
    ids: set[str] = field(default_factory=set)  # every turn of ours this loop drafted
    marker: FileChange | None = None  # the interrupt marker's stat at the last look

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
            self.ids.add(turn.turn_id)
            if self.warm is not None:
                # Before the session names it: an interrupt that reads the record then finds
                # the turn running here, not a dead controller's to settle.
                self.warm.running_turn_id = turn.turn_id
            self.turns.begin(turn)
        elif event.kind == "turn_ended" and event.outcome is not None:
            ended = self.open_turns.pop(str(event.turn_id), None)
            if ended is None:
                return None
            result = self.turns.finish(ended, event.outcome)
            self.recorded += 1
            if self.warm is not None:
                self.warm.running_turn_id = None
                if self.desk is not None:
                    self.desk.turn_ended(self.warm.thread.thread_id)
            return result.turn
        return None

    def interrupt_asked(self) -> bool:
        """Whether another process asked to stop a turn of this loop (`chat interrupt`: the
        session's marker names it); the marker is taken then. The follower looks five times a
        second: a look is one stat, and the marker is read only when that moved, so one naming
        any other turn (a chat turn's; a stale one goes with the next) is read once."""
        if self.marker is None:
            from loopx_chat.state.file_change import FileChange  # a run's, after the spawn

            self.marker = FileChange(self.turns.interrupt_marker(self.session_id))
        if not self.marker.moved() or self.marker.seen is None:
            return False
        try:
            named = read_regular(self.marker.path, limit=256).decode("ascii", "replace")
        except (FileNotFoundError, LoopxChatError):
            return False
        if named not in self.ids:
            return False
        self.marker.path.unlink(missing_ok=True)
        return True

    def settle(self, code: str | None = None) -> list[TurnRecord]:
        """The thread is let go: a turn still open ends with it, recorded interrupted."""
        settled: list[TurnRecord] = []
        for upstream, turn in self.open_turns.items():
            self.turns.finish(
                turn, TurnOutcome(upstream, TurnStatus.INTERRUPTED, code, TokenCounts())
            )
            settled.append(replace(turn, status=TurnStatus.INTERRUPTED))
        self.recorded += len(settled)
        self.open_turns.clear()
        if self.warm is not None:
            self.warm.running_turn_id = None
        return settled

"""Codex's goal loop on a loaded thread, followed once: its events into turn records, until a
stop rule says so.

Owns `LoopTurns`, the one bookkeeping of a loop's turns in the ledger (`origin: goal_loop`,
a run's id or none): a draft when codex starts a continuation turn, its outcome when it
ends, `interrupted` for one open when the thread is let go; a goal run (`goal_run._Follow`)
keeps its turns through it too. And `LoopFollower`, for a loop no run of ours runs (the
service's `HostLoops`; a CLI command before it lets a loaded thread go): its inputs are one
queue, codex's notifications (routed there while it follows) and what this process asks
(`LetGo`, and a run's `PauseAsked`); when it stops is data (`StopRules`). The one file it
looks at is the goal's `goal stop` record (`stop_look_sec`): the CLI writes it, never
through the service, so it is always another process's write.

It never sets the host goal but to `paused` (the owner's Pause, a `goal stop` in force),
never decides that a loop may run, and keeps no text.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from loopx_chat.codex.goal_loop import GoalLoopWatch, HostGoalState, LoopEvent
from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.controller.run_inbox import PauseAsked
from loopx_chat.controller.turn_ledger import TurnLedger
from loopx_chat.errors import LoopxChatError
from loopx_chat.state.session_records import TokenCounts, TurnRecord


@dataclass
class LoopTurns:
    """The continuation turns of one session's loop, recorded as they start and end."""

    turns: TurnLedger
    session_id: str
    warm: Any = None  # the loaded thread: its running turn is ours to show while it runs
    run_id: str | None = None  # the goal run the turns belong to, if one of ours
    desk: Any = None  # the host-request desk: codex forgets what it asked when a turn ends
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
            self.turns.begin(turn)
            self.open_turns[event.turn_id] = turn
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


@dataclass(frozen=True)
class StopRules:
    """When following a loop ends (besides `LetGo`), as data. None: the rule is off."""

    quiet_sec: float | None = None  # codex said nothing of the loop for this long, no turn open
    most_sec: float | None = None  # this long in all (a turn still open is recorded interrupted)
    loop_ended: bool = False  # the host goal left `active` and no turn is open
    hand_over_sec: float = 0.0  # let go for a Run: how long the running turn may take to end
    stop_look_sec: float | None = None  # how often the `goal stop` record is looked at


@dataclass(frozen=True)
class LetGo:
    """Stop following: `hand_over` (a Run adopts the loop) lets the running turn end first."""

    hand_over: bool = False


class LoopFollower:
    """One loop no run of ours runs, followed on the thread `watch` holds, by `rules`."""

    def __init__(
        self,
        loop: LoopTurns,
        rules: StopRules,
        *,
        record_pause: Callable[[str, str], dict[str, Any]] | None = None,
        stopped_by: Callable[[], str | None] | None = None,
    ) -> None:
        self.loop = loop
        self.rules = rules
        self.record_pause = record_pause  # (actor, host status) -> the Pause's record
        self.stopped_by = stopped_by  # the actor of a `goal stop` in force, or None
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.goal: HostGoalState | None = None
        self.paused: dict[str, Any] | None = None
        self.error: LoopxChatError | None = None
        self.done = threading.Event()
        self.answered = threading.Event()  # a Pause was handled (or the follow is over)
        self.why: str | None = None  # which rule ended it: a `StopRules` field, or `let_go`
        self._hand_over = False

    def let_go(self, *, hand_over: bool = False) -> None:
        self.inbox.put(LetGo(hand_over))

    def pause(self, actor: str, timeout: float) -> dict[str, Any] | None:
        """Ask for the owner's Pause; its record once done, None when the follow ended first
        (`error` says why, if it failed)."""
        self.inbox.put(PauseAsked(actor))
        self.answered.wait(timeout)
        return self.paused

    def follow(self, watch: GoalLoopWatch, goal: HostGoalState | None = None) -> int:
        """Follow until a rule says stop (`goal`: the host goal as it starts); the turns
        recorded, one still open recorded interrupted (letting the thread go ends it).
        Raises (and keeps in `error`) `app_server_exited` when codex died."""
        self.goal, proc = goal, watch.thread.proc
        proc.route(self.inbox)
        try:
            self.why = self._follow(watch)
            if self._hand_over:
                self._hand_over_turn(watch)
        except LoopxChatError as exc:
            self.error = exc
            raise
        finally:
            proc.route(None)
            self.loop.settle()
            self.done.set()
            self.answered.set()
        return self.loop.recorded

    def _follow(self, watch: GoalLoopWatch) -> str:
        """Take inputs until a rule says stop; which one."""
        rules = self.rules
        start = last = next_look = time.monotonic()
        while True:
            now = time.monotonic()
            if rules.stop_look_sec is not None and now >= next_look:
                next_look = now + rules.stop_look_sec
                self._look_for_stop(watch)
            item = self._take(self._wait(now, start, last, next_look))
            if item is None:
                raise watch.ended()
            if isinstance(item, LetGo):
                self._hand_over = item.hand_over
                return "let_go"
            if isinstance(item, PauseAsked):
                self._pause(watch, item.actor)
            elif isinstance(item, Notification):
                last = self._see(watch, item) or last
            if (why := self._stops(watch, start, last)) is not None:
                return why

    def _see(self, watch: GoalLoopWatch, note: Notification) -> float | None:
        """Record what codex's notification says of the loop; when, if it said anything."""
        event = watch.see(note)
        if event is None:
            return None
        if event.kind == "goal_updated" and event.goal is not None:
            self.goal = event.goal
        self.loop.on(event)
        return time.monotonic()

    def _hand_over_turn(self, watch: GoalLoopWatch) -> None:
        """Let go for a Run: the running turn gets a moment to end on its own record."""
        deadline = time.monotonic() + self.rules.hand_over_sec
        while self.loop.open_turns and (left := deadline - time.monotonic()) > 0:
            item = self._take(left)
            if item is None:
                return  # codex is gone: the turn is recorded interrupted
            if isinstance(item, Notification):
                self._see(watch, item)

    def _stops(self, watch: GoalLoopWatch, start: float, last: float) -> str | None:
        """The rule that says stop now, if any."""
        rules, now = self.rules, time.monotonic()
        if rules.most_sec is not None and now - start >= rules.most_sec:
            return "most_sec"
        if self.loop.open_turns or watch.running_turn_id is not None or not self.inbox.empty():
            return None  # a turn codex started is seen before the loop is called over
        if rules.loop_ended and (self.goal is None or self.goal.status != "active"):
            return "loop_ended"
        if rules.quiet_sec is not None and now - last > rules.quiet_sec:
            return "quiet_sec"
        return None

    def _wait(self, now: float, start: float, last: float, next_look: float) -> float:
        """How long the next take may wait: until the nearest rule could say stop."""
        rules = self.rules
        times = [start + rules.most_sec] if rules.most_sec is not None else []
        if rules.quiet_sec is not None:
            times.append(last + rules.quiet_sec + 0.01)
        if rules.stop_look_sec is not None:
            times.append(next_look)
        return max(0.0, min(times, default=now + 1.0) - now)

    def _take(self, timeout: float) -> object:
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return False  # nothing came: only the clock moved

    def _look_for_stop(self, watch: GoalLoopWatch) -> None:
        """`goal stop` in force is the owner's recorded "no automatic turn": the loop is
        paused like the card's Pause, with the stop's actor. An unreadable record changes
        nothing."""
        if self.stopped_by is None or self.paused is not None:
            return
        try:
            actor = self.stopped_by()
        except LoopxChatError:
            return
        if actor is not None:
            self._pause(watch, f"{actor} (goal stop)")

    def _pause(self, watch: GoalLoopWatch, actor: str) -> None:
        if self.paused is None and self.record_pause is not None:
            self.goal = watch.set("paused")
            self.paused = self.record_pause(actor, self.goal.status)
        self.answered.set()

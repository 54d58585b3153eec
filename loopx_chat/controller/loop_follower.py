"""Codex's goal loop on a loaded thread, followed once, by one class and one loop.

Owns `LoopFollower`: a run of ours (`for_run`, then `our_run().run`: the budget, gates, record
`our_run.OurRun` brings) or a loop no run of ours runs (`follow`: the service's `HostLoops`,
a CLI command before it lets a thread go), which has none of them. One take-inputs loop
(`take_inputs`) follows both: one ordered queue (`run_inbox`: codex's notifications, which the
app-server's reader only puts, and what this process asks), the goal's records looked at
between inputs (`Looks`: `StopLook`, the `goal stop` record of a loop not ours; a run's
`run_gates.RunGates`), when to stop as data (`StopRules`), the turns recorded through
`loop_turns.LoopTurns`, the state moved only as `run_states.MOVES` allows.

It never calls `turn/start` (only `thread/goal/set`, `turn/interrupt`), never sets a loop
not ours but to `paused`, never decides that a loop may run, and keeps no text.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from loopx_chat.codex.goal_loop import GoalLoopWatch, HostGoalState, LoopEvent
from loopx_chat.codex.host_connection import Notification
from loopx_chat.controller.loop_turns import LoopTurns
from loopx_chat.controller.run_inbox import (
    GateOpened,
    InterruptAsked,
    LetGo,
    PauseAsked,
    RunInbox,
    RunInput,
    StopAsked,
)
from loopx_chat.controller.run_states import (
    RUNNING,
    TURN_INTERRUPTED_BY_OWNER,
    TURN_INTERRUPTED_OUTSIDE,
    RunState,
)
from loopx_chat.errors import CodexError, LoopxChatError, StateError
from loopx_chat.state.session_records import TurnRecord, TurnStatus

if TYPE_CHECKING:
    from loopx_chat.controller.goal_run import GoalRunner
    from loopx_chat.controller.goal_run_checks import RunPlan
    from loopx_chat.controller.our_run import OurRun, TurnProgress
    from loopx_chat.goals.goal_runs import GoalRun

# Codex's app-server died: a run starts it again (`our_run`); a follower asking codex which
# turn runs passes these on rather than taking them for "codex cannot say".
RESPAWN_CODES = ("app_server_exited", "app_server_protocol")
# The goal statuses codex sets itself when its loop ends (its budget spent, the model's
# `update_goal` complete), after which it starts no continuation turn.
CODEX_ENDS = ("budgetLimited", "complete")


@dataclass(frozen=True)
class StopRules:
    """When following a loop ends (besides `LetGo` and the records), as data. None: off."""

    quiet_sec: float | None = None  # codex said nothing of the loop for this long, no turn open
    most_sec: float | None = None  # this long in all (a turn still open is recorded interrupted)
    loop_ended: bool = False  # the host goal left `active` and no turn is open
    hand_over_sec: float = 0.0  # let go for a Run: how long the running turn may take to end
    stop_look_sec: float | None = None  # how often the goal's records are looked at
    # The loop's end is confirmed: a gate open holds it, and it waits a quiet step and asks
    # codex which turn runs, unless codex ended the loop itself (a run of ours).
    end_confirmed: bool = False
    idle_sec: float | None = None  # the goal active, no event this long, no owner waited on
    first_output_sec: float | None = None  # a turn codex started said nothing this long
    step_sec: float | None = None  # every take waits this long at most (the gate log's stat)
    # A turn interrupted by none of our own rules ends the loop: codex keeps the goal
    # `active` and starts nothing more, so after a quiet step and codex's word that no turn
    # runs, the goal is paused with the reason (a run of ours; never a loop not ours).
    outside_interrupt: bool = False


@dataclass(frozen=True)
class Stop:
    """What ended the loop: a `StopRules` field, `let_go`, `stopped` or `interrupted`; `now`:
    the goal is paused and its running turn interrupted (else the loop ended by itself)."""

    why: str
    by: str | None = None  # who stopped it, in a run's record
    reason: str | None = None
    now: bool = False


# The owner interrupted a turn of a run of ours (`chat interrupt`): the run stops now, paused.
OWNER_INTERRUPT = Stop("interrupted", "owner (chat interrupt)", TURN_INTERRUPTED_BY_OWNER, True)


class Looks(Protocol):
    """The goal's records between inputs: whether one moved since the last look (`changed`:
    looked at now), acting on them and the owner's Pause (`look`: what stops, if so), the
    caller of a gate answered (`answer`), whether the loop waits on the owner (never idle)
    or a gate holds it (`blocked`: not over while one is open)."""

    def changed(self) -> bool: ...
    def look(self) -> Stop | None: ...
    def answer(self, item: RunInput) -> None: ...
    def waits_on_owner(self) -> bool: ...
    def blocked(self) -> bool: ...


class StopLook:
    """A loop not ours: the one file looked at is the goal's `goal stop` record, always
    another process's write (the CLI writes it, never through the service). A stop in force,
    or the owner's Pause, pauses the loop and is recorded at once (`record_pause`). The
    owner's `chat interrupt` of its turn stops that turn, nothing more (codex's own rule for
    an interrupt: the loop starts no further turn)."""

    def __init__(
        self,
        follower: LoopFollower,
        record_pause: Callable[[str, str], dict[str, Any]] | None,
        stopped_by: Callable[[], str | None] | None,
    ) -> None:
        self.follower = follower
        self.record_pause = record_pause  # (actor, host status) -> the Pause's record
        self.stopped_by = stopped_by  # the actor of a `goal stop` in force, or None

    def changed(self) -> bool:
        return False

    def waits_on_owner(self) -> bool:
        return False

    def blocked(self) -> bool:
        return False

    def answer(self, item: RunInput) -> None:
        return None  # no gate of a loop not ours is asked about

    def look(self) -> Stop | None:
        f = self.follower
        if f.owner_interrupted():
            for upstream in list(f.loop.open_turns):
                f.send_interrupt(upstream)
        if f.pause_asked is not None:
            self._pause(f.pause_asked)
            f.pause_asked = None
        if self.stopped_by is None or f.paused is not None:
            return None
        try:
            actor = self.stopped_by()
        except LoopxChatError:
            return None  # an unreadable record changes nothing
        if actor is not None:
            self._pause(f"{actor} (goal stop)")
        return None

    def _pause(self, actor: str) -> None:
        f = self.follower
        if f.paused is None and self.record_pause is not None:
            f.state.move("paused")
            f.goal = f.watch.set("paused")
            f.paused = self.record_pause(actor, f.goal.status)


class LoopFollower:
    """One goal loop followed on the thread its watch holds: a run of ours (`for_run`, then
    `our_run().run`), or a loop no run of ours runs (`follow`), by `rules`."""

    def __init__(
        self,
        loop: LoopTurns,
        rules: StopRules | None = None,
        *,
        record_pause: Callable[[str, str], dict[str, Any]] | None = None,
        stopped_by: Callable[[], str | None] | None = None,
    ) -> None:
        self.loop = loop  # the loop's turns in the ledger
        self.rules = rules or StopRules()
        # A run of ours: its budget, gates and record (`for_run`); a loop not ours has none.
        self.ours: OurRun | None = None
        self.looks: Looks = StopLook(self, record_pause, stopped_by)
        # The one ordered input queue: codex's notifications (routed here while the thread is
        # followed) and what the owner and this process did (`run_inbox`).
        self.inbox = RunInbox()
        self.state = RunState(RUNNING)  # moves checked by `run_states.MOVES`
        self.goal: HostGoalState | None = None
        self.watch: Any = None  # the `GoalLoopWatch` of the followed thread
        self.finished: list[TurnRecord] = []
        self.paused: dict[str, Any] | None = None  # the Pause of a loop not ours, recorded
        self.pause_asked: str | None = None  # the owner's Pause, taken from the inbox
        self.interrupt_named: str | None = None  # the owner's `chat interrupt`, from the inbox
        self.error: LoopxChatError | None = None
        self.done = threading.Event()  # a loop not ours: the follow is over
        self.answered = threading.Event()  # a Pause was handled (or the follow is over)
        self.why: str | None = None  # which rule ended it: a `StopRules` field, or `let_go`
        self.hand_over = False
        self.stop_requested = threading.Event()  # this process stops
        self.follower_thread: threading.Thread | None = None
        self.say: Callable[[str], None] = lambda _: None
        self.on_delta: Callable[[str], None] | None = None  # the agent's reply, never stored
        self.steered = False  # the goal was set or a turn interrupted after the loop's start
        self.interrupted: set[str] = set()  # the turns this process asked codex to interrupt
        self.outside: str | None = None  # the last turn ended interrupted by someone else
        self.last = 0.0  # monotonic: the last event of the loop (or the owner waited on)

    @classmethod
    def for_run(
        cls,
        runner: GoalRunner,
        plan: RunPlan,
        record: GoalRun,
        on_turn: Callable[[TurnProgress], None] | None,
        say: Callable[[str], None],
        *,
        recovering: bool = False,
    ) -> LoopFollower:
        """What follows one authorized run of ours (`our_run().run()` blocks till it ends); turns
        carry the run's id. `recovering`: the run's process died with the goal active."""
        from loopx_chat.controller.our_run import OurRun

        turns = LoopTurns(runner.controller.turns, plan.session.session_id, run_id=record.run_id)
        follow = cls(turns)
        follow.say = say
        follow.ours = OurRun(follow, runner, plan, record, on_turn, recovering=recovering)
        return follow

    def our_run(self) -> OurRun:
        if self.ours is None:
            raise StateError("this loop is not a run of ours", error_code="internal_error")
        return self.ours

    # -- what callers ask (any thread: put in the inbox, taken in order) -------------------
    def pause(self, actor: str = "owner", timeout: float = 0.0) -> dict[str, Any] | None:
        """The owner's Pause, taken in order: the goal paused, the running turn finishes. A
        loop not ours: its record (waited up to `timeout`), None if the follow ended first."""
        if self.ours is not None:
            # Set before the put: a turn's end codex's reader puts after this, the run takes
            # after the Pause, so the reader's runaway guard must not act on it.
            self.ours.guard_stood_down.set()
        self.inbox.put(PauseAsked(actor))
        self.answered.wait(timeout)
        return self.paused

    def ask_interrupt(self, turn_id: str) -> None:
        """The owner's `chat interrupt` of a turn of this loop, in this process: taken in
        order, then the look acts on it as on another process's marker (a run of ours stops
        now, paused; a loop not ours has only its turn stopped). No file: the follower never
        reads what its own process writes."""
        self.inbox.put(InterruptAsked(turn_id))

    def owner_interrupted(self) -> bool:
        """At a look: whether the owner asked to stop a turn of this loop, here (the inbox's
        `InterruptAsked`, taken once) or from another process (the session's marker)."""
        named, self.interrupt_named = self.interrupt_named, None
        return named in self.loop.ids or self.loop.interrupt_asked()

    def let_go(self, *, hand_over: bool = False) -> None:
        """Stop following a loop not ours: `hand_over` (a Run adopts it) lets the running
        turn end first."""
        self.inbox.put(LetGo(hand_over))

    def stop(self) -> None:
        """This process stops: the goal is paused now and the running turn interrupted."""
        self.stop_requested.set()  # also ends a wait to start codex again
        self.inbox.put(StopAsked())

    def post_gate(self, gate_id: str) -> None:
        """A host gate codex's request became (by the app-server's reader, which never waits
        on the follower): taken after the notifications that came before it."""
        self.inbox.put(GateOpened(gate_id))

    # -- a loop no run of ours runs ----------------------------------------------------------
    def follow(self, watch: GoalLoopWatch, goal: HostGoalState | None = None) -> int:
        """Follow until a rule says stop (`goal`: the host goal as it starts); a turn still
        open is recorded interrupted. Codex died: `app_server_exited`, kept in `error`."""
        self.watch, self.goal, proc = watch, goal, watch.thread.proc
        proc.route(self.inbox.queue)
        try:
            self.why = self.take_inputs().why
            if self.hand_over:
                self.let_turn_end(self.rules.hand_over_sec)  # a Run adopts it
        except LoopxChatError as exc:
            self.error = exc
            raise
        finally:
            proc.route(None)
            self.loop.settle()
            self.state.end_as(self.goal.status if self.goal is not None else None)
            self.done.set()
            self.answered.set()
        return self.loop.recorded

    # -- the one loop ------------------------------------------------------------------------
    def take_inputs(self) -> Stop:
        """Take inputs in order until a rule, a record or the caller says stop; what did."""
        rules = self.rules
        start = self.last = time.monotonic()
        next_look = start if rules.stop_look_sec is not None else math.inf
        while True:
            now = time.monotonic()
            if self.looks.changed() or now >= next_look:  # what another process recorded
                if rules.stop_look_sec is not None:
                    next_look = now + rules.stop_look_sec
                if (stop := self.looks.look()) is not None:
                    return stop
            got, item = self.inbox.take(self._wait(now, start, next_look))
            if got and item is None:
                raise self.watch.ended()
            took = self._take(item)
            if isinstance(took, Stop):
                return took
            if took is not None:
                self.last = time.monotonic()
            if (stop := self._stops(start, took)) is not None:
                return stop

    def _wait(self, now: float, start: float, next_look: float) -> float:
        """How long the next take may wait: a step, or until the nearest rule could stop."""
        rules = self.rules
        if rules.step_sec is not None:
            return rules.step_sec
        times = [next_look] if next_look < math.inf else []
        if rules.most_sec is not None:
            times.append(start + rules.most_sec)
        if rules.quiet_sec is not None:
            times.append(self.last + rules.quiet_sec + 0.01)
        return max(0.0, min(times, default=now + 1.0) - now)

    def _stops(self, start: float, took: LoopEvent | None) -> Stop | None:
        """The rule that says stop after an input (or a quiet step), if any."""
        rules, watch, ours = self.rules, self.watch, self.ours
        now = time.monotonic()
        if rules.most_sec is not None and now - start >= rules.most_sec:
            return Stop("most_sec")
        silent = watch.silent_since
        if self.looks.waits_on_owner():
            self.last = now  # time spent waiting on the owner is not idle
            watch.silent_since = None  # codex asked the owner: it got through
        elif (
            rules.first_output_sec is not None
            and silent is not None
            and now - silent > rules.first_output_sec
        ):
            # Codex cannot reach its model (it retries for ever, saying so only in the
            # notices passed on): stop the turn and pause the goal.
            by = "loopx-chat (Codex produced nothing within the first-output timeout)"
            return Stop("first_output_sec", by, "first_output_timeout", now=True)
        elif rules.idle_sec is not None and self._active() and now - self.last > rules.idle_sec:
            # Codex stopped continuing without saying so (an interrupted loop stays `active`
            # but starts nothing): pause it, so the state says what is true.
            return Stop("idle_sec", "loopx-chat (no turn for the idle timeout)", now=True)
        if ours is not None and ours.limits.waits_for_usage_reset():
            self.last = time.monotonic()
            return None
        if self.loop.open_turns or watch.running_turn_id is not None:
            return None  # a turn codex started is seen before the loop is called over
        if rules.outside_interrupt and (stop := self._interrupted_outside(took)) is not None:
            return stop
        if rules.end_confirmed:
            return self._confirmed_end(took)
        if not self.inbox.queue.empty():
            return None
        if rules.loop_ended and not self._active():
            return Stop("loop_ended")
        if rules.quiet_sec is not None and now - self.last > rules.quiet_sec:
            return Stop("quiet_sec")
        return None

    def _confirmed_end(self, took: LoopEvent | None) -> Stop | None:
        """The goal left `active`, no gate holds it, no turn runs: over after a quiet step and
        codex's word (`_codex_runs_a_turn`), or at once when codex ended it itself."""
        if self.goal is None or self._active() or self.looks.blocked():
            return None
        if took is not None and not self._ended_by_codex():
            return None
        if took is None and self._codex_runs_a_turn():
            return None
        return Stop("loop_ended")

    def _interrupted_outside(self, took: LoopEvent | None) -> Stop | None:
        """The last turn was interrupted outside loopx-chat (another client of codex's
        app-server) and the goal is still `active`: codex starts no further turn after an
        interrupt, so once a quiet step passed, no gate holds the loop, no pause of ours is
        under way and codex says no turn runs (`_codex_runs_a_turn`; one that does is
        followed), the goal is paused now, saying why, rather than after the idle timeout."""
        if self.outside is None or took is not None or not self._active():
            return None
        if self.looks.blocked() or (self.ours is not None and self.ours.ending_by is not None):
            return None
        if self._codex_runs_a_turn():
            return None
        from loopx_chat.goals.words import WORDS  # the words, only when it ends so

        by = f"loopx-chat ({WORDS[TURN_INTERRUPTED_OUTSIDE]})"
        return Stop("outside_interrupt", by, TURN_INTERRUPTED_OUTSIDE, now=True)

    def _interrupted_here(self, turn_id: str) -> bool:
        """Whether this process stopped the turn: asked codex to (`send_interrupt`, the budget
        and its reader-side trip), or is stopping itself."""
        if turn_id in self.interrupted or self.stop_requested.is_set():
            return True
        return self.ours is not None and self.ours.limits.interrupted(turn_id)

    def _active(self) -> bool:
        return self.goal is not None and self.goal.status == "active"

    def _take(self, item: RunInput, *, ending: bool = False) -> LoopEvent | Stop | None:
        """One input, in order: codex's notification seen (its event); another: the records
        looked at, then its caller answered (what stopped, if so); once `ending`, answered."""
        if isinstance(item, Notification):
            event = self.watch.see(item)
            if event is not None:
                self._on(event)
            return event
        stop = None
        if item is not None and not ending:
            if isinstance(item, LetGo):
                self.hand_over = item.hand_over
                return Stop("let_go")
            if isinstance(item, PauseAsked):
                self.pause_asked = item.actor
            elif isinstance(item, InterruptAsked):
                self.interrupt_named = item.turn_id
            stop = self.looks.look()
            if isinstance(item, PauseAsked):
                self.answered.set()
        self.looks.answer(item)
        return stop

    def _on(self, event: LoopEvent) -> None:
        """What the loop did: recorded, and given to the run's budget and guard if ours."""
        ours = self.ours
        if event.kind == "goal_updated":
            self.goal = event.goal
        elif event.kind == "usage":
            if ours is not None:
                ours.limits.check_budget(event)
        elif event.kind == "delta":
            if self.on_delta is not None and event.text is not None:
                self.on_delta(event.text)
        elif event.kind == "notice":
            if event.text is not None:
                self.say(event.text)
        elif event.kind == "turn_started" and event.turn_id:
            self.outside = None  # codex went on after all: followed as any turn
            self.loop.on(event)
            if ours is not None and ours.refuses_turns():
                if ours.limits.interrupted(event.turn_id):
                    # Codex's reader asked already (the guard's trip): asked once more, not
                    # until codex takes it, as the turn may be over by now.
                    self.steered = True
                    self.interrupted.add(event.turn_id)
                    self.watch.stop_turn(event.turn_id)
                else:
                    self.send_interrupt(event.turn_id)
        elif event.kind == "turn_ended" and event.turn_id and event.outcome is not None:
            # Recorded, and codex forgets a request to the owner when its turn ends.
            turn = self.loop.on(event)
            if turn is not None:
                self.finished.append(turn)
                if ours is not None:
                    ours.turn_ended(event, turn)
                interrupted = event.outcome.status == TurnStatus.INTERRUPTED
                if interrupted and not self._interrupted_here(event.turn_id):
                    self.outside = event.turn_id

    def let_turn_end(self, seconds: float) -> None:
        """The running turn gets `seconds` to end on its own record; what else comes meanwhile
        is only answered. Codex gone: the turn is recorded interrupted after."""
        deadline = time.monotonic() + seconds
        while self.loop.open_turns and (left := deadline - time.monotonic()) > 0:
            got, item = self.inbox.take(min(left, 0.1))
            if got and item is None:
                return
            self._take(item, ending=True)

    def _codex_runs_a_turn(self) -> bool:
        """Before a quiet loop ends: whether codex said more, or runs a turn not seen to start
        (one it was starting as the goal's status was set may say so long after, and would run
        unrecorded). What codex said before its answer is in the inbox by then; a running turn
        not seen yet is followed as if its `turn/started` came (the real one is dropped)."""
        try:
            running = self.watch.running_turn()
        except CodexError as exc:
            if exc.error_code in RESPAWN_CODES:
                raise  # codex died: restarted as anywhere else in the loop
            return False  # codex cannot say: the quiet step stands, as it did before
        if not self.inbox.queue.empty():
            return True  # said before its answer: taken next
        if running is None or running in self.loop.open_turns:
            return running is not None
        thread_id = self.watch.thread.thread_id
        self._take(Notification("turn/started", {"threadId": thread_id, "turn": {"id": running}}))
        return True

    def _ended_by_codex(self) -> bool:
        """Codex ended its loop by itself (`CODEX_ENDS`), nothing sent to it since the goal was
        set: no turn follows, so the quiet step (50 ms), which guards a status set here that a
        starting turn may cross, is saved."""
        return not self.steered and self.goal is not None and self.goal.status in CODEX_ENDS

    def set_goal(self, status: str, *, objective: str | None = None) -> HostGoalState | None:
        """Set the host goal's status (None: codex refused)."""
        self.steered = True
        try:
            goal = self.watch.set(status, objective=objective)
        except CodexError:
            return None
        self.goal = goal
        return goal

    def send_interrupt(self, turn_id: str) -> None:
        """Ask codex to stop a turn of the loop (on the follower's thread: the run's gates and
        end call it too), remembered as stopped by this process (`_interrupted_here`)."""
        self.steered = True
        self.interrupted.add(turn_id)
        self.watch.interrupt(turn_id)

    def spent(self, running: int = 0) -> int:
        """The loop's tokens: its finished turns plus the running turn's so far (one figure,
        what codex reports for the goal's turns, for the budget, progress and the ledger)."""
        return sum(t.tokens.total_tokens for t in self.finished) + running

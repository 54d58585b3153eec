"""A goal run of ours, followed: `OurRun`, what a run's `LoopFollower` has and a loop not
ours does not: its runner, plan and authority's record, and its parts `run_limits.RunLimits`
(budget, runaway guard, usage wait), `run_gates.RunGates` (gates, `goal stop`, Pause) and
`run_end.RunEnd` (its end and `RunResult`), imported while codex starts.

Owns the run's life around the follower's one loop: the thread held, the goal set `active`
with a finite `tokenBudget` once (codex starts every continuation turn itself from then on),
or a run whose process died picked up (`recovering`; not one whose record ended while the
thread loaded: the owner's `chat interrupt` of it); its `StopRules`; a dead app-server
started again and the thread resumed (bounded, with backoff; failed with the reason when it
cannot); the goal paused on Ctrl-C; each event recorded and said as `goal follow` prints it.

It never calls `turn/start`, never decides that a run may start, and keeps no text.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from loopx_chat.codex.goal_loop import GoalLoopWatch
from loopx_chat.controller.loop_follower import RESPAWN_CODES, StopRules
from loopx_chat.controller.run_states import AUTHORIZED, RECOVERING, RunState
from loopx_chat.errors import CodexError, LoopxChatError, StateError
from loopx_chat.goals.goal_runs import EXIT_INTERRUPTED, STOP_WORDS, GoalRun, run_line

if TYPE_CHECKING:
    from loopx_chat.codex.goal_loop import HostGoalState, LoopEvent
    from loopx_chat.controller.goal_run import GoalRunner
    from loopx_chat.controller.goal_run_checks import RunPlan
    from loopx_chat.controller.loop_follower import LoopFollower
    from loopx_chat.controller.run_end import RunEnd
    from loopx_chat.controller.run_gates import RunGates
    from loopx_chat.controller.run_limits import RunLimits
    from loopx_chat.controller.warm_threads import Warm
    from loopx_chat.state.session_records import TurnRecord

STEP_SEC = 0.05  # the longest the loop waits on its inbox before it looks at the clock
# Codex's app-server died mid-run: started again and the thread resumed after each of these
# pauses (codex's loop goes on by itself once the thread is loaded); then the run fails.
RESPAWN_BACKOFF_SEC = (0.5, 2.0, 5.0)
# The run's parts, imported while codex starts (`GoalRunner`), not on a run's way to it.
PARTS = tuple(f"loopx_chat.controller.run_{part}" for part in ("limits", "gates", "end"))


class _Respawn(Exception):
    """Codex's app-server died while the run followed it: start it again."""

    def __init__(self, error: CodexError) -> None:
        super().__init__(error.error_code)
        self.error = error


@dataclass(frozen=True)
class RunResult:
    """What a run hands back when it ends (`run_end`), and prints."""

    run: GoalRun
    host: HostGoalState | None
    turns: int
    ledger_tokens: int
    host_tokens: int | None
    facts: dict[str, Any] | None
    differences: tuple[str, ...]
    exit_code: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == 0,
            "run": self.run.to_dict(),
            "host_goal": self.host.to_dict() if self.host else None,
            "turns": self.turns,
            "ledger_tokens": self.ledger_tokens,
            "host_tokens_used": self.host_tokens,
            "codex_facts": self.facts,
            "differences": list(self.differences),
            "exit_code": self.exit_code,
        }

    def summary(self) -> dict[str, Any]:
        """What rides on the run's `ended` record (numbers and our own words only), so
        `goal follow` in any shell ends with the document the run's own terminal printed."""
        return {k: v for k, v in self.to_dict().items() if k not in ("ok", "run")}


@dataclass(frozen=True)
class TurnProgress:
    """One finished continuation turn, as the progress line shows it."""

    n: int
    turn_id: str
    status: str
    tokens: int
    tokens_used: int | None
    token_budget: int
    elapsed_sec: float


class OurRun:
    """One authorized goal run of ours, followed by `follower` (`run()` until it ends)."""

    def __init__(
        self,
        follower: LoopFollower,
        runner: GoalRunner,
        plan: RunPlan,
        record: GoalRun,
        on_turn: Callable[[TurnProgress], None] | None,
        *,
        recovering: bool = False,
    ) -> None:
        self.follower = follower
        self.runner = runner
        self.plan = plan
        self.record = record
        self.on_turn = on_turn
        self.recovering = recovering  # the run's process died with the goal active
        follower.state = RunState(RECOVERING if recovering else AUTHORIZED)
        self.warm: Warm | None = None
        self.began: GoalRun | None = None  # its record as it last started (codex's count then)
        self.ending_by: str | None = None  # who paused it, while the last turn finishes
        self.ending_reason: str | None = None
        # Set as the owner's Pause is asked (before it is put in the inbox) and as the run
        # winds down for anyone but the runaway guard: codex's reader then stops no more
        # turns on the guard's account (`RunawayTrip`).
        self.guard_stood_down = threading.Event()
        self.loop_started = False  # the goal was set active (or found so) by this run
        self.started = 0.0

    @property
    def goal_id(self) -> str:
        return self.plan.goal_id

    # The parts, made on first use (the limits and gates as the thread loads, the end at it).
    @cached_property
    def limits(self) -> RunLimits:
        from loopx_chat.controller.run_limits import RunLimits

        return RunLimits(self)

    @cached_property
    def gates(self) -> RunGates:
        from loopx_chat.controller.run_gates import RunGates

        return RunGates(self)

    @cached_property
    def end(self) -> RunEnd:
        from loopx_chat.controller.run_end import RunEnd

        return RunEnd(self)

    # -- what the follower asks of its run ---------------------------------------------------
    def refuses_turns(self) -> bool:
        """A turn codex starts now is stopped: the goal is blocked for a gate, the budget is
        spent, or the runaway guard paused it at the end of the turn before."""
        return self.gates.goal_blocked or self.limits.refuses_turns()

    def turn_ended(self, event: LoopEvent, turn: TurnRecord) -> None:
        """A turn the follower recorded ended: the limits look at it, the progress is said."""
        f = self.follower
        self.limits.turn_ended(event)
        if self.on_turn is not None:
            self.on_turn(
                TurnProgress(
                    n=len(f.finished),
                    turn_id=turn.turn_id,
                    status=turn.status,
                    tokens=turn.tokens.total_tokens,
                    tokens_used=f.spent(),
                    token_budget=self.plan.token_budget,
                    elapsed_sec=time.monotonic() - self.started,
                )
            )

    def host_run_tokens(self) -> int | None:
        """What the host goal counted since this run set it active."""
        goal = self.follower.goal
        if goal is None or self.began is None:
            return None
        return self.began.host_run_tokens(goal.tokens_used)

    def note(self, event: str, **fields: Any) -> GoalRun:
        """Record one event of the run, and say what it says (`run_line`: the same words
        `goal follow` prints from the record in any other shell)."""
        run = self.runner.runs.note(self.goal_id, self.record.run_id, event, **fields)
        line = run_line(run, run.history[-1])
        if line is not None:
            self.follower.say(line)
        return run

    def wind_down(self, by: str, reason: str | None = None) -> None:
        """Pause the goal; the turn that runs finishes and is recorded, and no new one starts
        (codex's own rule for a client's pause), then the run ends."""
        f = self.follower
        if not self.limits.guard_tripped:
            self.guard_stood_down.set()  # before the goal is set: codex may start a turn meanwhile
        self.ending_by, self.ending_reason = by, reason
        f.state.move("paused")
        self.gates.clear()
        f.set_goal("paused")

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        f = self.follower
        controller = self.runner.controller
        timeouts = controller.config.timeouts
        f.rules = StopRules(
            end_confirmed=True,
            idle_sec=timeouts.idle,
            first_output_sec=timeouts.first_output,
            stop_look_sec=self.runner.poll_sec,
            step_sec=STEP_SEC,
            outside_interrupt=True,
        )
        self.started = time.monotonic()
        f.follower_thread = threading.current_thread()
        try:
            with controller.running_goals.following(self.goal_id, f):
                return self._run_held()
        finally:
            for item in f.inbox.owner_inputs():  # calls still waiting: the run is over
                self.gates.answer(item)

    def _run_held(self) -> RunResult:
        """Follow the run; when codex's app-server dies, start it again and resume the
        thread (bounded, with backoff), the same run with its budget and id; one turn is
        recorded interrupted. When it cannot, the run ends failed with the reason."""
        f = self.follower
        for attempt, backoff in enumerate((*RESPAWN_BACKOFF_SEC, None), start=1):
            try:
                return self._held_once()
            except _Respawn as died:
                code = died.error.error_code
                if self.ending_by is not None or f.stop_requested.is_set():
                    self.end.end(None, by="host", reason=code)  # it was ending anyway
                    raise died.error from None
                f.state.move("codex_died")
                if backoff is None:
                    why = f"{STOP_WORDS[code]} and could not be started again"
                    self.end.end(None, by="host", reason=why, failed=True)
                    raise died.error from None
                self.note(
                    "recovering", attempt=attempt, tries=len(RESPAWN_BACKOFF_SEC), reason=code
                )
                f.stop_requested.wait(backoff)
                self.recovering = self.recovering or self.loop_started
        raise AssertionError("unreachable")

    def _held_once(self) -> RunResult:
        f, controller = self.follower, self.runner.controller
        try:
            with controller.held_thread(f.loop.session_id, self.plan.approval_policy) as warm:
                self.warm = warm
                if self.recovering and not self._still_live():
                    raise StateError(
                        f"run {self.record.run_id} ended while this process took it up",
                        error_code="run_not_found",
                    )
                f.watch = GoalLoopWatch(warm.thread)
                f.loop.warm, f.loop.desk = warm, controller.host_requests
                # From here codex's notifications come in the run's inbox, in order with
                # everything else it is given; the reader only puts them there.
                proc = warm.thread.proc
                f.looks = self.gates
                self.limits.arm(warm)
                proc.route(f.inbox.queue)
                try:
                    return self._follow()
                except KeyboardInterrupt:
                    return self.end.stop_now("owner (Ctrl-C)", EXIT_INTERRUPTED)
                except SystemExit:
                    self.end.stop_now("owner (SIGTERM)", None)  # the goal must not run alone
                    raise
                except CodexError as exc:
                    self.end.settle_open(exc.error_code)
                    if exc.error_code in RESPAWN_CODES:
                        controller.drop_thread(f.loop.session_id)
                        raise _Respawn(exc) from exc
                    self.end.end(None, by="host", reason=exc.error_code)
                    raise
                finally:
                    proc.tap(None)
                    proc.route(None)
                    warm.running_turn_id = None
        except LoopxChatError as exc:
            if self.recovering and exc.error_code == "thread_busy":
                raise  # another process took it up first: the run is theirs to follow
            if isinstance(exc, CodexError) and exc.error_code in RESPAWN_CODES:
                controller.drop_thread(f.loop.session_id)  # it died while the thread loaded
                raise _Respawn(exc) from exc
            if self.runner.runs.run(self.goal_id, self.record.run_id).state != "ended":
                self.end.end(None, by="host", reason=exc.error_code)
            raise
        except KeyboardInterrupt:
            # Before the goal was set (the thread was loading): nothing runs; say so.
            if self.runner.runs.run(self.goal_id, self.record.run_id).state != "ended":
                if not f.state.terminal:
                    f.state.move("paused")
                self.end.end(None, by="owner (Ctrl-C)", reason="stopped before the loop started")
            raise

    def _still_live(self) -> bool:
        """Read again once the thread is held: a dead run's record may have ended since it
        was found (the owner's `chat interrupt` ends it under the same writer lock)."""
        return self.runner.runs.run(self.goal_id, self.record.run_id).live

    def _follow(self) -> RunResult:
        if self.recovering:
            self._recover()
        else:
            self._start()
        stop = self.follower.take_inputs()
        if stop.now:
            return self.end.stop_now(stop.by or stop.why, None, reason=stop.reason)
        return self.end.finish(by=self.ending_by, reason=self.ending_reason)

    def _recover(self) -> None:
        """Pick up a run whose process died: its unfinished turn is recorded interrupted
        (once: the session says which turn was running), and codex's loop, which the resume
        restarted, is followed from here."""
        f, controller = self.follower, self.runner.controller
        controller.turns.settle_orphan(f.loop.session_id)
        before = f.spent()
        # The run's turns so far count toward its budget, whichever process recorded them.
        open_ids = {t.turn_id for t in f.loop.open_turns.values()}
        f.finished = sorted(
            (t for t in controller.store.list_turns(f.loop.session_id)
             if t.run_id == self.record.run_id and t.turn_id not in open_ids),
            key=lambda t: t.created_at,
        )  # fmt: skip
        # The owner's `chat interrupt` of the turn its process died in, asked while this
        # process took the run up (or another's marker naming it), is one of this loop's.
        f.loop.ids.update(t.turn_id for t in f.finished)
        self.began = self.runner.runs.run(self.goal_id, self.record.run_id)
        if self.limits.trip is not None:  # it counted from before the ledger was read
            self.limits.trip.count_more(f.spent() - before)
        f.goal = f.watch.get()
        self.loop_started = True
        f.state.move("recovered")
        self.note("recovered", pid=os.getpid(), host_status=f.goal.status if f.goal else None)

    def _start(self) -> None:
        f, plan = self.follower, self.plan
        # codex counts a goal's tokens for its whole life (a new objective does not reset
        # them), so the run's budget is what it may spend from here on. A thread this run
        # resumed was asked for its goal then (`resumed_goal`): not asked again.
        warm = self.warm
        resumed = warm.resumed_goal if warm is not None else None
        if warm is not None:
            warm.resumed_goal = None  # taken once
        prior = f.watch.get() if resumed is None else resumed.goal
        base = prior.tokens_used if prior is not None else 0
        goal = f.watch.set(
            "active", objective=plan.objective.text, token_budget=base + plan.token_budget
        )
        f.goal = goal
        self.loop_started = True
        f.state.move("loop_started")
        self.began = self.note(
            "started",
            host_status=goal.status,
            tokens_used=goal.tokens_used,
            host_tokens_before=base,
            prior_host_status=prior.status if prior is not None else None,
        )

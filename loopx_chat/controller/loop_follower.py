"""Codex's goal loop on a loaded thread, followed once, by one class: `LoopFollower`.

Owns `LoopTurns`, the one bookkeeping of a loop's turns in the ledger (`origin: goal_loop`,
a run's id or none): a draft when codex starts a continuation turn, its outcome when it
ends, `interrupted` for one open when the thread is let go. And `LoopFollower`, one per
followed loop, in one of two modes. Its inputs are always one ordered queue (`run_inbox`):
codex's notifications, routed there while it follows (the app-server's reader only puts,
so the follower may always wait on codex), and what this process asks, taken one at a time
on the follower's own thread. Its state moves only as the table `run_states.MOVES` allows.

- A loop no run of ours runs (`follow`: the service's `HostLoops`; a CLI command before it
  lets a loaded thread go): no budget, gate or run record of ours. It records the turns,
  takes the owner's Pause and `LetGo`, and stops when a `StopRules` rule says so (data).
  The one file it looks at is the goal's `goal stop` record (`stop_look_sec`): the CLI
  writes it, never through the service, so it is always another process's write. It never
  sets the host goal but to `paused` (the owner's Pause, a `goal stop` in force).
- A goal run of ours (`for_run`, then `run`: `goal_run.GoalRunner`, the service's
  `RunPool`), once its authority is on record: the goal is set `active` with a finite
  `tokenBudget` once, and from then on codex starts every continuation turn itself. It
  watches the goal's own records between notifications (a blocking gate opened anywhere
  sets the host goal `blocked` and interrupts a turn started after it; approving the last
  one sets it `active` again; `goal stop` pauses it; what codex asks on a continuation turn
  is such a gate, a host gate, while its turn stays open: the run is blocked on it but the
  host goal is left `active`, since codex's own wait holds its loop, and a decision
  recorded anywhere is delivered to codex as its answer, never carried; time spent waiting
  on the owner is never idle). It keeps the budget hard (the turn whose reported tokens
  reach it is interrupted), pauses a loop that repeats itself or passes `--max-turns` with
  an owner gate, starts a dead app-server again and resumes the thread (bounded, with
  backoff; failed with the reason when it cannot), waits out a usage limit when the owner
  asked, and says each event it records in the words `goal follow` prints. Its inputs
  besides codex's: a gate recorded or decided in this process, a host gate codex's request
  became, the owner's Pause and the service stopping (a caller that wants the gate's effect
  waits on its record's answer). It pauses the goal on Ctrl-C, and at the end compares the
  ledger's tokens with the host goal's and with the host's rollouts (`codex facts`),
  reporting any difference.

It never writes a loop of its own: it never calls `turn/start`. Only `thread/goal/set`,
`turn/interrupt` and reading notifications. It never decides that a loop may run, and
keeps no text.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loopx_chat.codex.goal_loop import GoalLoopWatch, HostGoalState, LoopEvent
from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.controller.goal_run_checks import person_gates
from loopx_chat.controller.run_inbox import (
    Answer,
    GateDecided,
    GateOpened,
    LetGo,
    PauseAsked,
    RunInbox,
    RunInput,
    StopAsked,
)
from loopx_chat.controller.run_states import AUTHORIZED, RECOVERING, RUNNING, RunState
from loopx_chat.controller.run_states import BLOCKED as BLOCKED_STATE
from loopx_chat.controller.turn_ledger import TurnLedger
from loopx_chat.errors import CodexError, LoopxChatError, StateError
from loopx_chat.goals.gate_store import Gate as OwnerGate
from loopx_chat.goals.goal_runs import (
    EXIT_INTERRUPTED,
    STOP_WORDS,
    GoalRun,
    exit_code_for,
    run_line,
)
from loopx_chat.goals.run_block import BLOCKED, NOT_ACKNOWLEDGED, RUN_ENDING, RunBlock
from loopx_chat.state.file_change import FileChange
from loopx_chat.state.session_records import TokenCounts, TurnRecord

if TYPE_CHECKING:
    from loopx_chat.codex.budget_trip import BudgetTrip
    from loopx_chat.controller.goal_run import GoalRunner
    from loopx_chat.controller.goal_run_checks import RunPlan

STEP_SEC = 0.05  # the longest the loop waits on its inbox before it looks at the clock
GATE_DECIDED = "gate already decided"
# Codex's app-server died mid-run: it is started again and the thread resumed after each of
# these pauses in turn (codex's loop goes on by itself once the thread is loaded); then the
# run is failed, with the reason.
RESPAWN_BACKOFF_SEC = (0.5, 2.0, 5.0)
RESPAWN_CODES = ("app_server_exited", "app_server_protocol")
# Continuation turns in a row with no tool call and the same final answer before the run is
# paused with an owner gate: a loop that repeats itself spends the budget for nothing.
NO_PROGRESS_TURNS = 3
# How long a run that resumes after the usage limit waits when codex reported no reset time.
USAGE_WAIT_SEC = 300.0
# The goal statuses codex sets itself when its loop ends (its budget spent, the model's
# `update_goal` complete), after which it starts no continuation turn.
CODEX_ENDS = ("budgetLimited", "complete")


class _Respawn(Exception):
    """Codex's app-server died while the run followed it: start it again."""

    def __init__(self, error: CodexError) -> None:
        super().__init__(error.error_code)
        self.error = error


def _codex_waits(gate: OwnerGate) -> bool:
    """A host gate whose request codex is still waiting on (its turn held open)."""
    return gate.host is not None and gate.host.get("state") == "live"


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


@dataclass(frozen=True)
class RunResult:
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
    """When following a loop no run of ours runs ends (besides `LetGo`), as data. None: the
    rule is off."""

    quiet_sec: float | None = None  # codex said nothing of the loop for this long, no turn open
    most_sec: float | None = None  # this long in all (a turn still open is recorded interrupted)
    loop_ended: bool = False  # the host goal left `active` and no turn is open
    hand_over_sec: float = 0.0  # let go for a Run: how long the running turn may take to end
    stop_look_sec: float | None = None  # how often the `goal stop` record is looked at


class LoopFollower:
    """One goal loop followed on the thread its watch holds: a run of ours (`for_run`, then
    `run`), or a loop no run of ours runs (`follow`, by `rules`)."""

    # A run of ours only (`for_run`): who runs it, its plan and its authority's record.
    runner: GoalRunner
    plan: RunPlan
    record: GoalRun

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
        self.record_pause = record_pause  # (actor, host status) -> the Pause's record
        self.stopped_by = stopped_by  # the actor of a `goal stop` in force, or None
        self.foreign = True  # no budget, gate or run record of ours: `for_run` says otherwise
        # The one ordered input queue: codex's notifications (routed here while the thread is
        # followed) and what the owner and this process did (`run_inbox`).
        self.inbox = RunInbox()
        self.state = RunState(RUNNING)  # moves checked by `run_states.MOVES`
        self.goal: HostGoalState | None = None
        self.warm: Any = None
        self.watch: Any = None  # the `GoalLoopWatch` of the followed thread
        self.finished: list[TurnRecord] = []
        self.paused: dict[str, Any] | None = None  # the owner's Pause of a loop not ours
        self.error: LoopxChatError | None = None
        self.done = threading.Event()  # a loop not ours: the follow is over
        self.answered = threading.Event()  # a Pause was handled (or the follow is over)
        self.why: str | None = None  # which rule ended it: a `StopRules` field, or `let_go`
        self.hand_over = False
        # A run of ours: what it says, and where it stands.
        self.on_turn: Callable[[TurnProgress], None] | None = None
        self.say: Callable[[str], None] = lambda _: None
        self.on_delta: Callable[[str], None] | None = None  # the agent's reply, never stored
        self.blocked_on: list[str] = []  # gates we set `blocked` for
        self.blocked_at: str | None = None
        self.goal_blocked = False  # whether this run set the host goal `blocked` for them
        self.base = 0  # the host goal's tokensUsed when this run set it active
        self.ending_by: str | None = None  # who paused it, while the last turn finishes
        self.ending_reason: str | None = None
        self.pause_requested = False  # the owner's Pause, taken from the inbox
        self.stop_requested = threading.Event()  # shutdown
        self.recovering = False
        self.started = 0.0
        self.trip: BudgetTrip | None = None  # the budget, acted on by codex's reader
        self.follower_thread: threading.Thread | None = None
        self.gates_log: FileChange | None = None  # the gate log's stat at the last look
        self.loop_started = False  # the goal was set active (or found so) by this run
        self.budget_spent_in: str | None = None  # the turn interrupted as it reached the budget
        self.usage_wait_until: float | None = None  # epoch seconds: the usage limit's reset
        self.guard_tripped = False  # the runaway guard paused the run at a turn's end
        self.repeats = 0  # turns in a row with no tool call and the same answer
        self.steered = False  # the run set the goal or interrupted a turn after its start
        self.last_answer: str | None = None

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
        """What follows one authorized run of ours (`run()` blocks until it ends); its turns
        carry the run's id. `recovering`: the run's process died with the goal active."""
        turns = LoopTurns(runner.controller.turns, plan.session.session_id, run_id=record.run_id)
        follow = cls(turns)
        follow.foreign, follow.runner, follow.plan, follow.record = False, runner, plan, record
        follow.on_turn, follow.say, follow.recovering = on_turn, say, recovering
        follow.state = RunState(RECOVERING if recovering else AUTHORIZED)
        return follow

    @property
    def goal_id(self) -> str:
        return self.plan.goal_id

    @property
    def session_id(self) -> str:
        return self.loop.session_id

    @property
    def open_turns(self) -> dict[str, TurnRecord]:
        return self.loop.open_turns

    def pause(self, actor: str = "owner", timeout: float = 0.0) -> dict[str, Any] | None:
        """The owner's Pause, taken in order: the goal is paused, the running turn finishes.
        Of a loop not ours, by `actor`: its record once done (waited up to `timeout`), None
        when the follow ended first (`error` says why, if it failed)."""
        self.inbox.put(PauseAsked(actor))
        self.answered.wait(timeout)
        return self.paused

    def let_go(self, *, hand_over: bool = False) -> None:
        """Stop following a loop not ours: `hand_over` (a Run adopts it) lets the running
        turn end first."""
        self.inbox.put(LetGo(hand_over))

    # -- a loop no run of ours runs ----------------------------------------------------------
    def follow(self, watch: GoalLoopWatch, goal: HostGoalState | None = None) -> int:
        """Follow until a rule says stop (`goal`: the host goal as it starts); the turns
        recorded, one still open recorded interrupted (letting the thread go ends it).
        Raises (and keeps in `error`) `app_server_exited` when codex died."""
        self.watch, self.goal, proc = watch, goal, watch.thread.proc
        proc.route(self.inbox.queue)
        try:
            self.why = self._follow_rules()
            if self.hand_over:
                self._turn_ends(self.rules.hand_over_sec)  # a Run adopts it
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

    def _follow_rules(self) -> str:
        """Take inputs until a rule says stop; which one."""
        rules = self.rules
        start = last = next_look = time.monotonic()
        while True:
            now = time.monotonic()
            if rules.stop_look_sec is not None and now >= next_look:
                next_look = now + rules.stop_look_sec
                self._look_for_stop()
            got, item = self.inbox.take(self._wait(now, start, last, next_look))
            if got and item is None:
                raise self.watch.ended()
            if isinstance(item, LetGo):
                self.hand_over = item.hand_over
                return "let_go"
            if isinstance(item, PauseAsked):
                self._pause_loop(item.actor)
            elif isinstance(item, Notification) and self._take(item) is not None:
                last = time.monotonic()
            if (why := self._stops(start, last)) is not None:
                return why

    def _stops(self, start: float, last: float) -> str | None:
        """The rule that says stop now, if any."""
        rules, now = self.rules, time.monotonic()
        if rules.most_sec is not None and now - start >= rules.most_sec:
            return "most_sec"
        if self.open_turns or self.watch.running_turn_id is not None:
            return None  # a turn codex started is seen before the loop is called over
        if not self.inbox.queue.empty():
            return None
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

    def _look_for_stop(self) -> None:
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
            self._pause_loop(f"{actor} (goal stop)")

    def _pause_loop(self, actor: str) -> None:
        if self.paused is None and self.record_pause is not None:
            self.state.move("paused")
            self.goal = self.watch.set("paused")
            self.paused = self.record_pause(actor, self.goal.status)
        self.answered.set()

    # -- a run of ours ---------------------------------------------------------------------
    def run(self) -> RunResult:
        controller = self.runner.controller
        self.started = time.monotonic()
        self.follower_thread = threading.current_thread()
        try:
            with controller.running_goals.following(self.goal_id, self):
                return self._run_held()
        finally:
            for item in self.inbox.owner_inputs():  # calls still waiting: the run is over
                self._answer(item)

    def _run_held(self) -> RunResult:
        """Follow the run; when codex's app-server dies, start it again and resume the
        thread (bounded, with backoff), the same run with its budget and id; one turn is
        recorded interrupted. When it cannot, the run ends failed with the reason."""
        for attempt, backoff in enumerate((*RESPAWN_BACKOFF_SEC, None), start=1):
            try:
                return self._held_once()
            except _Respawn as died:
                code = died.error.error_code
                if self.ending_by is not None or self.stop_requested.is_set():
                    self._end(None, by="host", reason=code)  # it was ending anyway
                    raise died.error from None
                self.state.move("codex_died")
                if backoff is None:
                    why = f"{STOP_WORDS[code]} and could not be started again"
                    self._end(None, by="host", reason=why, failed=True)
                    raise died.error from None
                self._note(
                    "recovering", attempt=attempt, tries=len(RESPAWN_BACKOFF_SEC), reason=code
                )
                self.stop_requested.wait(backoff)
                self.recovering = self.recovering or self.loop_started
        raise AssertionError("unreachable")

    def _held_once(self) -> RunResult:
        controller = self.runner.controller
        try:
            with controller.held_thread(self.session_id, self.plan.approval_policy) as warm:
                self.warm = warm
                self.watch = GoalLoopWatch(warm.thread)
                self.loop.warm, self.loop.desk = warm, controller.host_requests
                # From here codex's notifications come in the run's inbox, in order with
                # everything else it is given; the reader only puts them there.
                from loopx_chat.codex.budget_trip import BudgetTrip  # loaded as codex starts

                proc = warm.thread.proc
                # The budget is acted on where codex's tokens are read first: the reader
                # interrupts the turn that reaches it without waiting for this thread.
                self.trip = BudgetTrip(
                    warm.thread.thread_id,
                    warm.thread.usage_total,
                    budget=self.plan.token_budget,
                    spent=self.spent(),
                    send=proc.fire,
                )
                proc.tap(self.trip.see)
                proc.route(self.inbox.queue)
                try:
                    return self._follow()
                except KeyboardInterrupt:
                    return self._stop_now("owner (Ctrl-C)", EXIT_INTERRUPTED)
                except SystemExit:
                    self._stop_now("owner (SIGTERM)", None)  # the goal must not run on alone
                    raise
                except CodexError as exc:
                    self._settle_open(exc.error_code)
                    if exc.error_code in RESPAWN_CODES:
                        controller.drop_thread(self.session_id)
                        raise _Respawn(exc) from exc
                    self._end(None, by="host", reason=exc.error_code)
                    raise
                finally:
                    proc.tap(None)
                    proc.route(None)
                    warm.running_turn_id = None
        except LoopxChatError as exc:
            if self.recovering and exc.error_code == "thread_busy":
                raise  # another process took it up first: the run is theirs to follow
            if isinstance(exc, CodexError) and exc.error_code in RESPAWN_CODES:
                controller.drop_thread(self.session_id)  # it died while the thread loaded
                raise _Respawn(exc) from exc
            if self.runner.runs.run(self.goal_id, self.record.run_id).state != "ended":
                self._end(None, by="host", reason=exc.error_code)
            raise
        except KeyboardInterrupt:
            # Before the goal was set (the thread was loading): nothing runs; say so.
            if self.runner.runs.run(self.goal_id, self.record.run_id).state != "ended":
                if not self.state.terminal:
                    self.state.move("paused")
                self._end(None, by="owner (Ctrl-C)", reason="stopped before the loop started")
            raise

    def _note(self, event: str, **fields: Any) -> GoalRun:
        """Record one event of the run, and say what it says (`run_line`: the same words
        `goal follow` prints from the record in any other shell)."""
        run = self.runner.runs.note(self.goal_id, self.record.run_id, event, **fields)
        line = run_line(run, run.history[-1])
        if line is not None:
            self.say(line)
        return run

    # -- inputs of this process (a gate recorded here, Pause, stop) -----------------------
    def look_now(self, gate_id: str | None) -> RunBlock:
        """Called by a thread that just recorded (`gate_id`) or decided (None) a gate of this
        goal: the run takes it from its inbox in order, looks at the gates on its own thread,
        and this returns what became of the gate (bounded). Never from codex's reader: that
        only puts (`post_gate`)."""
        if threading.current_thread() is self.follower_thread:
            return self._answer_for(gate_id)  # recorded by the run itself: it looks next
        answer = Answer()
        self.inbox.put(GateDecided(answer) if gate_id is None else GateOpened(gate_id, answer))
        timeouts = self.runner.controller.config.timeouts
        block = answer.wait(timeouts.request + timeouts.interrupt_settle)
        return block if block is not None else RunBlock(False, NOT_ACKNOWLEDGED, self.record.run_id)

    def post_gate(self, gate_id: str) -> None:
        """A host gate codex's request became (on the app-server's reader): put in the inbox
        after the notifications that came before it; never waits on the run."""
        self.inbox.put(GateOpened(gate_id))

    def stop(self) -> None:
        """This process stops: the goal is paused now and the running turn interrupted."""
        self.stop_requested.set()  # also ends a wait to start codex again
        self.inbox.put(StopAsked())

    def _take(self, item: RunInput, *, ending: bool = False) -> LoopEvent | RunResult | None:
        """One input, in order: codex's notification seen (its loop event, handled); the
        owner's or this process's: the goal's records looked at now, then a caller that
        waits answered (what ended the run, if that did); once `ending`, only answered."""
        if isinstance(item, Notification):
            event = self.watch.see(item)
            if event is not None:
                self._on(event)
            return event
        if isinstance(item, PauseAsked) and not ending:
            self.pause_requested = True
        ended = None if ending or item is None else self._look_at_records()
        self._answer(item)  # None (nothing came): nothing to answer
        return ended

    def _answer(self, item: RunInput) -> None:
        if isinstance(item, (GateOpened, GateDecided)) and item.answer is not None:
            item.answer.give(self._answer_for(getattr(item, "gate_id", None)))

    def _answer_for(self, gate_id: str | None) -> RunBlock:
        run_id = self.record.run_id
        if gate_id is not None and gate_id in self.blocked_on:
            return RunBlock(True, BLOCKED, run_id)
        if self.ending_by is not None or self.goal is None or self.goal.status != "active":
            return RunBlock(False, RUN_ENDING, run_id)
        return RunBlock(False, GATE_DECIDED, run_id)

    def _gates_changed(self) -> bool:
        """Whether the goal's gate log changed since the last look (a stat, every step: a
        gate another process recorded is acknowledged within a step, not a poll)."""
        if self.gates_log is None:
            self.gates_log = FileChange(self.runner.goals.goal_dir(self.goal_id) / "gates.jsonl")
        return self.gates_log.moved()

    def _follow(self) -> RunResult:
        if self.recovering:
            self._recover()
        else:
            self._start()
        return self._loop()

    def _recover(self) -> None:
        """Pick up a run whose process died: its unfinished turn is recorded interrupted
        (once: the session says which turn was running), and codex's loop, which the resume
        restarted, is followed from here."""
        controller = self.runner.controller
        controller.turns.settle_orphan(self.session_id)
        before = self.spent()
        # The run's turns so far count toward its budget, whichever process recorded them.
        self.finished = sorted(
            (t for t in controller.store.list_turns(self.session_id)
             if t.run_id == self.record.run_id and t.turn_id not in self._open_ids()),
            key=lambda t: t.created_at,
        )  # fmt: skip
        history = self.runner.runs.run(self.goal_id, self.record.run_id).history
        started = [e for e in history if e.get("event") == "started"]
        self.base = int(started[-1].get("host_tokens_before") or 0) if started else 0
        if self.trip is not None:  # it counted from before the ledger was read
            self.trip.count_more(self.spent() - before)
        self.goal = self.watch.get()
        self.loop_started = True
        self.state.move("recovered")
        self._note(
            "recovered", pid=os.getpid(), host_status=self.goal.status if self.goal else None
        )

    def _open_ids(self) -> set[str]:
        return {t.turn_id for t in self.open_turns.values()}

    def _start(self) -> None:
        plan = self.plan
        # codex counts a goal's tokens for its whole life (a new objective does not reset
        # them), so the run's budget is what it may spend from here on.
        prior = self.watch.get()
        self.base = prior.tokens_used if prior is not None else 0
        goal = self.watch.set(
            "active", objective=plan.objective.text, token_budget=self.base + plan.token_budget
        )
        self.goal = goal
        self.loop_started = True
        self.state.move("loop_started")
        self._note(
            "started",
            host_status=goal.status,
            tokens_used=goal.tokens_used,
            host_tokens_before=self.base,
            prior_host_status=prior.status if prior is not None else None,
        )

    def _loop(self) -> RunResult:
        idle = self.runner.controller.config.timeouts.idle
        first_output = self.runner.controller.config.timeouts.first_output
        next_poll = 0.0
        last_event = time.monotonic()
        while True:
            now = time.monotonic()
            if self._gates_changed() or now >= next_poll:  # what another process recorded
                next_poll = now + self.runner.poll_sec
                ended = self._look_at_records()
                if ended is not None:
                    return ended
            got, item = self.inbox.take(STEP_SEC)
            if got and item is None:
                raise self.watch.ended()
            event = self._take(item)
            if isinstance(event, RunResult):
                return event
            if event is not None:
                last_event = time.monotonic()
            if self._waits_on_owner():
                last_event = time.monotonic()  # time spent waiting on the owner is not idle
                if self.watch.silent_since is not None:
                    self.watch.silent_since = None  # codex asked the owner: it got through
            elif (
                self.watch.silent_since is not None
                and time.monotonic() - self.watch.silent_since > first_output
            ):
                # Codex cannot reach its model (it retries for ever, saying so only in the
                # notices passed on above): stop the turn and pause the goal.
                return self._stop_now(
                    "loopx-chat (Codex produced nothing within the first-output timeout)",
                    None,
                    reason="first_output_timeout",
                )
            elif (
                self.goal is not None
                and self.goal.status == "active"
                and time.monotonic() - last_event > idle
            ):
                # Codex stopped continuing without saying so (an interrupted loop stays
                # `active` but starts nothing): pause it, so the state says what is true.
                return self._stop_now("loopx-chat (no turn for the idle timeout)", None)
            if self._waits_for_usage_reset():
                last_event = time.monotonic()
            elif self._done() and (event is None or self._ended_by_codex()):
                # Quiet, and codex says no turn of its runs (a turn it started is seen
                # first), unless codex ended the loop itself: then it starts no turn, and the
                # run ends without waiting a step.
                if event is None and self._codex_runs_a_turn():
                    continue
                return self._finish(by=self.ending_by, reason=self.ending_reason)

    def _waits_for_usage_reset(self) -> bool:
        """With `--resume-after-usage-limit`: the usage limit stopped codex's loop; wait for
        the reset time codex reported (USAGE_WAIT_SEC when it said none), then set the goal
        active again, recorded both times."""
        goal = self.goal
        if (
            not self.plan.resume_after_usage_limit
            or self.ending_by is not None
            or goal is None
            or goal.status != "usageLimited"
            or self.open_turns
        ):
            return False
        now = time.time()
        if self.usage_wait_until is None:
            self.state.move("usage_limited")
            resets = self.watch.usage_resets_at
            self.usage_wait_until = float(resets) if resets is not None else now + USAGE_WAIT_SEC
            self._note("usage_wait", usage_resets_at=int(self.usage_wait_until))
        if now < self.usage_wait_until:
            return True
        self.usage_wait_until = None
        if self._set("active") is None:
            return False  # codex refused: the run ends at the limit, as without the flag
        self.state.move("usage_resumed")
        self._note("usage_resumed", host_status="active")
        return True

    def _waits_on_owner(self) -> bool:
        """A gate blocks the goal, or codex holds a turn open on a request to the owner."""
        if self.blocked_on:
            return True
        desk = self.runner.controller.host_requests
        thread_id = self.warm.thread.thread_id if self.warm is not None else None
        return any(live.thread_id == thread_id for live in desk.live_gates())

    def _done(self) -> bool:
        return (
            self.goal is not None
            and self.goal.status != "active"
            and not self.blocked_on
            and self.watch.running_turn_id is None
            and not self.open_turns
        )

    def _codex_runs_a_turn(self) -> bool:
        """Before a quiet run ends: whether codex has said more, or runs a turn the run has not
        seen start. A turn codex was starting as the run set the goal's status may say so
        after the quiet step (on a loaded machine, long after): it would run unrecorded. Codex
        is asked which turn runs; what it said before answering is in the inbox by then (one
        ordered stream), and a running turn not seen yet is followed from here as if its
        `turn/started` came (that one, when it comes, is a repeat the decoder drops)."""
        try:
            running = self.watch.running_turn()
        except CodexError as exc:
            if exc.error_code in RESPAWN_CODES:
                raise  # codex died: restarted as anywhere else in the loop
            return False  # codex cannot say: the quiet step stands, as it did before
        if not self.inbox.queue.empty():
            return True  # said before its answer: taken next
        if running is None or running in self.open_turns:
            return running is not None
        thread_id = self.warm.thread.thread_id
        self._take(Notification("turn/started", {"threadId": thread_id, "turn": {"id": running}}))
        return True

    def _ended_by_codex(self) -> bool:
        """Codex ended its loop by itself (`CODEX_ENDS`) and this run sent it nothing since the
        goal was set. The quiet step before the end guards a status this run set (paused,
        blocked, budget-limited by the ledger's count), which a turn codex was starting may
        cross; a status codex set after the turn that spent or completed the goal is not
        followed by another turn. Ending at once saves that step (50 ms) at every run's end."""
        return not self.steered and self.goal is not None and self.goal.status in CODEX_ENDS

    def _interrupt(self, turn_id: str) -> None:
        self.steered = True
        self.watch.interrupt(turn_id)

    # -- what the loop did ---------------------------------------------------------------
    def _on(self, event: LoopEvent) -> None:
        if event.kind == "goal_updated":
            self.goal = event.goal
            return
        if event.kind == "usage":
            if not self.foreign:
                self._check_budget(event)
            return
        if event.kind == "delta":
            if self.on_delta is not None and event.text is not None:
                self.on_delta(event.text)
            return
        if event.kind == "notice":
            if event.text is not None:
                self.say(event.text)
            return
        if event.kind == "turn_started" and event.turn_id:
            self.loop.on(event)
            if self.goal_blocked or self.budget_spent_in is not None or self.guard_tripped:
                # A turn codex started although the goal is blocked for a gate, after the
                # run's budget was spent (codex counted less than the ledger), or after the
                # runaway guard paused it at the end of the turn before: stop it now.
                self._interrupt(event.turn_id)
            return
        if event.kind == "turn_ended" and event.turn_id and event.outcome is not None:
            # Recorded, and codex forgets a request to the owner when its turn ends.
            turn = self.loop.on(event)
            if turn is None:
                return
            self.finished.append(turn)
            if self.foreign:
                return  # no budget or guard of ours
            if self.budget_spent_in == event.turn_id:
                self._spent()
            self._check_progress(event)
            if self.on_turn is not None:
                self.on_turn(
                    TurnProgress(
                        n=len(self.finished),
                        turn_id=turn.turn_id,
                        status=turn.status,
                        tokens=turn.tokens.total_tokens,
                        tokens_used=self.spent(),
                        token_budget=self.plan.token_budget,
                        elapsed_sec=time.monotonic() - self.started,
                    )
                )

    def spent(self, running: int = 0) -> int:
        """The run's tokens: its finished turns plus the running turn's so far (one figure,
        what codex reports for the goal's turns, for the budget, progress and the ledger)."""
        return sum(t.tokens.total_tokens for t in self.finished) + running

    def _check_budget(self, event: LoopEvent) -> None:
        """A hard budget: once the tokens codex reports during a turn reach it, that turn is
        interrupted, so a run overspends by at most the one model response in flight. The
        reader asked codex already when more requests were to come in the turn (`trip`):
        this thread, later, only records it and interrupts what the reader leaves to it."""
        if self.budget_spent_in is not None or event.turn_id not in self.open_turns:
            return
        if self.spent(event.tokens or 0) < self.plan.token_budget:
            return
        self.budget_spent_in = event.turn_id
        # A turn whose last response was its answer ends now, and codex, counting as the
        # ledger does, marks the goal budget-limited itself. Otherwise (more responses to
        # come, or codex counted less: a status set mid-turn stops its count) it is
        # interrupted, after which codex starts no further turn.
        agree = self._host_run_tokens() == self.spent()
        if not self.watch.answered(event.turn_id) or not agree:
            self.steered = True
            if self.trip is None or not self.trip.tripped(event.turn_id):
                self.watch.stop_turn(event.turn_id)  # codex's reader has not asked already

    def _spent(self) -> None:
        """The turn that reached the budget ended: the goal is budget-limited, as codex sets
        it at the end of a turn past its budget (paused when codex refuses that status)."""
        if self.goal is not None and self.goal.status != "active":
            return  # codex said it first (its own budget, or the model's update_goal)
        if self._set("budgetLimited") is None:
            self.ending_by = self.ending_by or "the budget"
            self._set("paused")

    def _check_progress(self, event: LoopEvent) -> None:
        """A runaway loop stops: after NO_PROGRESS_TURNS turns in a row with no tool call and
        the same final answer, or the owner's `--max-turns`, the run is paused with an owner
        gate that says why, in words."""
        same = event.tool_calls == 0 and event.answer is not None
        same = same and event.answer == self.last_answer
        self.repeats = self.repeats + 1 if same else int(event.tool_calls == 0)
        self.last_answer = event.answer
        if self.ending_by is not None or self.goal is None or self.goal.status != "active":
            return
        limit = self.plan.max_turns
        if self.repeats >= NO_PROGRESS_TURNS:
            why = (
                f"Codex made no progress in {self.repeats} turns in a row (no command or tool, "
                "the same answer each time)"
            )
        elif limit is not None and len(self.finished) >= limit:
            why = f"the run reached its limit of {limit} turns (--max-turns)"
        else:
            return
        question = (
            f"Goal {self.goal_id} is paused: {why}. Approve to let it go on (then run it "
            "again), or reject to leave it stopped."
        )
        self.guard_tripped = True
        gate = self.runner.goals.request_gate(self.goal_id, question, actor="controller")
        self._note("paused", by="loopx-chat (runaway guard)", reason=why, gate_id=gate.gate_id)
        self._wind_down("loopx-chat (runaway guard)", why)

    # -- what the owner did meanwhile ------------------------------------------------------
    def _look_at_records(self) -> RunResult | None:
        """Gates and `goal stop`, read from the goal's records between notifications."""
        try:
            stopped = self.runner.records.stopped(self.goal_id)
            gates = person_gates(self.runner.goals, self.goal_id)
        except StateError:
            return None  # an unreadable record is reported by status; the loop goes on
        if self.stop_requested.is_set():
            return self._stop_now("loopx-chat (the service stopped)", None)
        if self.ending_by is None and self.pause_requested:
            self._wind_down("owner (Pause)")
        if stopped is not None and self.ending_by is None:  # `plan` refused a stopped goal
            self._wind_down(f"{stopped.get('actor')} (goal stop)")
        if self.ending_by is not None:
            return None  # paused: the last turn finishes, a gate changes nothing now
        new = [g for g in gates if g.gate_id not in self.blocked_on]
        if new:
            self._block(new)
        elif self.blocked_on and not gates:
            return self._unblock()
        elif not self.goal_blocked and any(not _codex_waits(g) for g in gates):
            # Codex stopped waiting on a host gate the owner has not decided (the window
            # passed, its turn ended): now the goal is held blocked.
            self._hold_blocked(gates)
        return None

    def _block(self, gates: list[OwnerGate]) -> None:
        """Block the host goal for newly opened gates (set once; each gate acknowledged by
        its `blocked` record) and interrupt any turn started at or after the first of them,
        except the turn that is itself waiting on a host gate (codex asked in it)."""
        first = gates[0]
        newly = not self.blocked_on
        if newly and self.state.can("gate_opened"):
            self.state.move("gate_opened")
        self.blocked_on += [g.gate_id for g in gates]
        self.blocked_at = self.blocked_at if not newly else first.created_at
        goal = self.goal
        # Codex's own wait on a request holds its loop (no turn starts while it waits), and
        # a status set mid-turn stops codex counting that turn's tokens for the goal: the host
        # goal is set `blocked` only for a gate codex is not itself waiting on.
        if not self.goal_blocked and any(not _codex_waits(g) for g in gates):
            goal = self._hold_blocked(gates)
        self._note(
            "blocked",
            gate_id=first.gate_id,
            gate_ids=[g.gate_id for g in gates],
            host_status=goal.status if goal else None,
            newly=newly,
        )

    def _hold_blocked(self, gates: list[OwnerGate]) -> HostGoalState | None:
        """Set the host goal `blocked` (once) and interrupt any turn started at or after the
        first gate, except a turn that is itself waiting on a host gate (codex asked in it)."""
        first = gates[0]
        # Codex's reader never waits on this run (it only puts in the inbox), so the run may
        # wait for codex's answers here, whoever recorded the gate.
        goal = self._set("blocked")
        self.goal_blocked = True
        asking = {str((g.host or {}).get("turn_id")) for g in gates if _codex_waits(g)}
        for upstream, turn in list(self.open_turns.items()):
            if turn.created_at >= first.created_at and upstream not in asking:
                self._interrupt(upstream)
        return goal

    def _unblock(self) -> RunResult | None:
        decided = [self.runner.goals.gate(self.goal_id, gid) for gid in self.blocked_on]
        rejected = [g for g in decided if g.status == "rejected"]
        self.blocked_on = []
        if rejected:
            reason = rejected[0].reason or f"gate {rejected[0].gate_id} rejected"
            self._wind_down("owner (gate rejected)", reason)
            return None
        desk = self.runner.controller.host_requests
        # A decision on a request codex still waits on is its answer, sent now: never carried.
        desk.deliver_decided(self.goal_id)
        try:
            carried = desk.carries(self.goal_id, self.session_id)
        except LoopxChatError:
            carried = []
        goal = None
        if self.goal_blocked or carried:
            goal = self._set("active", objective=self._carried_objective(carried))
            if goal is not None and carried:  # codex took the objective that says them
                desk.mark_carried(self.goal_id, carried)
        self.goal_blocked = False
        self.goal = goal or self.goal
        if self.state.state == BLOCKED_STATE:
            self.state.move("gates_cleared")
        self._note(
            "unblocked",
            gate_ids=[g.gate_id for g in decided],
            host_status=self.goal.status if self.goal else None,
            **({"carried": True} if carried and goal is not None else {}),
        )
        return None

    def _wind_down(self, by: str, reason: str | None = None) -> None:
        """Pause the goal; the turn that runs finishes and is recorded, and no new one starts
        (codex's own rule for a client's pause), then the run ends."""
        self.ending_by, self.ending_reason = by, reason
        self.state.move("paused")
        self.blocked_on = []
        self.goal_blocked = False
        self._set("paused")

    def _carried_objective(self, carried: list[tuple[str, str]]) -> str | None:
        """A host gate decided after codex stopped waiting (the window passed, the holder
        died) reaches the next continuation turn through the goal's objective, one compact
        line each before the run's own objective, as the next chat turn gets it in its text."""
        lines = [line for _, line in carried]
        if not lines:
            return None
        # Both parts passed the record text rules already (the line is built from a gate's
        # compact facts): joined, not filtered again, so neither is cut to one record's size.
        return " ".join(lines) + " Then: " + self.plan.objective.text

    def _set(self, status: str, *, objective: str | None = None) -> HostGoalState | None:
        self.steered = True
        try:
            goal = self.watch.set(status, objective=objective)
        except CodexError:
            return None
        self.goal = goal
        return goal

    # -- ending ----------------------------------------------------------------------------
    def _stop_now(self, by: str, exit_code: int | None, reason: str | None = None) -> RunResult:
        """Pause the goal, interrupt the turn that runs, wait briefly for its outcome."""
        if not self.state.terminal:
            self.state.move("paused")
        self._set("paused")
        for upstream in list(self.open_turns):
            self._interrupt(upstream)
        self._turn_ends(self.runner.controller.config.timeouts.interrupt_settle)
        self._settle_open("controller_stopped")
        return self._finish(by=by, reason=reason, exit_code=exit_code)

    def _turn_ends(self, seconds: float) -> None:
        """The running turn gets `seconds` to end on its own record; what else comes meanwhile
        is only answered. Codex gone: the turn is recorded interrupted after."""
        deadline = time.monotonic() + seconds
        while self.open_turns and (left := deadline - time.monotonic()) > 0:
            got, item = self.inbox.take(min(left, 0.1))
            if got and item is None:
                return
            self._take(item, ending=True)

    def _settle_open(self, code: str | None) -> None:
        ledger = self.runner.controller.turns
        self.finished += self.loop.settle(code)
        # What the records say runs, too: a Ctrl-C that lands between the ledger recording a
        # turn codex started and the run adding it to `open_turns` left it `running` for good.
        with contextlib.suppress(StateError):  # unreadable: left as it was, said elsewhere
            ledger.settle_orphan(self.session_id, code or "controller_stopped")

    def _finish(
        self, by: str | None = None, reason: str | None = None, exit_code: int | None = None
    ) -> RunResult:
        status = self.goal.status if self.goal else None
        if by is None:
            by = "Codex" if status in ("complete", "blocked", "paused") else "the budget"
            if status == "usageLimited":
                by = "the account's usage limit"
        ledger_tokens = self.spent()
        facts, differences = self._compare(ledger_tokens)
        self.state.end_as(status)
        code = exit_code if exit_code is not None else exit_code_for(status)
        result = RunResult(
            run=self.record,
            host=self.goal,
            turns=len(self.finished),
            ledger_tokens=ledger_tokens,
            host_tokens=self._host_run_tokens(),
            facts=facts,
            differences=differences,
            exit_code=code,
        )
        # The result rides on the run's `ended` record (numbers and our own words only), so
        # `goal follow` in any shell ends with the document the run's own terminal printed.
        summary = {k: v for k, v in result.to_dict().items() if k not in ("ok", "run")}
        run = self._end(self.goal, by=by, reason=reason, result=summary)
        return replace(result, run=run)

    def _host_run_tokens(self) -> int | None:
        """What the host goal counted since this run set it active."""
        if self.goal is None:
            return None
        return max(0, self.goal.tokens_used - self.base)

    def _end(
        self,
        goal: HostGoalState | None,
        *,
        by: str,
        reason: str | None,
        failed: bool = False,
        result: dict[str, Any] | None = None,
    ) -> GoalRun:
        if (failed or (goal is None and by == "host")) and not self.state.terminal:
            self.state.move("failed")
        resets = self.watch.usage_resets_at if self.watch is not None else None
        return self.runner.runs.note(
            self.goal_id,
            self.record.run_id,
            "ended",
            usage_resets_at=resets if goal is not None and goal.status == "usageLimited" else None,
            host_status=goal.status if goal else None,
            tokens_used=goal.tokens_used if goal else None,
            run_tokens=self.spent(),
            turns=len(self.finished),
            by=by,
            reason=reason,
            **({"failed": True} if failed else {}),
            **({"result": result} if result is not None else {}),
        )

    def _compare(self, ledger_tokens: int) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
        """The run's tokens as the ledger, the host goal and the host's rollouts count them."""
        differences: list[str] = []
        host = self._host_run_tokens()
        if host is not None and host != ledger_tokens:
            differences.append(
                f"the ledger counted {ledger_tokens:,} tokens for the run's turns, the host "
                f"goal {host:,} (codex stops counting a goal's tokens when its status changes "
                "mid-turn)"
            )
        controller = self.runner.controller
        thread_id = self.plan.session.upstream_thread_id
        facts: dict[str, Any] | None = None
        try:
            from loopx_chat.codex.rollouts.host_facts import scanner_for

            scan = scanner_for(controller.store.root, controller.codex_home).scan()
            thread = scan.threads.get(thread_id or "")
        except (LoopxChatError, OSError):
            thread = None
        if thread is None:
            differences.append("codex facts has no record of this thread yet")
            return None, tuple(differences)
        session_turns = controller.store.list_turns(self.session_id)
        ledger_total = sum(t.tokens.total_tokens for t in session_turns)
        facts_total = thread.tokens.total_tokens if thread.tokens else 0
        facts = {
            "turns": thread.turns.started,
            "tokens": facts_total,
            "ledger_turns": len(session_turns),
            "ledger_tokens": ledger_total,
        }
        if facts_total != ledger_total:
            differences.append(
                f"codex facts counts {facts_total:,} tokens on the thread, the ledger "
                f"{ledger_total:,}"
            )
        if thread.turns.started != len(session_turns):
            differences.append(
                f"codex facts counts {thread.turns.started} turns on the thread, the ledger "
                f"{len(session_turns)}"
            )
        return facts, tuple(differences)

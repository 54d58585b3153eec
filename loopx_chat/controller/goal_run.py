"""A goal run: Codex's own goal loop on a session's thread, under the owner's recorded authority.

Owns, once `goal_run_checks` said yes, the `run_authorized` record and following the host's
loop in the process that holds the thread: the goal is set `active` with a finite
`tokenBudget` once, and from then on codex starts every continuation turn itself. This
module records each turn in the turn ledger (`origin: goal_loop`), watches the goal's own
records between notifications (a blocking gate opened anywhere sets the host goal `blocked`
and interrupts a turn started after it; approving the last one sets it `active` again; `goal
stop` pauses it; what codex asks on a continuation turn is such a gate, a host gate, while
its turn stays open: the run is blocked on it but the host goal is left `active`, since
codex's own wait holds its loop, and a decision recorded anywhere is delivered to codex as
its answer, never carried; time spent waiting on the owner is never idle). It keeps the
budget hard (the turn whose reported tokens reach it is interrupted), pauses a loop that
repeats itself or passes `--max-turns` with an owner gate, starts a dead app-server again
and resumes the thread (bounded, with backoff; failed with the reason when it cannot), waits
out a usage limit when the owner asked, and says each event it records in the words `goal
follow` prints. Its inputs are one ordered queue (`run_inbox`): codex's notifications,
routed there while the run holds the thread, and a gate recorded or decided in this process,
a host gate codex's request became, the owner's Pause and the service stopping, each taken
in the order it came on the run's own thread (the app-server's reader only puts, so the run
may always wait on codex; a caller that wants the gate's effect waits on its record's
answer). Its state moves only as the table `run_states.MOVES` allows. It pauses the goal on
Ctrl-C, and at the end compares the ledger's tokens with the host goal's and with the host's
rollouts (`codex facts`), reporting any difference. Also the owner's answer to a run Codex
says is done: Accept (a human_reward, the run closed) and Reopen's objective.

It never writes a loop of its own: it never calls `turn/start`. Only `thread/goal/set`,
`turn/interrupt` and reading notifications.
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
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.goal_run_checks import RunChecks, RunPlan, person_gates
from loopx_chat.controller.loop_follower import LoopTurns
from loopx_chat.controller.run_inbox import (
    Answer,
    GateDecided,
    GateOpened,
    PauseAsked,
    RunInbox,
    RunInput,
    StopAsked,
)
from loopx_chat.controller.run_states import BLOCKED as BLOCKED_STATE
from loopx_chat.controller.run_states import RECOVERING, RunState
from loopx_chat.errors import CodexError, LoopxChatError, Remedy, StateError
from loopx_chat.goals.gate_store import Gate as OwnerGate
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import (
    EXIT_INTERRUPTED,
    STOP_WORDS,
    GoalRun,
    GoalRuns,
    RunObjective,
    exit_code_for,
    run_line,
)
from loopx_chat.goals.run_block import (
    BLOCKED,
    NOT_ACKNOWLEDGED,
    RUN_ENDING,
    RunBlock,
)
from loopx_chat.state.file_change import FileChange
from loopx_chat.state.session_records import TurnRecord

if TYPE_CHECKING:
    from loopx_chat.codex.budget_trip import BudgetTrip

POLL_SEC = 0.2  # how often the goal's records (gates, stop) are read while the loop runs
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
WHILE_CODEX_STARTS = (
    "loopx_chat.codex.budget_trip",
    "loopx_chat.controller.host_requests",
    "loopx_chat.codex.rollouts.host_facts",
    "loopx_chat.codex.rollouts.scanner",
)


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


class GoalRunner:
    def __init__(
        self, controller: ChatController, goals: GateStore, *, poll_sec: float = POLL_SEC
    ) -> None:
        self.controller = controller
        self.goals = goals
        self.records = GoalLedger(goals)
        self.runs = GoalRuns(goals)
        self.poll_sec = poll_sec
        # Every check before a run (`goal_run_checks`): nothing written, nothing spawned.
        self.plan = RunChecks(controller, goals).plan
        # Imported while codex starts, not on a run's way: the host-request desk the thread
        # is bound to before the goal is set, the budget the reader acts on (`budget_trip`), the
        # rollout reader of the run's end (`_compare`).
        imports = controller.while_starting_imports
        imports.extend(name for name in WHILE_CODEX_STARTS if name not in imports)

    def ended_complete(self, goal_id: str) -> GoalRun:
        run = self.runs.latest(goal_id)
        if run is None or run.state != "ended" or run.host_status != "complete":
            shown = "no run" if run is None else f"run {run.run_id} is {run.state}"
            raise StateError(
                f"goal {goal_id} has no run that Codex reported complete ({shown})",
                error_code="run_not_complete",
                remedy=Remedy(
                    summary="Accept and Reopen answer a run Codex says is done.",
                    next_action=f"Run it first: `loopx-chat goal run {goal_id}`.",
                ),
            )
        return run

    def accept(self, goal_id: str, reason: str | None, actor: str = "owner") -> GoalRun:
        """The owner agrees it is done: a human_reward on the run's last turn, run closed."""
        run = self.ended_complete(goal_id)
        turns = [
            t for t in self.controller.store.list_turns(run.session_id) if t.run_id == run.run_id
        ]
        if not turns:
            raise StateError(
                f"run {run.run_id} recorded no turn to judge", error_code="turn_not_found"
            )
        last = max(turns, key=lambda t: (t.completed_at or t.updated_at, t.turn_id))
        reward = self.records.record_reward(
            goal_id,
            run_ref=last.turn_id,
            label="good",
            reason=reason or "accepted: Codex's work meets the acceptance criteria",
            goal_turns={t.turn_id for t in turns},
            actor=actor,
        )
        return self.runs.note(
            goal_id, run.run_id, "accepted", reward_id=reward["reward_id"], actor=actor
        )

    def reopen_objective(self, goal_id: str, note: str) -> tuple[GoalRun, RunObjective]:
        """Reopen: the owner's note becomes the next objective of a new run."""
        from loopx_chat.goals.gate_store import public_text

        run = self.ended_complete(goal_id)
        return run, RunObjective(public_text(note, "note"), "owner_note", run.run_id)

    # -- the run ---------------------------------------------------------------------------
    def run(
        self,
        plan: RunPlan,
        *,
        actor: str = "owner",
        surface: str = "cli",
        on_turn: Callable[[TurnProgress], None] | None = None,
        on_event: Callable[[str], None] | None = None,
        on_delta: Callable[[str], None] | None = None,
    ) -> RunResult:
        """Authorize, set the host goal active with the budget, follow it until it leaves
        `active` (or the owner stops it); the exit code says how it ended."""
        record = self.authorize(plan, actor=actor, surface=surface)
        follow = self.follower(record, plan, on_turn, on_event)
        follow.on_delta = on_delta
        return follow.run()

    def authorize(self, plan: RunPlan, *, actor: str, surface: str) -> GoalRun:
        """Record the owner's authority for the planned run (nothing is sent yet)."""
        return self.runs.authorize(
            plan.goal_id,
            session_id=plan.session.session_id,
            thread_id=plan.session.upstream_thread_id,
            actor=actor,
            surface=surface,
            token_budget=plan.token_budget,
            objective=plan.objective,
            approval_policy=plan.approval_policy,
            max_turns=plan.max_turns,
            resume_after_usage_limit=plan.resume_after_usage_limit,
        )

    def follower(
        self,
        record: GoalRun,
        plan: RunPlan,
        on_turn: Callable[[TurnProgress], None] | None = None,
        on_event: Callable[[str], None] | None = None,
        *,
        recovering: bool = False,
    ) -> _Follow:
        """What follows one authorized run (`run()` blocks until it ends); `recovering`: the
        run's process died with the goal active, and codex continues it by itself once the
        thread is loaded again, so nothing is set."""
        return _Follow(
            self, plan, record, on_turn, on_event or (lambda _: None), recovering=recovering
        )


@dataclass
class _Follow:
    """The state of one run while it follows the host's loop."""

    runner: GoalRunner
    plan: RunPlan
    record: GoalRun
    on_turn: Callable[[TurnProgress], None] | None
    say: Callable[[str], None]
    on_delta: Callable[[str], None] | None = None  # the agent's reply, never stored
    open_turns: dict[str, TurnRecord] = field(default_factory=dict)
    finished: list[TurnRecord] = field(default_factory=list)
    goal: HostGoalState | None = None
    blocked_on: list[str] = field(default_factory=list)  # gates we set `blocked` for
    blocked_at: str | None = None
    goal_blocked: bool = False  # whether this run set the host goal `blocked` for them
    base: int = 0  # the host goal's tokensUsed when this run set it active
    ending_by: str | None = None  # who paused it, while the last turn finishes
    ending_reason: str | None = None
    pause_requested: bool = False  # the owner's Pause, taken from the inbox
    stop_requested: threading.Event = field(default_factory=threading.Event)  # shutdown
    recovering: bool = False
    started: float = 0.0
    warm: Any = None
    watch: Any = None
    trip: BudgetTrip | None = None  # the budget, acted on by codex's reader (`budget_trip`)
    loop: Any = None  # the run's turns in the ledger (`LoopTurns`, sharing `open_turns`)
    # The run's one ordered input queue: codex's notifications (routed here while the run
    # holds the thread) and what the owner and this process did (`run_inbox`).
    inbox: RunInbox = field(default_factory=RunInbox)
    state: RunState = field(default_factory=RunState)  # moves checked by `run_states.MOVES`
    follower_thread: threading.Thread | None = None
    gates_log: FileChange | None = None  # the gate log's stat at the last look
    loop_started: bool = False  # the goal was set active (or found so) by this run
    budget_spent_in: str | None = None  # the turn interrupted because it reached the budget
    usage_wait_until: float | None = None  # epoch seconds: the usage limit's reset
    guard_tripped: bool = False  # the runaway guard paused the run at a turn's end
    repeats: int = 0  # turns in a row with no tool call and the same answer
    steered: bool = False  # the run set the goal or interrupted a turn after its start
    last_answer: str | None = None

    def __post_init__(self) -> None:
        if self.recovering:
            self.state = RunState(RECOVERING)

    @property
    def goal_id(self) -> str:
        return self.plan.goal_id

    @property
    def session_id(self) -> str:
        return self.plan.session.session_id

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
                # The run's turns, kept as every followed loop's are (`loop_follower`).
                self.loop = LoopTurns(
                    controller.turns,
                    self.session_id,
                    warm,
                    run_id=self.record.run_id,
                    desk=controller.host_requests,
                    open_turns=self.open_turns,
                )
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

    def pause(self) -> None:
        """The owner's Pause: taken in order, the goal paused, the running turn finishes."""
        self.inbox.put(PauseAsked())

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
        settle = time.monotonic() + self.runner.controller.config.timeouts.interrupt_settle
        while self.open_turns and time.monotonic() < settle:
            got, item = self.inbox.take(0.1)
            if got and item is None:
                break  # codex is gone: its turn is recorded interrupted below
            self._take(item, ending=True)
        self._settle_open("controller_stopped")
        return self._finish(by=by, reason=reason, exit_code=exit_code)

    def _settle_open(self, code: str | None) -> None:
        ledger = self.runner.controller.turns
        if self.loop is not None:
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

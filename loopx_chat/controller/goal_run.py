"""A goal run: Codex's own goal loop on a session's thread, under the owner's recorded authority.

Owns the checks before a run (each refusal a specific code, with nothing written and
nothing spawned), the `run_authorized` record, and following the host's loop in the process
that holds the thread: the goal is set `active` with a finite `tokenBudget` once, and from
then on codex starts every continuation turn itself. This module records each turn in the
turn ledger (`origin: goal_loop`), watches the goal's own records between notifications (a
blocking gate opened anywhere sets the host goal `blocked` and interrupts a turn started
after it; approving the last one sets it `active` again; `goal stop` pauses it), pauses the
goal on Ctrl-C, and at the end compares the ledger's tokens with the host goal's and with
the host's rollouts (`codex facts`), reporting any difference.

It never writes a loop of its own: it never calls `turn/start`. Only `thread/goal/set`,
`turn/interrupt` and reading notifications.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from loopx_chat.codex.goal_loop import GoalLoopWatch, HostGoalState, LoopEvent
from loopx_chat.codex.thread import TurnOutcome
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.thread_lock import ThreadWriterLock
from loopx_chat.errors import CodexError, Gate, LoopxChatError, StateError, UsageError
from loopx_chat.goals.goal_runs import (
    EXIT_INTERRUPTED,
    GoalRun,
    GoalRuns,
    RunObjective,
    exit_code_for,
    host_goal_words,
    run_objective,
)
from loopx_chat.goals.goal_state import GoalRecords
from loopx_chat.goals.goal_store import Gate as OwnerGate
from loopx_chat.goals.goal_store import GoalStore
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord

POLL_SEC = 0.2  # how often the goal's records (gates, stop) are read while the loop runs


@dataclass(frozen=True)
class RunPlan:
    goal_id: str
    session: SessionRecord
    token_budget: int
    objective: RunObjective


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


def _refuse(message: str, code: str, summary: str, next_action: str) -> UsageError:
    return UsageError(message, error_code=code, gate=Gate(summary=summary, next_action=next_action))


def person_gates(goals: GoalStore, goal_id: str) -> list[OwnerGate]:
    """The goal's open blocking gates, oldest first."""
    pending = [g for g in goals.gates(goal_id) if g.status == "pending" and g.blocking]
    return sorted(pending, key=lambda g: g.created_at)


class GoalRunner:
    def __init__(
        self, controller: ChatController, goals: GoalStore, *, poll_sec: float = POLL_SEC
    ) -> None:
        self.controller = controller
        self.goals = goals
        self.records = GoalRecords(goals)
        self.runs = GoalRuns(goals)
        self.poll_sec = poll_sec

    # -- before a run: every check, nothing written, nothing spawned ------------------------
    def plan(
        self,
        goal_id: str,
        session_id: str | None = None,
        token_budget: int | None = None,
        *,
        objective: RunObjective | None = None,
    ) -> RunPlan:
        """Every check before a run, in the order the owner fixes them; `objective` replaces
        the one the records give (Reopen: the owner's note)."""
        goals, records = self.goals, self.records
        stopped = records.stopped(goal_id)
        if stopped is not None:
            raise _refuse(
                f"goal {goal_id} is stopped by the {stopped.get('actor')}",
                "goal_stopped",
                "A stopped goal gets no turn, by hand or by Codex's loop.",
                f"Resume it first (`loopx-chat goal resume {goal_id}`), then run it.",
            )
        open_gates = person_gates(goals, goal_id)
        if open_gates:
            first = open_gates[0]
            raise _refuse(
                f"gate {first.gate_id} is open on goal {goal_id}: {first.question}",
                "gate_open",
                f"An owner gate waits on the {first.actor}; Codex may not continue past it.",
                f"Decide it (`loopx-chat gate resolve {first.gate_id} --goal {goal_id} "
                "--decision approve`), then run the goal.",
            )
        session = self._session(goal_id, session_id)
        home = str(self.controller.codex_home)
        if session.codex_home is not None and session.codex_home != home:
            raise CodexError(
                f"session {session.session_id} belongs to another Codex home",
                error_code="codex_home_mismatch",
                gate=Gate(
                    summary="A goal runs only on the Codex home its session belongs to.",
                    next_action="Restart loopx-chat with the session's original "
                    "LOOPX_CHAT_CODEX_HOME; do not copy or rebind its history.",
                ),
            )
        if self._raw_material(goal_id):
            raise _refuse(
                f"goal {goal_id}'s records carry raw material",
                "raw_material_detected",
                "The goal's facts hold raw material (a transcript, a credential, a path).",
                "Replace it with compact summaries (see `loopx-chat status --goal "
                f"{goal_id} --json`, boundary), then run the goal.",
            )
        state = records.goal_state(goal_id)
        budget = token_budget or (state.token_budget if state else None)
        if not budget:
            raise _refuse(
                f"goal {goal_id} has no token budget: Codex's loop would run without an end",
                "budget_required",
                "Codex's own loop continues until its budget is spent; without one it never is.",
                f"Give one: `loopx-chat goal run {goal_id} --token-budget 50000`, or "
                f"`loopx-chat goal set {goal_id} --token-budget 50000`.",
            )
        if objective is None:
            pending = self._pending_handoff(goal_id, goals.handoffs(goal_id))
            objective = run_objective(records, goal_id, pending)
        self._check_not_busy(goal_id, session)
        self.controller.find_binary()  # no codex: `host_tool_unavailable` before any record
        return RunPlan(goal_id, session, budget, objective)

    def _session(self, goal_id: str, session_id: str | None) -> SessionRecord:
        store = self.controller.store
        if session_id is not None:
            record = store.load(session_id)
            if record.goal_id != goal_id:
                raise UsageError(
                    f"session {session_id} works for goal {record.goal_id}, not {goal_id}",
                    error_code="session_goal_mismatch",
                )
            return record
        candidates = [
            s
            for s in store.list().sessions
            if s.goal_id == goal_id
            and s.session_mode == "managed_runtime"
            and s.agent_id == "codex"
            and s.upstream_thread_id
        ]
        if not candidates:
            raise _refuse(
                f"goal {goal_id} has no session with a Codex thread to run on",
                "no_session",
                "Codex's loop runs on a thread; this goal has none yet.",
                f'Open one: `loopx-chat chat new --goal {goal_id} "…"`, then run the goal.',
            )
        return max(candidates, key=lambda s: s.updated_at)

    def _raw_material(self, goal_id: str) -> bool:
        from loopx_chat.goals.goal_facts import facts_from_state
        from loopx_chat.goals.status import goal_status

        facts = facts_from_state(
            goal_id,
            store=self.controller.store,
            goals=self.goals,
            codex_home=str(self.controller.codex_home),
        )
        boundary = goal_status(facts)["projection"].get("boundary", {})
        return bool(boundary.get("raw_material_detected"))

    def _pending_handoff(self, goal_id: str, handoffs: list[Any]) -> Any:
        from loopx_chat.goals.goal_facts import goal_turns, handoff_consumers

        if not handoffs:
            return None
        consumers = handoff_consumers(handoffs, goal_turns(self.controller.store, goal_id))
        pending = [h for h in handoffs if consumers[h.handoff_id] is None]
        return pending[-1] if pending else None

    def _check_not_busy(self, goal_id: str, session: SessionRecord) -> None:
        latest = self.runs.latest(goal_id)
        if latest is not None and latest.live and _pid_alive(latest.pid):
            raise CodexError(
                f"goal {goal_id} is already running (run {latest.run_id}, pid {latest.pid})",
                error_code="thread_busy",
                gate=Gate(
                    summary="Codex's loop already runs this goal under another `goal run`.",
                    next_action=f"Watch it with `loopx-chat status --goal {goal_id}`, or pause "
                    f"it with `loopx-chat goal stop {goal_id}`.",
                ),
            )
        thread_id = session.upstream_thread_id
        if not thread_id:
            return
        lock = ThreadWriterLock(self.controller.store.root, self.controller.codex_home, thread_id)
        if lock.path.parent.is_dir() and lock.held_elsewhere():
            from loopx_chat.state.service_runtime import read_runtime

            service = read_runtime(self.controller.store.root)
            if session.active_turn_id:
                holder = f"a running turn ({session.active_turn_id}) in another loopx-chat process"
                remedy = "Let that turn finish (or `loopx-chat chat interrupt SESSION`)"
            elif service is not None:
                holder = f"the local service (pid {service.pid}, port {service.port})"
                remedy = (
                    f"Run it there: the goal card's Run button, or POST /api/goals/{goal_id}/run"
                )
            else:
                holder = "another loopx-chat process"
                remedy = "Let that process finish with the thread"
            raise CodexError(
                f"thread {thread_id} is held by {holder}",
                error_code="thread_busy",
                gate=Gate(
                    summary=f"{holder[0].upper()}{holder[1:]} holds this thread; a goal runs "
                    "only in the process that holds it.",
                    next_action=f"{remedy}, then run the goal again.",
                ),
            )

    # -- the owner's answer to "Codex says it is done" -------------------------------------
    def ended_complete(self, goal_id: str) -> GoalRun:
        run = self.runs.latest(goal_id)
        if run is None or run.state != "ended" or run.host_status != "complete":
            shown = "no run" if run is None else f"run {run.run_id} is {run.state}"
            raise StateError(
                f"goal {goal_id} has no run that Codex reported complete ({shown})",
                error_code="run_not_complete",
                gate=Gate(
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
        from loopx_chat.goals.goal_store import public_text

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


def _pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    base: int = 0  # the host goal's tokensUsed when this run set it active
    ending_by: str | None = None  # who paused it, while the last turn finishes
    ending_reason: str | None = None
    pause_requested: threading.Event = field(default_factory=threading.Event)
    stop_requested: threading.Event = field(default_factory=threading.Event)  # shutdown
    recovering: bool = False
    started: float = 0.0
    warm: Any = None
    watch: Any = None

    @property
    def goal_id(self) -> str:
        return self.plan.goal_id

    @property
    def session_id(self) -> str:
        return self.plan.session.session_id

    def run(self) -> RunResult:
        controller = self.runner.controller
        self.started = time.monotonic()
        controller.following_goal_loops.add(self.session_id)
        try:
            with controller.held_thread(self.session_id) as warm:
                self.warm = warm
                self.watch = GoalLoopWatch(warm.thread)
                try:
                    return self._follow()
                except KeyboardInterrupt:
                    return self._stop_now("owner (Ctrl-C)", EXIT_INTERRUPTED)
                except SystemExit:
                    self._stop_now("owner (SIGTERM)", None)  # the goal must not run on alone
                    raise
                except CodexError as exc:
                    self._settle_open(exc.error_code)
                    if exc.error_code in ("app_server_exited", "app_server_protocol"):
                        controller.drop_thread(self.session_id)
                    self._end(None, by="host", reason=exc.error_code)
                    raise
                finally:
                    warm.running_turn_id = None
        except LoopxChatError as exc:
            if self.recovering and exc.error_code == "thread_busy":
                raise  # another process took it up first: the run is theirs to follow
            if self.runner.runs.run(self.goal_id, self.record.run_id).state != "ended":
                self._end(None, by="host", reason=exc.error_code)
            raise
        except KeyboardInterrupt:
            # Before the goal was set (the thread was loading): nothing runs; say so.
            if self.runner.runs.run(self.goal_id, self.record.run_id).state != "ended":
                self._end(None, by="owner (Ctrl-C)", reason="stopped before the loop started")
            raise
        finally:
            controller.following_goal_loops.discard(self.session_id)

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
        self.runner.controller.turns.settle_orphan(self.session_id)
        started = [e for e in self.record.history if e.get("event") == "started"]
        self.base = int(started[-1].get("host_tokens_before") or 0) if started else 0
        self.goal = self.watch.get()
        self.runner.runs.note(
            self.goal_id,
            self.record.run_id,
            "recovered",
            pid=os.getpid(),
            host_status=self.goal.status if self.goal else None,
        )
        self.say(f"run {self.record.run_id} recovered: Codex goes on with goal {self.goal_id}")

    def _start(self) -> None:
        runs = self.runner.runs
        plan = self.plan
        # codex counts a goal's tokens for its whole life (a new objective does not reset
        # them), so the run's budget is what it may spend from here on.
        prior = self.watch.get()
        self.base = prior.tokens_used if prior is not None else 0
        goal = self.watch.set(
            "active", objective=plan.objective.text, token_budget=self.base + plan.token_budget
        )
        self.goal = goal
        runs.note(
            self.goal_id,
            self.record.run_id,
            "started",
            host_status=goal.status,
            tokens_used=goal.tokens_used,
            host_tokens_before=self.base,
            prior_host_status=prior.status if prior is not None else None,
        )
        self.say(
            f"Codex is working on goal {self.goal_id} (run {self.record.run_id}, budget "
            f"{plan.token_budget:,} tokens)"
        )

    def _loop(self) -> RunResult:
        idle = self.runner.controller.config.timeouts.idle
        next_poll = 0.0
        last_event = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + self.runner.poll_sec
                ended = self._look_at_records()
                if ended is not None:
                    return ended
            event = self.watch.next_event(timeout=0.05)
            if event is not None:
                last_event = time.monotonic()
                self._on(event)
            elif (
                self.goal is not None
                and self.goal.status == "active"
                and time.monotonic() - last_event > idle
            ):
                # Codex stopped continuing without saying so (an interrupted loop stays
                # `active` but starts nothing): pause it, so the state says what is true.
                return self._stop_now("loopx-chat (no turn for the idle timeout)", None)
            if self._done():
                return self._finish(by=self.ending_by, reason=self.ending_reason)

    def _done(self) -> bool:
        return (
            self.goal is not None
            and self.goal.status != "active"
            and not self.blocked_on
            and self.watch.running_turn_id is None
            and not self.open_turns
        )

    # -- what the loop did ---------------------------------------------------------------
    def _on(self, event: LoopEvent) -> None:
        ledger = self.runner.controller.turns
        if event.kind == "goal_updated":
            self.goal = event.goal
            return
        if event.kind == "delta":
            if self.on_delta is not None and event.text is not None:
                self.on_delta(event.text)
            return
        if event.kind == "turn_started" and event.turn_id:
            turn = ledger.draft(
                self.session_id,
                None,
                origin="goal_loop",
                run_id=self.record.run_id,
                upstream_turn_id=event.turn_id,
            )
            ledger.begin(turn)
            self.open_turns[event.turn_id] = turn
            self.warm.running_turn_id = turn.turn_id
            if self.blocked_on:
                # A turn codex started although the goal is blocked for a gate: stop it now.
                self.watch.interrupt(event.turn_id)
            return
        if event.kind == "turn_ended" and event.turn_id and event.outcome is not None:
            turn = self.open_turns.pop(event.turn_id, None)
            if turn is None:
                return
            result = ledger.finish(turn, event.outcome)
            self.finished.append(result.turn)
            self.warm.running_turn_id = None
            if self.on_turn is not None:
                self.on_turn(
                    TurnProgress(
                        n=len(self.finished),
                        turn_id=result.turn.turn_id,
                        status=result.turn.status,
                        tokens=result.turn.tokens.total_tokens,
                        tokens_used=self._host_run_tokens(),
                        token_budget=self.plan.token_budget,
                        elapsed_sec=time.monotonic() - self.started,
                    )
                )

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
        if self.ending_by is None and self.pause_requested.is_set():
            self._wind_down("owner (Pause)")
        if stopped is not None and self.ending_by is None:  # `plan` refused a stopped goal
            self._wind_down(f"{stopped.get('actor')} (goal stop)")
        if gates and not self.blocked_on:
            self._block(gates)
        elif self.blocked_on and not gates:
            return self._unblock()
        return None

    def _block(self, gates: list[OwnerGate]) -> None:
        first = gates[0]
        self.blocked_on = [g.gate_id for g in gates]
        self.blocked_at = first.created_at
        goal = self._set("blocked")
        for upstream, turn in list(self.open_turns.items()):
            if turn.created_at >= first.created_at:
                self.watch.interrupt(upstream)
        self.runner.runs.note(
            self.goal_id,
            self.record.run_id,
            "blocked",
            gate_id=first.gate_id,
            host_status=goal.status if goal else None,
        )
        self.say(f"owner gate {first.gate_id} is open: Codex's goal is blocked until it is decided")

    def _unblock(self) -> RunResult | None:
        decided = [self.runner.goals.gate(self.goal_id, gid) for gid in self.blocked_on]
        rejected = [g for g in decided if g.status == "rejected"]
        self.blocked_on = []
        if rejected:
            reason = rejected[0].reason or f"gate {rejected[0].gate_id} rejected"
            self._wind_down("owner (gate rejected)", reason)
            return None
        goal = self._set("active")
        self.goal = goal or self.goal
        self.runner.runs.note(
            self.goal_id,
            self.record.run_id,
            "unblocked",
            gate_ids=[g.gate_id for g in decided],
            host_status=goal.status if goal else None,
        )
        self.say("the gate was approved: Codex continues")
        return None

    def _wind_down(self, by: str, reason: str | None = None) -> None:
        """Pause the goal; the turn that runs finishes and is recorded, and no new one starts
        (codex's own rule for a client's pause), then the run ends."""
        self.ending_by, self.ending_reason = by, reason
        self.blocked_on = []
        self._set("paused")

    def _set(self, status: str) -> HostGoalState | None:
        try:
            goal = self.watch.set(status)
        except CodexError:
            return None
        self.goal = goal
        return goal

    # -- ending ----------------------------------------------------------------------------
    def _stop_now(self, by: str, exit_code: int | None) -> RunResult:
        """Pause the goal, interrupt the turn that runs, wait briefly for its outcome."""
        self._set("paused")
        for upstream in list(self.open_turns):
            self.watch.interrupt(upstream)
        settle = time.monotonic() + self.runner.controller.config.timeouts.interrupt_settle
        while self.open_turns and time.monotonic() < settle:
            try:
                event = self.watch.next_event(timeout=0.1)
            except CodexError:
                break
            if event is not None:
                self._on(event)
        self._settle_open("controller_stopped")
        return self._finish(by=by, exit_code=exit_code)

    def _settle_open(self, code: str | None) -> None:
        ledger = self.runner.controller.turns
        for upstream, turn in list(self.open_turns.items()):
            ledger.finish(turn, TurnOutcome(upstream, "interrupted", code, TokenCounts()))
            self.finished.append(replace(turn, status="interrupted"))
        self.open_turns.clear()

    def _finish(
        self, by: str | None = None, reason: str | None = None, exit_code: int | None = None
    ) -> RunResult:
        status = self.goal.status if self.goal else None
        if by is None:
            by = "Codex" if status in ("complete", "blocked", "paused") else "the budget"
            if status == "usageLimited":
                by = "the account's usage limit"
        run = self._end(self.goal, by=by, reason=reason)
        ledger_tokens = sum(t.tokens.total_tokens for t in self.finished)
        facts, differences = self._compare(ledger_tokens)
        code = exit_code if exit_code is not None else exit_code_for(status)
        return RunResult(
            run=run,
            host=self.goal,
            turns=len(self.finished),
            ledger_tokens=ledger_tokens,
            host_tokens=self._host_run_tokens(),
            facts=facts,
            differences=differences,
            exit_code=code,
        )

    def _host_run_tokens(self) -> int | None:
        """What the host goal counted since this run set it active."""
        if self.goal is None:
            return None
        return max(0, self.goal.tokens_used - self.base)

    def _end(self, goal: HostGoalState | None, *, by: str, reason: str | None) -> GoalRun:
        resets = self.watch.usage_resets_at if self.watch is not None else None
        return self.runner.runs.note(
            self.goal_id,
            self.record.run_id,
            "ended",
            usage_resets_at=resets if goal is not None and goal.status == "usageLimited" else None,
            host_status=goal.status if goal else None,
            tokens_used=goal.tokens_used if goal else None,
            run_tokens=self._host_run_tokens(),
            turns=len(self.finished),
            by=by,
            reason=reason,
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


def host_goal_view(
    controller: ChatController, goals: GoalStore, goal_id: str
) -> dict[str, Any] | None:
    """The host goal of the goal's run (or of a loop we saw and did not start), read now
    with `thread/goal/get` through an app-server that loads no thread; None when loopx-chat
    has no run and saw no loop for the goal (then nothing is spawned)."""
    runs = GoalRuns(goals)
    run = runs.latest(goal_id)
    seen = runs.host_loop_seen(goal_id)
    if run is None and seen is None:
        return None
    session_id = (
        str(seen["session_id"])
        if seen and (run is None or str(seen.get("at")) > run.authorized_at)
        else (run.session_id if run else "")
    )
    view: dict[str, Any] = {
        "session_id": session_id,
        "run_id": run.run_id if run else None,
        "run_state": run.state if run else None,
    }
    try:
        with controller.thread_metadata(session_id) as call:
            goal = HostGoalState.from_wire(call("thread/goal/get", {}).get("goal"))
    except LoopxChatError as exc:
        return {**view, "error_code": exc.error_code, "words": f"unknown ({exc.error_code})"}
    if run is not None and run.live and not _pid_alive(run.pid):
        run = replace(run, state="ended", ended_by="a run that is no longer running")
    turns = [t for t in controller.store.list_turns(session_id) if run and t.run_id == run.run_id]
    shown = goal.to_dict() if goal else None
    if shown is not None:
        shown["turns"] = len(turns)
        started = [e for e in run.history if e.get("event") == "started"] if run else []
        if run is not None and started:
            # What this run spent of its own budget (codex counts the goal's whole life).
            base = int(started[-1].get("host_tokens_before") or 0)
            shown["run_tokens_used"] = max(0, shown["tokens_used"] - base)
            shown["run_token_budget"] = run.token_budget
    state = GoalRecords(goals).goal_state(goal_id)
    acceptance = list(state.acceptance) if state else []
    return {
        **view,
        "goal": shown,
        "words": host_goal_words(shown, run, acceptance),
    }

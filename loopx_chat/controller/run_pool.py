"""The goal runs a long-lived process (the service) follows, each on a thread of its own.

Owns starting a run in the background (the same checks, record and follow as `goal run`),
the cap on how many run at once (`max_running`, beyond it `too_many_running`, nothing
written), Pause (the host goal is set paused; the turn that runs finishes and is recorded),
stopping every run on shutdown (paused, the running turn interrupted and recorded), and
recovery at start: a run whose record says it runs, whose process is gone and whose goal
the owner did not stop, is taken up again. Its unfinished turn is recorded interrupted
once, and loading the thread is all codex needs to go on (a resume restarts its loop). Two
starts racing recover it once: the thread's writer lock lets one of them load it; a run the
owner's `chat interrupt` ended meanwhile (under the same lock) is read again once the
thread is held, and left.

It never writes a loop and never sets a goal `active` itself: `GoalRunner` does, for a Run
the owner asked for; recovery sets nothing.
"""

from __future__ import annotations

import contextlib
import threading

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.goal_run import GoalRunner
from loopx_chat.controller.goal_run_checks import RunPlan
from loopx_chat.controller.loop_follower import LoopFollower
from loopx_chat.errors import CodexError, LoopxChatError, Remedy, StateError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_runs import GoalRun, RunObjective
from loopx_chat.pids import pid_alive

DEFAULT_MAX_RUNNING = 4
PAUSE_WAIT_SEC = 5.0


class RunPool:
    def __init__(
        self,
        controller: ChatController,
        goals: GateStore,
        *,
        max_running: int = DEFAULT_MAX_RUNNING,
    ) -> None:
        self.runner = GoalRunner(controller, goals)
        self.max_running = max_running
        # The controller's registry holds the runs (`RunningGoals.background`); this lock
        # makes a start's checks, record and launch one step against the cap.
        self.registry = controller.running_goals
        self._lock = threading.Lock()
        self.closed = False

    def running(self) -> dict[str, str]:
        """goal id -> run id of the runs this process follows now."""
        return {
            gid: follow.our_run().record.run_id
            for gid, (follow, _) in self.registry.background_runs().items()
        }

    def start(
        self,
        goal_id: str,
        *,
        session_id: str | None = None,
        token_budget: int | None = None,
        actor: str = "owner",
        surface: str = "api",
        reopen_note: str | None = None,
        approval_policy: str | None = None,
        plan_mode: bool = False,
        max_turns: int | None = None,
        resume_after_usage_limit: bool | None = None,
    ) -> GoalRun:
        """Run: every check `goal run` makes (nothing written when one refuses), then the
        run record, then the follow on a thread of this process; returns the record.
        With `reopen_note`: Reopen the run Codex said was done, the note its next objective."""
        with self._lock:
            held = self.registry.background_runs()
            if self.closed:
                raise CodexError("loopx-chat is shutting down", error_code="controller_stopped")
            if goal_id in held:
                run = held[goal_id][0].our_run().record
                raise CodexError(
                    f"goal {goal_id} is already running (run {run.run_id})",
                    error_code="thread_busy",
                )
            if len(held) >= self.max_running:
                raise CodexError(
                    f"{len(held)} goals are running here already, the most this "
                    "service runs at once",
                    error_code="too_many_running",
                    remedy=Remedy(
                        summary="The service runs a bounded number of goals at once.",
                        next_action="Pause one, or wait for one to end; `loopx-chat serve "
                        "--max-running N` allows more.",
                    ),
                )
            plan = self.runner.plan(
                goal_id,
                session_id,
                token_budget,
                reopen_note=reopen_note,
                approval_policy=approval_policy,
                plan_mode=plan_mode,
                max_turns=max_turns,
                resume_after_usage_limit=resume_after_usage_limit,
            )
            record = self.runner.authorize(plan, actor=actor, surface=surface)
            self._launch(self.runner.follower(record, plan))
        return record

    def _launch(self, follow: LoopFollower) -> None:
        def body() -> None:
            with contextlib.suppress(LoopxChatError):
                follow.our_run().run()

        goal_id = follow.our_run().goal_id
        thread = threading.Thread(target=body, name=f"goal-run-{goal_id}", daemon=True)
        self.registry.background(goal_id, follow, thread)
        thread.start()

    def pause(self, goal_id: str) -> GoalRun:
        """Pause the goal this process runs: set paused, its running turn finishes, the run
        ends. A run another process follows (a `goal run` in a terminal) is refused."""
        held = self.registry.background_runs().get(goal_id)
        if held is not None:
            follow, thread = held
            follow.pause()
            # The goal is paused at once; its running turn may take a while to finish, and
            # the answer does not wait for more than a moment of it (the card follows).
            thread.join(timeout=PAUSE_WAIT_SEC)
            return self.runner.runs.run(goal_id, follow.our_run().record.run_id)
        latest = self.runner.runs.latest(goal_id)
        if latest is not None and latest.live and pid_alive(latest.pid):
            raise CodexError(
                f"goal {goal_id} runs in another loopx-chat process (pid {latest.pid})",
                error_code="thread_busy",
                remedy=Remedy(
                    summary="A `goal run` in a terminal holds this goal's thread.",
                    next_action="Press Ctrl-C there, or `loopx-chat goal stop GOAL`.",
                ),
            )
        raise StateError(f"goal {goal_id} has no running run", error_code="run_not_found")

    def recover(self) -> list[str]:
        """Take up every run whose process died while its goal ran; the run ids."""
        goals = self.runner.goals
        recovered: list[str] = []
        for goal_id in goals.goal_ids():
            try:
                run = self.runner.runs.latest(goal_id)
                if run is None or not run.live or pid_alive(run.pid):
                    continue
                if self.runner.records.stopped(goal_id) is not None:
                    continue  # the owner withdrew it: never restarted
                session = self.runner.controller.store.load(run.session_id)
            except LoopxChatError:
                continue
            plan = RunPlan(
                goal_id,
                session,
                run.token_budget,
                RunObjective("", run.objective_source, ""),
                run.approval_policy,  # the resume that recovers it carries the run's policy
                max_turns=run.max_turns,
                resume_after_usage_limit=run.resume_after_usage_limit,
            )
            follow = self.runner.follower(run, plan, recovering=True)
            with self._lock:
                held = self.registry.background_runs()
                if goal_id in held or len(held) >= self.max_running:
                    continue
                self._launch(follow)
            recovered.append(run.run_id)
        return recovered

    def close(self) -> None:
        """Shutdown: every run this process follows is paused and its turn recorded."""
        with self._lock:
            self.closed = True
            held = list(self.registry.background_runs().values())
        for follow, _ in held:
            follow.stop()
        grace = self.runner.controller.config.timeouts.interrupt_settle + 2
        for _, thread in held:
            thread.join(timeout=grace)

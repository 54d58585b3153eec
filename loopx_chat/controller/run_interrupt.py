"""The owner's `chat interrupt` of a goal run's continuation turn: what became of its run.

Owns the answer's run once the turn was asked to stop (`ChatController.interrupt`): a run
this process follows took the ask from its inbox, and is waited for on its follower's
thread (nothing of its own process is read back from a file); a run another live process
follows, through its `ended` record (`run_block.await_end`); and a run whose process is
gone (recorded running, its pid dead: what `RunPool.recover` takes up again), whose turn
was only settled: nothing would stop it, and the next service start would resume it, so
the owner's interrupt is recorded on it here, as its own process would have: the host goal
set `paused` (through an app-server that loads no thread, under the thread's writer lock,
which a recovery takes too) and the run `ended` paused, `reason: turn_interrupted_by_owner`.

It never interrupts a turn itself, never sets a goal but to `paused`, and never follows a
run.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from loopx_chat.controller.loop_follower import OWNER_INTERRUPT
from loopx_chat.controller.thread_lock import ThreadWriterLock
from loopx_chat.errors import CodexError, Remedy
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_runs import GoalRun, GoalRuns, exit_code_for
from loopx_chat.goals.run_block import await_end
from loopx_chat.pids import pid_alive

if TYPE_CHECKING:
    from loopx_chat.controller.chat_controller import ChatController
    from loopx_chat.state.session_records import SessionRecord, TurnRecord


def run_after_interrupt(controller: ChatController, turn: TurnRecord) -> GoalRun | None:
    """The run of `turn` (a continuation turn of a goal run, just asked to stop) as recorded
    once it ended, waited for (bounded); None when the turn had ended already and its run
    goes on, or is over. `interrupt_not_acknowledged` when its live process did not say."""
    assert turn.run_id is not None
    goals = GateStore(controller.store.root)
    session = controller.store.load(turn.session_id)
    goal_id = session.goal_id
    if turn.status != "running":
        return _dead_run_paused(controller, goals, session, turn)
    timeouts = controller.config.timeouts
    wait = timeouts.request + timeouts.interrupt_settle
    follower = controller.running_goals.on_session(turn.session_id)
    if follower is not None and follower.ours is not None:
        # Its follower took the ask from its inbox: its thread ends with the run.
        thread = follower.follower_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait)
        run = GoalRuns(goals).run(goal_id, turn.run_id)
    else:
        run = await_end(goals, goal_id, turn.run_id, timeout=wait)
    if run.live and run.pid is not None and pid_alive(run.pid):
        raise CodexError(
            f"goal {goal_id}'s run {run.run_id} (pid {run.pid}) did not stop turn "
            f"{turn.turn_id} within {wait:g} s",
            error_code="interrupt_not_acknowledged",
            remedy=Remedy(
                summary="The process running the goal has not taken the interrupt yet; "
                "it stays asked until it does.",
                next_action=f"Watch it with `loopx-chat goal follow {goal_id}`, or stop "
                f"the goal with `loopx-chat goal stop {goal_id}`.",
            ),
        )
    return run


def _dead_run_paused(
    controller: ChatController, goals: GateStore, session: SessionRecord, turn: TurnRecord
) -> GoalRun | None:
    """The turn was settled here (nobody ran it). When its run is still recorded running and
    its process is gone, the owner's interrupt ends it: host goal `paused`, run `ended`."""
    assert turn.run_id is not None
    goal_id, runs = session.goal_id, GoalRuns(goals)
    if not _dead(runs.run(goal_id, turn.run_id)) or controller.holds(turn.session_id):
        return None  # over, or followed by a live process (its turn had just ended)
    if not session.upstream_thread_id:
        return None
    lock = ThreadWriterLock(
        controller.store.root, controller.binding.path, session.upstream_thread_id
    )
    try:
        lock.acquire()
    except CodexError as exc:
        raise CodexError(
            f"goal {goal_id}'s run {turn.run_id} is being taken up by another loopx-chat "
            "process (its own process is gone)",
            error_code="thread_busy",
            remedy=Remedy(
                summary="Its turn was recorded interrupted; the process taking the run up "
                "now holds its thread.",
                next_action=f"Interrupt it there: `loopx-chat chat interrupt "
                f"{turn.session_id}` again, or `loopx-chat goal stop {goal_id}`.",
            ),
        ) from exc
    try:
        run = runs.run(goal_id, turn.run_id)
        if not _dead(run):
            return None  # taken up and ended meanwhile
        from loopx_chat.codex.goal_loop import HostGoalState

        try:
            with controller.thread_metadata(turn.session_id) as call:
                goal = HostGoalState.from_wire(
                    call("thread/goal/set", {"status": "paused", "origin": "user"}).get("goal")
                )
        except CodexError as exc:
            raise _not_paused(exc, run) from exc
        from loopx_chat.controller.our_run import RunResult
        from loopx_chat.controller.run_end import compare_counts

        status = goal.status if goal is not None else None
        done = [t for t in controller.store.list_turns(turn.session_id) if t.run_id == run.run_id]
        spent = sum(t.tokens.total_tokens for t in done)
        base = run.host_tokens_before()
        host = None if goal is None or base is None else max(0, goal.tokens_used - base)
        facts, differences = compare_counts(controller, session, spent, host)
        result = RunResult(
            run=run,
            host=goal,
            turns=len(done),
            ledger_tokens=spent,
            host_tokens=host,
            facts=facts,
            differences=differences,
            exit_code=exit_code_for(status),
        )
        return runs.note(
            goal_id,
            run.run_id,
            "ended",
            host_status=status,
            tokens_used=goal.tokens_used if goal is not None else None,
            run_tokens=spent,
            turns=len(done),
            by=OWNER_INTERRUPT.by,
            reason=OWNER_INTERRUPT.reason,
            process_gone=True,  # recorded by `chat interrupt`, not the run's own process
            result=result.summary(),
        )
    finally:
        lock.release()


def _not_paused(exc: CodexError, run: GoalRun) -> CodexError:
    """Codex could not be reached to pause a dead run's goal: the run stays recorded running
    (the next service start takes it up), which `goal stop` prevents without codex."""
    return CodexError(
        f"goal {run.goal_id}'s run {run.run_id} was not paused: {exc.message}",
        error_code=exc.error_code,
        remedy=Remedy(
            summary="Its turn was recorded interrupted, but the goal could not be paused in "
            "Codex, so the run is still recorded running and the next `loopx-chat serve` "
            "would take it up again.",
            next_action=f"Keep it from being taken up, without Codex: `loopx-chat goal stop "
            f"{run.goal_id}` (`goal resume {run.goal_id}` undoes it); `loopx-chat home "
            "check` says what is wrong with Codex.",
        ),
    )


def _dead(run: GoalRun) -> bool:
    """Recorded running, and its process is gone: what a service start takes up again."""
    return run.live and run.pid != os.getpid() and not pid_alive(run.pid)

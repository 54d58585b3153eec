"""The owner's `chat interrupt` of a goal run's continuation turn: what became of its run.

Owns the answer's run once the turn was asked to stop (`ChatController.interrupt`): a run
this process follows took the ask from its inbox, and is waited for on its follower's
thread (nothing of its own process is read back from a file); a run another live process
follows, through its `ended` record (`run_block.await_end`); and a run whose process is
gone (recorded running, its pid dead: what `RunPool.recover` takes up again), whose turn
was only settled: nothing would stop it, and the next service start would resume it, so
the owner's interrupt is recorded on it here, as its own process would have: the host goal
set `paused` (through an app-server that loads no thread, under the thread's writer lock,
which a recovery takes too) and the run `ended` paused, `reason: turn_interrupted_by_owner`;
also one that died between turns (no turn runs), or whose loop a resume in this process
restarted (its turns are then a loop's with no run). A thread of such a run that this
process holds is let go first, as the run's death let it go; a run this process is taking
up (a service start's recovery) is asked through its inbox, as a run followed here is.

It never interrupts a turn itself (closing a thread it lets go ends codex's turn there),
never sets a goal but to `paused`, and never follows a run.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from loopx_chat.controller.loop_follower import OWNER_INTERRUPT, LoopFollower
from loopx_chat.controller.thread_lock import ThreadWriterLock
from loopx_chat.errors import CodexError, LoopxChatError, Remedy
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_runs import GoalRun, GoalRuns, exit_code_for
from loopx_chat.goals.run_block import await_end
from loopx_chat.pids import pid_alive

if TYPE_CHECKING:
    from loopx_chat.controller.chat_controller import ChatController
    from loopx_chat.state.session_records import SessionRecord, TurnRecord


def run_after_interrupt(
    controller: ChatController, session_id: str, turn: TurnRecord | None
) -> GoalRun | None:
    """The run the owner's interrupt of `turn` stopped (None: no turn ran), as recorded once
    it ended, waited for (bounded). A continuation turn of a goal run: its run; None when
    the turn had ended already and its run goes on, or is over. No turn running, or a loop's
    turn with no run on a thread this process holds (a resume here restarted codex's loop):
    the session's goal's run recorded running on it whose process is gone, paused as one
    that died in a turn is; None when there is none (a live run is left as it is).
    `interrupt_not_acknowledged` when a run's live process did not say."""
    session = controller.store.load(session_id)
    if turn is not None and turn.run_id is not None:
        if turn.status != "running":
            return _dead_run_paused(controller, session, turn.run_id)
        return _awaited(controller, session, turn.run_id, turn.turn_id)
    if turn is not None and not controller.holds(session_id):
        return None  # a loop's turn another process runs: only that turn is stopped
    try:
        run = GoalRuns(GateStore(controller.store.root)).latest(session.goal_id)
    except LoopxChatError:
        return None  # no run record to read: the answer is the turn's, as before
    if run is None or run.session_id != session_id or not _dead(run):
        return None
    return _dead_run_paused(controller, session, run.run_id)


def _awaited(
    controller: ChatController, session: SessionRecord, run_id: str, turn_id: str
) -> GoalRun:
    """The run, asked to stop `turn_id`, once it ended (bounded): a run this process follows
    through its follower's thread, one another process follows through its `ended` record."""
    goals, goal_id = GateStore(controller.store.root), session.goal_id
    timeouts = controller.config.timeouts
    wait = timeouts.request + timeouts.interrupt_settle
    follower = controller.running_goals.on_session(session.session_id)
    if follower is not None and follower.ours is not None:
        # Its follower took the ask from its inbox: its thread ends with the run.
        thread = follower.follower_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait)
        run = GoalRuns(goals).run(goal_id, run_id)
    else:
        run = await_end(goals, goal_id, run_id, timeout=wait)
    if run.live and run.pid is not None and pid_alive(run.pid):
        raise CodexError(
            f"goal {goal_id}'s run {run.run_id} (pid {run.pid}) did not stop turn "
            f"{turn_id} within {wait:g} s",
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
    controller: ChatController, session: SessionRecord, run_id: str
) -> GoalRun | None:
    """Nobody runs the run's turn (settled here) or none was running. When it is still
    recorded running and its process is gone, the owner's interrupt ends it: host goal
    `paused`, run `ended`; a run this process is taking up is asked to, as any run here."""
    goal_id, runs = session.goal_id, GoalRuns(GateStore(controller.store.root))
    if not _dead(runs.run(goal_id, run_id)) or not session.upstream_thread_id:
        return None  # over, or its process lives (its turn had just ended)
    follower = controller.running_goals.on_session(session.session_id)
    if follower is not None and follower.ours is not None:
        return _asked_of_recovery(controller, session, run_id, follower)
    if controller.holds(session.session_id):
        _let_go(controller, session, follower)
    lock = ThreadWriterLock(
        controller.store.root, controller.binding.path, session.upstream_thread_id
    )
    try:
        lock.acquire()
    except CodexError as exc:
        raise CodexError(
            f"goal {goal_id}'s run {run_id} is being taken up by another loopx-chat "
            "process (its own process is gone)",
            error_code="thread_busy",
            remedy=Remedy(
                summary="The process taking the run up (or running a command on it) now "
                "holds its thread.",
                next_action=f"Interrupt it there: `loopx-chat chat interrupt "
                f"{session.session_id}` again, or `loopx-chat goal stop {goal_id}`.",
            ),
        ) from exc
    try:
        run = runs.run(goal_id, run_id)
        if not _dead(run):
            return None  # taken up and ended meanwhile
        from loopx_chat.codex.goal_loop import HostGoalState

        try:
            with controller.thread_metadata(session.session_id) as call:
                goal = HostGoalState.from_wire(
                    call("thread/goal/set", {"status": "paused", "origin": "user"}).get("goal")
                )
        except CodexError as exc:
            raise _not_paused(exc, run) from exc
        from loopx_chat.controller.our_run import RunResult
        from loopx_chat.controller.run_end import compare_counts

        status = goal.status if goal is not None else None
        done = [
            t for t in controller.store.list_turns(session.session_id) if t.run_id == run.run_id
        ]
        spent = sum(t.tokens.total_tokens for t in done)
        host = run.host_run_tokens(goal.tokens_used) if goal is not None else None
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


def _asked_of_recovery(
    controller: ChatController, session: SessionRecord, run_id: str, follower: LoopFollower
) -> GoalRun | None:
    """This process is taking the dead run up (a service start's recovery; its `recovered`
    record not written yet): the ask goes to its inbox, naming its last turn, which it
    counts as its loop's, and it ends paused as a run followed here does. None when this
    process follows another run there, or the run has no turn to name."""
    done = [t for t in controller.store.list_turns(session.session_id) if t.run_id == run_id]
    if follower.our_run().record.run_id != run_id or not done:
        return None
    follower.ask_interrupt(done[-1].turn_id)
    return _awaited(controller, session, run_id, done[-1].turn_id)


def _let_go(
    controller: ChatController, session: SessionRecord, follower: LoopFollower | None
) -> None:
    """This process holds the dead run's thread (a resume here restarted codex's loop on it)
    and no run of ours follows it: it is let go as the run's death let it go, then paused as
    any dead run is. A loop loopx-chat did not start followed on it (the service's) is let
    go first (its open turn recorded interrupted), what codex ran on it meanwhile is
    recorded, and closing its app-server ends codex's turn."""
    if follower is not None:  # the goal's one follower here: its loop is on this thread
        timeouts = controller.config.timeouts
        for foreign, thread in controller.running_goals.let_go(session.goal_id):
            foreign.let_go()
            thread.join(timeouts.request + timeouts.interrupt_settle)
    controller.record_host_loop_turns(session.session_id)
    controller.drop_thread(session.session_id)


def _not_paused(exc: CodexError, run: GoalRun) -> CodexError:
    """Codex could not be reached to pause a dead run's goal: the run stays recorded running
    (the next service start takes it up), which `goal stop` prevents without codex."""
    return CodexError(
        f"goal {run.goal_id}'s run {run.run_id} was not paused: {exc.message}",
        error_code=exc.error_code,
        remedy=Remedy(
            summary="The goal could not be paused in Codex, so the run is still recorded "
            "running and the next `loopx-chat serve` would take it up again.",
            next_action=f"Keep it from being taken up, without Codex: `loopx-chat goal stop "
            f"{run.goal_id}` (`goal resume {run.goal_id}` undoes it); `loopx-chat home "
            "check` says what is wrong with Codex.",
        ),
    )


def _dead(run: GoalRun) -> bool:
    """Recorded running, and its process is gone: what a service start takes up again."""
    return run.live and run.pid != os.getpid() and not pid_alive(run.pid)

"""The goal loops loopx-chat did not start, followed in a long-lived process (the service).

When the service loads a thread (its warm hold, a resume, a chat turn) whose host goal is
`active` with no run authorization of ours, codex continues it at once. This module owns
following such a loop while the service holds the thread (the one follower of goal loops,
`loop_follower.LoopFollower`, in its mode for a loop not ours, on a worker of its own, kept
in the controller's one registry, `running_goals`): each continuation turn goes into the
turn ledger like any other (`origin: goal_loop`, no run), and the thread stays loaded while
the loop runs. It also owns the owner's Pause of such a loop (the host goal set `paused`,
recorded with its actor) and letting a loop go (a Run adopts it; the service stops: a turn
still open is recorded interrupted, since closing the thread ends it).

It never changes the host goal by itself: only the owner's Pause (the card's, or a `goal
stop` in force, the owner's recorded "no automatic turn") sets anything, and only `paused`.
It never decides that a loop may run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.loop_follower import LoopFollower, LoopTurns, StopRules
from loopx_chat.errors import LoopxChatError, StateError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import GoalRuns
from loopx_chat.state.file_change import FileChange

HAND_OVER_WAIT_SEC = 5.0  # how long a Run waits for the foreign loop's running turn
STOP_LOOK_SEC = 0.2  # how often a followed loop's `goal stop` record is looked at (a stat)


class HostLoops:
    """The loops loopx-chat did not start that this process follows (in `running_goals`)."""

    def __init__(self, controller: ChatController, goals: GateStore) -> None:
        self.controller = controller
        self.registry = controller.running_goals
        self.runs = GoalRuns(goals)
        self.records = GoalLedger(goals)

    def take_up(self) -> None:
        """Follow every loop the controller saw while loading a thread (after any call that
        may have loaded one)."""
        notices = self.controller.host_loop_notices
        with self.registry.lock:
            while notices:
                session_id = notices.pop(0)
                try:
                    goal_id = self.controller.store.load(session_id).goal_id
                except LoopxChatError:
                    continue
                follower = LoopFollower(
                    LoopTurns(self.controller.turns, session_id),
                    StopRules(
                        quiet_sec=self.controller.config.timeouts.idle,
                        loop_ended=True,
                        hand_over_sec=HAND_OVER_WAIT_SEC,
                        stop_look_sec=STOP_LOOK_SEC,
                    ),
                    record_pause=partial(self._record_pause, goal_id, session_id),
                    stopped_by=self._stop_look(goal_id),
                )
                thread = threading.Thread(
                    target=self._follow,
                    args=(session_id, follower),
                    name=f"host-loop-{goal_id}",
                    daemon=True,
                )
                if self.registry.background(goal_id, follower, thread, foreign=True):
                    thread.start()

    def _follow(self, session_id: str, follower: LoopFollower) -> None:
        from loopx_chat.codex.goal_loop import GoalLoopWatch

        controller = self.controller
        try:
            with controller.held_thread(session_id) as warm:
                follower.loop.warm = warm
                follower.loop.desk = controller.host_requests
                watch = GoalLoopWatch(warm.thread)
                follower.follow(watch, watch.get())
        except LoopxChatError as exc:
            follower.error = exc
        finally:
            follower.done.set()
            follower.answered.set()

    def _stop_look(self, goal_id: str) -> Callable[[], str | None]:
        """The actor of a `goal stop` in force, read only when the record's stat moved (it
        is written by the CLI, another process: nothing tells this one)."""
        record = FileChange(self.records.lifecycle_path(goal_id))

        def look() -> str | None:
            if not record.moved():
                return None
            try:
                stopped = self.records.stopped(goal_id)
            except LoopxChatError:
                record.seen = None  # not read: the next look reads it again
                raise
            return None if stopped is None else str(stopped.get("actor", "owner"))

        return look

    def _record_pause(
        self, goal_id: str, session_id: str, actor: str, host_status: str
    ) -> dict[str, Any]:
        record = self.controller.store.load(session_id)
        return self.runs.record_host_loop_paused(
            goal_id, session_id, record.upstream_thread_id, actor=actor, host_status=host_status
        )

    def pause(self, goal_id: str, *, actor: str) -> dict[str, Any]:
        """The owner's Pause of a loop loopx-chat did not start: the host goal is set
        `paused` (by the process that holds the thread, or, when none does, through an
        app-server that loads no thread), recorded with `actor`; the running turn finishes
        and is recorded. `run_not_found` when no such loop was seen since the last run."""
        follower, _ = self.registry.background_runs(foreign=True).get(goal_id, (None, None))
        if follower is not None:
            paused = follower.pause(actor, timeout=30)
            if paused is not None:
                return paused
            if follower.error is not None:
                raise follower.error
        return self._pause_unloaded(goal_id, actor)

    def _pause_unloaded(self, goal_id: str, actor: str) -> dict[str, Any]:
        seen = self.runs.host_loop_seen(goal_id)
        run = self.runs.latest(goal_id)
        if seen is None or (run is not None and run.authorized_at >= str(seen.get("at"))):
            raise StateError(
                f"goal {goal_id} has no running run and no loop loopx-chat did not start",
                error_code="run_not_found",
            )
        session_id = str(seen["session_id"])
        with self.controller.thread_metadata(session_id) as call:
            goal = call("thread/goal/set", {"status": "paused", "origin": "user"}).get("goal")
        status = goal.get("status") if isinstance(goal, dict) else None
        return self._record_pause(goal_id, session_id, actor, str(status or "unknown"))

    def let_go(self, goal_id: str) -> str | None:
        """Stop following the goal's loop (a Run adopts it): the host goal is untouched;
        the session id it was followed on, or None when none was."""
        for follower, thread in self.registry.let_go(goal_id):
            if not follower.done.is_set():
                follower.let_go(hand_over=True)
                thread.join(timeout=HAND_OVER_WAIT_SEC + 5)
                return follower.loop.session_id
        return None

    def follow_again(self, session_id: str) -> None:
        """A Run that adopted the loop was refused: follow it again as before."""
        self.controller.host_loop_notices.append(session_id)
        self.take_up()

    def close(self) -> None:
        """Shutdown: every loop followed here is let go (the host goal untouched)."""
        held = self.registry.let_go(None)
        for follower, _ in held:
            follower.let_go()
        for _, thread in held:
            thread.join(timeout=HAND_OVER_WAIT_SEC + 5)

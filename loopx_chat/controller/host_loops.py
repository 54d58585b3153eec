"""The goal loops loopx-chat did not start, followed in a long-lived process (the service).

When the service loads a thread (its warm hold, a resume, a chat turn) whose host goal is
`active` with no run authorization of ours, codex continues it at once. This module owns
following such a loop while the service holds the thread: each continuation turn goes into
the turn ledger like any other (`origin: goal_loop`, no run), and the thread stays loaded
while the loop runs. It also owns the owner's Pause of such a loop (the host goal set
`paused`, recorded with its actor) and letting a loop go (a Run adopts it; the service
stops: a turn still open is recorded interrupted, since closing the thread ends it).

It never changes the host goal by itself: only the owner's Pause (the card's, or a `goal
stop` in force, the owner's recorded "no automatic turn") sets anything, and only `paused`.
It never decides that a loop may run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.errors import CodexError, LoopxChatError, StateError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import GoalRuns

HAND_OVER_WAIT_SEC = 5.0  # how long a Run waits for the foreign loop's running turn
STOP_LOOK_SEC = 0.2  # how often a followed loop's goal is checked for `goal stop`


@dataclass
class _Followed:
    goal_id: str
    session_id: str
    thread: threading.Thread | None = None
    pause_by: str | None = None  # the owner asked to pause it (the actor)
    paused: dict[str, Any] | None = None  # the record of that Pause, once codex answered
    error: LoopxChatError | None = None
    let_go: threading.Event = field(default_factory=threading.Event)
    hand_over: bool = False  # let go for a Run: its running turn may end on its own record
    done: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)  # the Pause was handled


class HostLoops:
    """The loops loopx-chat did not start that this process follows, by goal."""

    def __init__(self, controller: ChatController, goals: GateStore) -> None:
        self.controller = controller
        self.runs = GoalRuns(goals)
        self.records = GoalLedger(goals)
        self._followed: dict[str, _Followed] = {}
        self._lock = threading.Lock()
        self.closed = False

    def following(self) -> dict[str, str]:
        """goal id -> session id of the loops this process follows now."""
        with self._lock:
            return {g: f.session_id for g, f in self._followed.items() if not f.done.is_set()}

    def follows(self, session_id: str) -> bool:
        """True while this process follows a loop it did not start on the session's thread."""
        with self._lock:
            return any(
                f.session_id == session_id and not f.done.is_set() for f in self._followed.values()
            )

    def take_up(self) -> list[str]:
        """Follow every loop the controller saw while loading a thread (after any call that
        may have loaded one); the session ids taken up."""
        taken: list[str] = []
        with self._lock:
            while self.controller.host_loop_notices:
                session_id = self.controller.host_loop_notices.pop(0)
                if self.closed:
                    continue
                try:
                    goal_id = self.controller.store.load(session_id).goal_id
                except LoopxChatError:
                    continue
                held = self._followed.get(goal_id)
                if held is not None and not held.done.is_set():
                    continue
                followed = _Followed(goal_id, session_id)
                followed.thread = threading.Thread(
                    target=self._follow, args=(followed,), name=f"host-loop-{goal_id}", daemon=True
                )
                self._followed[goal_id] = followed
                followed.thread.start()
                taken.append(session_id)
        return taken

    def _follow(self, followed: _Followed) -> None:
        from loopx_chat.codex.goal_loop import GoalLoopWatch
        from loopx_chat.controller.loop_turns import LoopTurns

        controller = self.controller
        idle = controller.config.timeouts.idle
        try:
            with controller.held_thread(followed.session_id) as warm:
                watch = GoalLoopWatch(warm.thread)
                loop = LoopTurns(controller.turns, followed.session_id, warm)
                goal = watch.get()
                last_event = time.monotonic()
                next_look = 0.0
                try:
                    while not followed.let_go.is_set():
                        if time.monotonic() >= next_look:
                            next_look = time.monotonic() + STOP_LOOK_SEC
                            self._pause_if_stopped(followed)
                        if followed.pause_by is not None and followed.paused is None:
                            goal = watch.set("paused")
                            followed.paused = self._record_pause(followed, goal.status)
                            followed.asked.set()
                        event = watch.next_event(timeout=0.05)
                        if event is not None:
                            last_event = time.monotonic()
                            if event.kind == "goal_updated" and event.goal is not None:
                                goal = event.goal
                            loop.on(event)
                            if event.kind == "turn_ended":
                                # Codex forgets what it asked in that turn: so does the desk.
                                controller.host_requests.turn_ended(warm.thread.thread_id)
                        ended = goal is None or goal.status != "active"
                        quiet = time.monotonic() - last_event > idle
                        if (
                            not loop.open_turns
                            and watch.running_turn_id is None
                            and (ended or quiet)
                        ):
                            break  # the loop ended, or codex stopped continuing it
                finally:
                    if followed.hand_over and loop.open_turns:
                        self._wait_for_turn(watch, loop)
                    loop.settle()
        except LoopxChatError as exc:
            followed.error = exc
        finally:
            followed.done.set()
            followed.asked.set()

    def _pause_if_stopped(self, followed: _Followed) -> None:
        """`goal stop` is the owner's recorded "no automatic turn": a loop codex runs on the
        goal's thread while it is in force is paused like the card's Pause, with the actor
        of the stop. Read between notifications; an unreadable record changes nothing."""
        if followed.pause_by is not None:
            return
        try:
            stopped = self.records.stopped(followed.goal_id)
        except LoopxChatError:
            return
        if stopped is not None:
            followed.pause_by = f"{stopped.get('actor', 'owner')} (goal stop)"

    @staticmethod
    def _wait_for_turn(watch: Any, loop: Any) -> None:
        """Letting go: the running turn gets a moment to end on its own record."""
        deadline = time.monotonic() + HAND_OVER_WAIT_SEC
        while loop.open_turns and time.monotonic() < deadline:
            with contextlib.suppress(CodexError):
                event = watch.next_event(timeout=0.05)
                if event is not None:
                    loop.on(event)

    def _record_pause(self, followed: _Followed, host_status: str) -> dict[str, Any]:
        record = self.controller.store.load(followed.session_id)
        return self.runs.record_host_loop_paused(
            followed.goal_id,
            followed.session_id,
            record.upstream_thread_id,
            actor=str(followed.pause_by),
            host_status=host_status,
        )

    def pause(self, goal_id: str, *, actor: str) -> dict[str, Any]:
        """The owner's Pause of a loop loopx-chat did not start: the host goal is set
        `paused` (by the process that holds the thread, or, when none does, through an
        app-server that loads no thread), recorded with `actor`; the running turn finishes
        and is recorded. `run_not_found` when no such loop was seen since the last run."""
        with self._lock:
            followed = self._followed.get(goal_id)
        if followed is not None and not followed.done.is_set():
            followed.pause_by = actor
            followed.asked.wait(timeout=30)
            if followed.paused is not None:
                return followed.paused
            if followed.error is not None:
                raise followed.error
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
        thread_id = self.controller.store.load(session_id).upstream_thread_id
        return self.runs.record_host_loop_paused(
            goal_id, session_id, thread_id, actor=actor, host_status=str(status or "unknown")
        )

    def let_go(self, goal_id: str) -> str | None:
        """Stop following the goal's loop (a Run adopts it): the host goal is untouched;
        the session id it was followed on, or None when none was."""
        with self._lock:
            followed = self._followed.pop(goal_id, None)
        if followed is None or followed.thread is None or followed.done.is_set():
            return None
        followed.hand_over = True
        followed.let_go.set()
        followed.thread.join(timeout=HAND_OVER_WAIT_SEC + 5)
        return followed.session_id

    def follow_again(self, session_id: str) -> None:
        """A Run that adopted the loop was refused: follow it again as before."""
        self.controller.host_loop_notices.append(session_id)
        self.take_up()

    def close(self) -> None:
        """Shutdown: every loop followed here is let go (the host goal untouched)."""
        with self._lock:
            self.closed = True
            held = list(self._followed.values())
        for followed in held:
            followed.let_go.set()
        for followed in held:
            if followed.thread is not None:
                followed.thread.join(timeout=HAND_OVER_WAIT_SEC + 5)

"""The goal loops this process follows, and the one seam every gate-recording path here calls.

Owns the per-process registry (one per `ChatController`): by goal id, the one follower of
the goal's loop (`loop_follower.LoopFollower`), of either kind. A run of ours while it
follows its goal (`following`), and one started on a thread of its own (the service's
`RunPool`) from its start until that thread ends (`background`, `background_runs`); a loop
loopx-chat did not start (the service's `HostLoops`, on a thread of its own), held as
`foreign`, which no gate reaches, until it is let go (`let_go`). A goal has one follower
here at a time. Neither caller keeps a list of its own; whether this process follows a loop
on a session, and which follower, is asked here (`follows_session`, `on_session`: the
owner's `chat interrupt` of a loop's turn goes to that follower's inbox). A gate opened or
decided in this process (the service's `POST /api/goals/G/gates` and decisions, a host
request codex sent) asks that run to look at the goal's gates now (a record in the run's
inbox) and waits until it has: the host goal is `blocked` (a turn started since the gate
interrupted), or `active` again, or paused on a rejection, before the recording call
returns to its caller. A host gate
codex's request became is only put in the inbox (`gate_posted`): codex's reader never waits
on a run. A run another process follows (a foreground `goal run`) is waited for through the
goal's run log instead (`goals.run_block`). No gate reaches a loop loopx-chat did not start.

It never sets a goal and never talks to Codex itself: the follower does, on its own thread,
so the two never race over the host goal.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded only once a gate is recorded: every controller makes a registry
    from loopx_chat.controller.loop_follower import LoopFollower
    from loopx_chat.goals.gate_store import Gate, GateStore
    from loopx_chat.goals.run_block import RunBlock


@dataclass
class _Held:
    follower: LoopFollower
    thread: threading.Thread | None  # set for a follower started on a thread of its own
    following: bool  # a run inside its `following` block: gates recorded here ask it
    foreign: bool = False  # a loop loopx-chat did not start: no gate asks it

    def live(self) -> bool:
        """Still following: a loop not ours until its follow is over, a run of ours while
        it follows or its thread has not ended."""
        if self.foreign:
            return not self.follower.done.is_set()
        if self.following or self.thread is None:
            return self.following
        return self.thread.ident is None or self.thread.is_alive()  # not started yet, or runs


class RunningGoals:
    """The loops this process follows by goal id, one follower each; thread-safe."""

    def __init__(self) -> None:
        # Re-entrant: `HostLoops.take_up` takes loops up as one step under it.
        self.lock = threading.RLock()
        self._held: dict[str, _Held] = {}
        self.closed = False  # shutting down: no loop loopx-chat did not start is taken up

    @contextmanager
    def following(self, goal_id: str, follower: LoopFollower) -> Iterator[None]:
        with self.lock:
            held = self._held.get(goal_id)
            if held is not None and held.follower is follower:
                held.following = True
            else:
                held = self._held[goal_id] = _Held(follower, None, True)
        try:
            yield
        finally:
            with self.lock:
                held.following = False
                if held.thread is None and self._held.get(goal_id) is held:
                    del self._held[goal_id]

    def background(
        self, goal_id: str, follower: LoopFollower, thread: threading.Thread, foreign: bool = False
    ) -> bool:
        """A follower about to start on `thread`: a run of ours, held until that thread ends;
        with `foreign`, a loop loopx-chat did not start, held until let go, unless the goal
        is followed here already or the process is shutting down; whether it was held."""
        with self.lock:
            held = self._held.get(goal_id)
            if foreign and (self.closed or (held is not None and held.live())):
                return False
            self._held[goal_id] = _Held(follower, thread, False, foreign)
            return True

    def background_runs(
        self, foreign: bool = False
    ) -> dict[str, tuple[LoopFollower, threading.Thread]]:
        """The runs started on threads of their own whose thread still runs, by goal
        (`foreign`: the loops loopx-chat did not start, until their follow is over)."""
        with self.lock:
            for goal_id, held in list(self._held.items()):
                if not held.foreign and held.thread is not None and not held.thread.is_alive():
                    del self._held[goal_id]  # ended: its `following` block is over too
            return {
                goal_id: (held.follower, held.thread)
                for goal_id, held in self._kind(foreign).items()
                if held.thread is not None
            }

    def _kind(self, foreign: bool) -> dict[str, _Held]:
        """Runs of ours, or the loops loopx-chat did not start, that still follow."""
        return {
            goal_id: held
            for goal_id, held in self._held.items()
            if held.foreign == foreign and held.live()
        }

    def follower(self, goal_id: str) -> LoopFollower | None:
        with self.lock:
            held = self._held.get(goal_id)
            return held.follower if held is not None and held.following else None

    def follows_session(self, session_id: str, *, foreign: bool = False) -> bool:
        """Whether a run of this process follows the loop on this session's thread (a loaded
        thread whose goal is active is then ours, not foreign); with `foreign`, whether a
        loop loopx-chat did not start is followed there."""
        with self.lock:
            return any(
                held.follower.loop.session_id == session_id and (foreign or held.following)
                for held in self._kind(foreign).values()
            )

    def on_session(self, session_id: str) -> LoopFollower | None:
        """The follower, of either kind, of the loop this process follows on the session's
        thread now, or None."""
        with self.lock:
            return next(
                (
                    held.follower
                    for held in self._held.values()
                    if held.live() and held.follower.loop.session_id == session_id
                ),
                None,
            )

    def let_go(self, goal_id: str | None) -> list[tuple[LoopFollower, threading.Thread]]:
        """Take the goal's loop loopx-chat did not start out of the registry (None: every
        one, and none is taken up after: shutdown); the follower is to let it go."""
        with self.lock:
            self.closed = self.closed or goal_id is None
            gone = [g for g, h in self._held.items() if h.foreign and goal_id in (None, g)]
            return [(h.follower, h.thread) for h in map(self._held.pop, gone) if h.thread]

    def gate_opened(self, gate: Gate) -> RunBlock | None:
        """A gate was just recorded: the run here blocks the host goal before this returns.
        None when no run of this process follows the goal."""
        follower = self.follower(gate.goal_id)
        if follower is None:
            return None
        if not gate.blocking:
            from loopx_chat.goals.run_block import ADVISORY, RunBlock

            return RunBlock(None, ADVISORY)
        return follower.our_run().gates.look_now(gate.gate_id)

    def gate_posted(self, gate: Gate) -> None:
        """A host gate codex's request became, on the app-server's reader: put in the run's
        inbox (in order after codex's notifications before it), never waited on."""
        follower = self.follower(gate.goal_id)
        if follower is not None and gate.blocking:
            follower.post_gate(gate.gate_id)

    def gate_decided(self, goal_id: str, gate_id: str | None = None) -> None:
        """A gate of the goal was decided: the run here sets the goal `active` again (the
        last blocking one approved) or pauses it (one rejected) before this returns. With
        `gate_id`, the desk is about to answer codex for it after its window passed: the run
        takes every input before it first (the gate's own) and holds the goal `blocked`, so
        codex never ends that turn on an `active` goal and starts a continuation (seen under
        load twice: the run had not taken the gate yet; the run set `blocked` only once it
        saw the window had passed). Bounded, as `look_now` is; no run here: nothing to wait
        for."""
        follower = self.follower(goal_id)
        if follower is not None:
            follower.our_run().gates.look_now(gate_id, window_passed=gate_id is not None)

    def after_gate(self, goals: GateStore, gate: Gate) -> RunBlock:
        """What the gate did to the goal's run: this process's run blocked it at once, or
        the run another process follows acknowledged it (a bounded wait), or no run."""
        from loopx_chat.goals.run_block import await_block

        here = self.gate_opened(gate)
        return here if here is not None else await_block(goals, gate)

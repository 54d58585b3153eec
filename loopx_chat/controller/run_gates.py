"""A goal run's gates and stop record, looked at between inputs: `RunGates`, a run's `Looks`.

Owns: a blocking gate opened anywhere sets the host goal `blocked` and interrupts a turn
started after it; approving the last sets it `active` again (with the carried objective when
a host gate was decided after codex stopped waiting); a rejected one, `goal stop` or the
owner's Pause pause the run (its turn finishes); the service stopping, or the owner's `chat
interrupt` of its turn (from any process), ends it at once. A host
gate codex asked on a turn it holds open blocks the run but leaves the goal `active` (codex's
wait holds its loop); its decision is delivered as codex's answer, never carried. When its
window passes first, the goal is held `blocked` before the desk answers codex. The caller
that recorded or decided a gate here is told what became of it (`look_now`).

It never decides a gate, writes records only through `GoalRuns.note`, never starts a turn.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from loopx_chat.controller.goal_run_checks import person_gates
from loopx_chat.controller.loop_follower import OWNER_INTERRUPT, Stop
from loopx_chat.controller.run_inbox import Answer, GateDecided, GateOpened, RunInput
from loopx_chat.controller.run_states import BLOCKED as BLOCKED_STATE
from loopx_chat.errors import LoopxChatError, StateError
from loopx_chat.goals.run_block import BLOCKED, NOT_ACKNOWLEDGED, RUN_ENDING, RunBlock
from loopx_chat.state.file_change import FileChange

if TYPE_CHECKING:
    from loopx_chat.codex.goal_loop import HostGoalState
    from loopx_chat.controller.our_run import OurRun
    from loopx_chat.goals.gate_store import Gate as OwnerGate

GATE_DECIDED = "gate already decided"


def _codex_waits(gate: OwnerGate) -> bool:
    """A host gate whose request codex is still waiting on (its turn held open)."""
    return gate.host is not None and gate.host.get("state") == "live"


class RunGates:
    """The gates, `goal stop` and Pause of one run of ours, as the follower's `Looks`."""

    def __init__(self, run: OurRun) -> None:
        self.run = run
        self.blocked_on: list[str] = []  # gates we set `blocked` for
        self.blocked_at: str | None = None
        self.goal_blocked = False  # whether this run set the host goal `blocked` for them
        self.gates_log: FileChange | None = None  # the gate log's stat at the last look

    def changed(self) -> bool:
        """Whether the goal's gate log changed since the last look (a stat, every step: a
        gate another process recorded is acknowledged within a step, not a poll)."""
        if self.gates_log is None:
            goals = self.run.runner.goals
            self.gates_log = FileChange(goals.goal_dir(self.run.goal_id) / "gates.jsonl")
        return self.gates_log.moved()

    def blocked(self) -> bool:
        return bool(self.blocked_on)

    def waits_on_owner(self) -> bool:
        """A gate blocks the goal, or codex holds a turn open on a request to the owner."""
        if self.blocked_on:
            return True
        desk = self.run.runner.controller.host_requests
        warm = self.run.warm
        thread_id = warm.thread.thread_id if warm is not None else None
        return any(live.thread_id == thread_id for live in desk.live_gates())

    def clear(self) -> None:
        """The run is paused: a gate changes nothing now."""
        self.blocked_on = []
        self.goal_blocked = False

    # -- the look ----------------------------------------------------------------------------
    def look(self) -> Stop | None:
        """Gates and `goal stop`, read from the goal's records between notifications."""
        run, f = self.run, self.run.follower
        if f.owner_interrupted():
            return OWNER_INTERRUPT  # also while a pause lets the last turn finish
        try:
            stopped = run.runner.records.stopped(run.goal_id)
            gates = person_gates(run.runner.goals, run.goal_id)
        except StateError:
            return None  # an unreadable record is reported by status; the loop goes on
        if f.stop_requested.is_set():
            return Stop("stopped", "loopx-chat (the service stopped)", now=True)
        if run.ending_by is None and f.pause_asked is not None:
            run.wind_down("owner (Pause)")
        if stopped is not None and run.ending_by is None:  # `plan` refused a stopped goal
            run.wind_down(f"{stopped.get('actor')} (goal stop)")
        if run.ending_by is not None:
            return None  # paused: the last turn finishes, a gate changes nothing now
        new = [g for g in gates if g.gate_id not in self.blocked_on]
        if new:
            self._block(new)
        elif self.blocked_on and not gates:
            self._unblock()
        elif not self.goal_blocked and any(not _codex_waits(g) for g in gates):
            # Codex stopped waiting on a host gate the owner has not decided (the window
            # passed, its turn ended): now the goal is held blocked.
            self._hold_blocked(gates)
        return None

    def _block(self, gates: list[OwnerGate]) -> None:
        """Newly opened gates, each acknowledged by its `blocked` record (`_hold_blocked`)."""
        f = self.run.follower
        first = gates[0]
        newly = not self.blocked_on
        if newly and f.state.can("gate_opened"):
            f.state.move("gate_opened")
        self.blocked_on += [g.gate_id for g in gates]
        self.blocked_at = self.blocked_at if not newly else first.created_at
        goal = f.goal
        # Codex's own wait on a request holds its loop (no turn starts while it waits), and
        # a status set mid-turn stops codex counting that turn's tokens for the goal: the host
        # goal is set `blocked` only for a gate codex is not itself waiting on.
        if not self.goal_blocked and any(not _codex_waits(g) for g in gates):
            goal = self._hold_blocked(gates)
        self.run.note(
            "blocked",
            gate_id=first.gate_id,
            gate_ids=[g.gate_id for g in gates],
            host_status=goal.status if goal else None,
            newly=newly,
        )

    def _hold_blocked(self, gates: list[OwnerGate]) -> HostGoalState | None:
        """Set the host goal `blocked` (once) and interrupt any turn started at or after the
        first gate, except a turn that is itself waiting on a host gate (codex asked in it)."""
        f = self.run.follower
        first = gates[0]
        # Codex's reader never waits on this run (it only puts in the inbox), so the run may
        # wait for codex's answers here, whoever recorded the gate.
        goal = f.set_goal("blocked")
        self.goal_blocked = True
        asking = {str((g.host or {}).get("turn_id")) for g in gates if _codex_waits(g)}
        for upstream, turn in list(f.loop.open_turns.items()):
            if turn.created_at >= first.created_at and upstream not in asking:
                f.send_interrupt(upstream)
        return goal

    def _unblock(self) -> None:
        run, f = self.run, self.run.follower
        decided = [run.runner.goals.gate(run.goal_id, gid) for gid in self.blocked_on]
        rejected = [g for g in decided if g.status == "rejected"]
        self.blocked_on = []
        if rejected:
            reason = rejected[0].reason or f"gate {rejected[0].gate_id} rejected"
            run.wind_down("owner (gate rejected)", reason)
            return
        desk = run.runner.controller.host_requests
        # A decision on a request codex still waits on is its answer, sent now: never carried.
        desk.deliver_decided(run.goal_id)
        try:
            carried = desk.carries(run.goal_id, f.loop.session_id)
        except LoopxChatError:
            carried = []
        goal = None
        if self.goal_blocked or carried:
            goal = f.set_goal("active", objective=self._carried_objective(carried))
            if goal is not None and carried:  # codex took the objective that says them
                desk.mark_carried(run.goal_id, carried)
        self.goal_blocked = False
        f.goal = goal or f.goal
        if f.state.state == BLOCKED_STATE:
            f.state.move("gates_cleared")
        run.note(
            "unblocked",
            gate_ids=[g.gate_id for g in decided],
            host_status=f.goal.status if f.goal else None,
            **({"carried": True} if carried and goal is not None else {}),
        )

    def _carried_objective(self, carried: list[tuple[str, str]]) -> str | None:
        """A host gate decided after codex stopped waiting (the window passed, the holder
        died) reaches the next continuation turn through the goal's objective, one compact
        line each before the run's own objective, as the next chat turn gets it in its text."""
        lines = [line for _, line in carried]
        if not lines:
            return None
        # Both parts passed the record text rules already (the line is built from a gate's
        # compact facts): joined, not filtered again, so neither is cut to one record's size.
        return " ".join(lines) + " Then: " + self.run.plan.objective.text

    # -- the callers that wait on a gate -----------------------------------------------------
    def look_now(self, gate_id: str | None, *, window_passed: bool = False) -> RunBlock:
        """A thread recorded (`gate_id`) or decided (None) a gate of this goal: the run takes
        it in order and looks; what became of it (bounded). Never codex's reader (it puts).
        `window_passed`: the desk answers codex for `gate_id` once this returns."""
        f = self.run.follower
        if threading.current_thread() is f.follower_thread:
            return self._answer_for(gate_id)  # recorded by the run itself: it looks next
        answer = Answer()
        opened = GateOpened(gate_id, answer, window_passed) if gate_id is not None else None
        f.inbox.put(opened or GateDecided(answer))
        timeouts = self.run.runner.controller.config.timeouts
        block = answer.wait(timeouts.request + timeouts.interrupt_settle)
        if block is not None:
            return block
        return RunBlock(False, NOT_ACKNOWLEDGED, self.run.record.run_id)

    def answer(self, item: RunInput) -> None:
        if isinstance(item, GateOpened) and item.window_passed:
            self._window_passing(item.gate_id)
        if isinstance(item, (GateOpened, GateDecided)) and item.answer is not None:
            gate_id = item.gate_id if isinstance(item, GateOpened) else None
            item.answer.give(self._answer_for(gate_id))

    def _window_passing(self, gate_id: str) -> None:
        """Codex stops waiting on `gate_id` as soon as the desk answers it: the goal is held
        `blocked` first. Set once the run saw the window had passed, it raced codex, which
        ends the turn on the answer and may start a continuation on a goal still `active`
        (seen under load). Its waiting turn is not interrupted: the answer ends it."""
        if self.run.ending_by is not None or self.goal_blocked or gate_id not in self.blocked_on:
            return
        try:
            gate = self.run.runner.goals.gate(self.run.goal_id, gate_id)
        except LoopxChatError:
            return
        self._hold_blocked([gate])

    def _answer_for(self, gate_id: str | None) -> RunBlock:
        run, goal = self.run, self.run.follower.goal
        run_id = run.record.run_id
        if gate_id is not None and gate_id in self.blocked_on:
            return RunBlock(True, BLOCKED, run_id)
        if run.ending_by is not None or goal is None or goal.status != "active":
            return RunBlock(False, RUN_ENDING, run_id)
        return RunBlock(False, GATE_DECIDED, run_id)

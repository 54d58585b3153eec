"""A goal run's limits while its loop is followed: `RunLimits`.

Owns the hard token budget (the turn whose tokens reach it is interrupted; codex's reader
acts first, through `codex.budget_trip.BudgetTrip`, wired here), the runaway guard (a loop
that repeats itself or passes `--max-turns` is paused with an owner gate that says why; its
rule is `codex.runaway_trip`'s, and codex's reader stops the turns past it first) and the
wait for the usage limit's reset (`--resume-after-usage-limit`).

It never starts a turn, never lets a run past a limit (the owner's gate does), and keeps no
text: the guard compares answers in memory only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from loopx_chat.codex.runaway_trip import guard_reason, repeats_after

if TYPE_CHECKING:
    from loopx_chat.codex.budget_trip import BudgetTrip
    from loopx_chat.codex.goal_loop import LoopEvent
    from loopx_chat.codex.host_connection import Notification
    from loopx_chat.codex.runaway_trip import RunawayTrip
    from loopx_chat.controller.our_run import OurRun
    from loopx_chat.controller.warm_threads import Warm

# What the reader's trips act on: a turn's start, items, usage and end (the deltas of its
# words, most of what codex sends, are passed by).
READER_SEES = frozenset(
    {
        "turn/started",
        "turn/completed",
        "item/started",
        "item/completed",
        "thread/tokenUsage/updated",
    }
)
# How long a run that resumes after the usage limit waits when codex reported no reset time.
USAGE_WAIT_SEC = 300.0


class RunLimits:
    """The budget, the runaway guard and the usage-limit wait of one run of ours."""

    def __init__(self, run: OurRun) -> None:
        self.run = run
        self.trip: BudgetTrip | None = None  # the budget, acted on by codex's reader
        self.guard: RunawayTrip | None = None  # the guard's turns past it, stopped by it
        self.spent_in: str | None = None  # the turn interrupted as it reached the budget
        self.guard_tripped = False  # the runaway guard paused the run at a turn's end
        self.repeats = 0  # turns in a row with no tool call and the same answer
        self.last_answer: str | None = None
        self.usage_wait_until: float | None = None  # epoch seconds: the usage limit's reset

    def arm(self, warm: Warm) -> None:
        """The budget and the guard are acted on where codex's notes are read first: the
        reader interrupts the turn that reaches the budget, and every turn codex starts past
        the guard, without waiting for the follower's thread."""
        from loopx_chat.codex.budget_trip import BudgetTrip  # loaded as codex starts
        from loopx_chat.codex.runaway_trip import RunawayTrip
        from loopx_chat.codex.turn_events import TotalsSeen, TurnEvents

        proc, thread_id = warm.thread.proc, warm.thread.thread_id
        # One decoder on the reader for both: the budget counts its events, the guard ends.
        events = TurnEvents(TotalsSeen(thread_id, warm.thread.usage_total))
        trip = self.trip = BudgetTrip(
            thread_id,
            events,
            budget=self.run.plan.token_budget,
            spent=self.run.follower.spent(),
            send=proc.fire,
        )
        guard = self.guard = RunawayTrip(
            thread_id,
            repeats=self.repeats,
            last_answer=self.last_answer,
            finished=len(self.run.follower.finished),
            max_turns=self.run.plan.max_turns,
            send=proc.fire,
            stood_down=self.run.guard_stood_down,
        )

        def see(note: Notification) -> None:
            if note.method in READER_SEES:
                event = events.see(note)
                trip.on(event)
                guard.on(event, note.params.get("turnId"))

        proc.tap(see)

    def refuses_turns(self) -> bool:
        """A turn codex starts now is stopped: the run's budget is spent (codex counted less
        than the ledger) or the guard paused it at the end of the turn before."""
        return self.spent_in is not None or self.guard_tripped

    def check_budget(self, event: LoopEvent) -> None:
        """A hard budget: once the tokens codex reports during a turn reach it, that turn is
        interrupted, so a run overspends by at most the one model response in flight. The
        reader asked codex already when more requests were to come in the turn (`trip`):
        this thread, later, only records it and interrupts what the reader leaves to it."""
        f = self.run.follower
        if self.spent_in is not None or event.turn_id not in f.loop.open_turns:
            return
        if f.spent(event.tokens or 0) < self.run.plan.token_budget:
            return
        self.spent_in = event.turn_id
        # A turn whose last response was its answer ends now, and codex, counting as the
        # ledger does, marks the goal budget-limited itself. Otherwise (more responses to
        # come, or codex counted less: a status set mid-turn stops its count) it is
        # interrupted, after which codex starts no further turn.
        agree = self.run.host_run_tokens() == f.spent()
        if not f.watch.events.answered(event.turn_id) or not agree:
            f.steered = True
            if self.trip is None or not self.trip.tripped(event.turn_id):
                f.watch.stop_turn(event.turn_id)  # codex's reader has not asked already

    def interrupted(self, turn_id: str) -> bool:
        """Whether the budget or the guard stopped `turn_id` (this thread or codex's reader
        asked)."""
        if self.spent_in == turn_id or (self.trip is not None and self.trip.tripped(turn_id)):
            return True
        return self.guard is not None and self.guard.asked(turn_id)

    def turn_ended(self, event: LoopEvent) -> None:
        """A turn ended: the budget it reached ends the loop, and the guard looks at it."""
        if self.spent_in == event.turn_id:
            self._spent()
        self._check_progress(event)

    def _spent(self) -> None:
        """The turn that reached the budget ended: the goal is budget-limited, as codex sets
        it at the end of a turn past its budget (paused when codex refuses that status)."""
        run, f = self.run, self.run.follower
        if f.goal is not None and f.goal.status != "active":
            return  # codex said it first (its own budget, or the model's update_goal)
        if f.set_goal("budgetLimited") is None:
            run.ending_by = run.ending_by or "the budget"
            f.set_goal("paused")

    def _check_progress(self, event: LoopEvent) -> None:
        """A runaway loop stops: after NO_PROGRESS_TURNS turns in a row with no tool call and
        the same final answer, or the owner's `--max-turns`, the run is paused with an owner
        gate that says why, in words."""
        run, f = self.run, self.run.follower
        self.repeats = repeats_after(self.repeats, self.last_answer, event.tool_calls, event.answer)
        self.last_answer = event.answer
        if run.ending_by is not None or f.goal is None or f.goal.status != "active":
            return
        why = guard_reason(self.repeats, len(f.finished), run.plan.max_turns)
        if why is None:
            return
        question = (
            f"Goal {run.goal_id} is paused: {why}. Approve to let it go on (then run it "
            "again), or reject to leave it stopped."
        )
        self.guard_tripped = True
        gate = run.runner.goals.request_gate(run.goal_id, question, actor="controller")
        run.note("paused", by="loopx-chat (runaway guard)", reason=why, gate_id=gate.gate_id)
        run.wind_down("loopx-chat (runaway guard)", why)

    def waits_for_usage_reset(self) -> bool:
        """With `--resume-after-usage-limit`: the usage limit stopped codex's loop; wait for
        the reset time codex reported (USAGE_WAIT_SEC when it said none), then set the goal
        active again, recorded both times."""
        run, f = self.run, self.run.follower
        goal = f.goal
        if (
            not run.plan.resume_after_usage_limit
            or run.ending_by is not None
            or goal is None
            or goal.status != "usageLimited"
            or f.loop.open_turns
        ):
            return False
        now = time.time()
        if self.usage_wait_until is None:
            f.state.move("usage_limited")
            resets = f.watch.usage_resets_at
            self.usage_wait_until = float(resets) if resets is not None else now + USAGE_WAIT_SEC
            run.note("usage_wait", usage_resets_at=int(self.usage_wait_until))
        if now < self.usage_wait_until:
            return True
        self.usage_wait_until = None
        if f.set_goal("active") is None:
            return False  # codex refused: the run ends at the limit, as without the flag
        f.state.move("usage_resumed")
        run.note("usage_resumed", host_status="active")
        return True

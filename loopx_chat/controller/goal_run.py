"""A goal run: Codex's own goal loop on a session's thread, under the owner's recorded authority.

Owns, once `goal_run_checks` said yes, the `run_authorized` record and the run's start:
`GoalRunner` authorizes the planned run and hands it to the one follower of goal loops
(`loop_follower.LoopFollower.for_run`), which sets the goal `active` with its budget and
follows codex's loop until it ends, in the process that holds the thread. Also the owner's
answer to a run Codex says is done: Accept (a human_reward, the run closed) and Reopen's
objective.

It never writes a loop of its own and never talks to Codex itself: the follower does.
"""

from __future__ import annotations

from collections.abc import Callable

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.goal_run_checks import RunChecks, RunPlan, ended_complete
from loopx_chat.controller.loop_follower import LoopFollower
from loopx_chat.controller.our_run import PARTS, RunResult, TurnProgress
from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import GoalRun, GoalRuns

POLL_SEC = 0.2  # how often the goal's records (gates, stop) are read while the loop runs
WHILE_CODEX_STARTS = (
    "loopx_chat.codex.budget_trip",
    "loopx_chat.controller.host_requests",
    "loopx_chat.codex.rollouts.host_facts",
    "loopx_chat.codex.rollouts.scanner",
    *PARTS,
)


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

    def accept(self, goal_id: str, reason: str | None, actor: str = "owner") -> GoalRun:
        """The owner agrees it is done: a human_reward on the run's last turn, run closed."""
        run = ended_complete(self.runs, goal_id)
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
        return follow.our_run().run()

    def authorize(self, plan: RunPlan, *, actor: str, surface: str) -> GoalRun:
        """Record the owner's authority for the planned run (nothing is sent yet); a Reopen
        is noted on the run Codex said was done first."""
        if plan.objective.source == "owner_note":
            self.runs.note(plan.goal_id, plan.objective.source_id, "reopened", actor=actor)
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
    ) -> LoopFollower:
        """What follows one authorized run (`our_run().run()` blocks until it ends); `recovering`:
        the run's process died with the goal active, and codex continues it by itself once the
        thread is loaded again, so nothing is set."""
        say = on_event or (lambda _: None)
        return LoopFollower.for_run(self, plan, record, on_turn, say, recovering=recovering)

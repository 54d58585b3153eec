"""The checks before a goal run: every refusal with its own code, nothing written, nothing spawned.

Owns `RunPlan` (what a run will do: which session's thread, what budget, which objective,
under which approval policy) and the order of the checks: a Reopen of a goal with no run
Codex reported complete (`run_not_complete`), an unknown policy (`approval_policy_unknown`),
Plan mode (`plan_not_in_run`: codex continues no goal in it), the goal stopped
(`goal_stopped`), an open blocking gate (`gate_open`, naming it), no session with a thread
(`no_session`), another Codex home (`codex_home_mismatch`), raw material on the goal's record
files (`raw_material_detected`), no finite budget (`budget_required`), nothing to work on
(`objective_required`), the thread held by someone else (`thread_busy`, saying who), no codex
(`host_tool_unavailable`). It reads owner-local state only: it never writes, never spawns and
never talks to Codex.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.thread_lock import ThreadWriterLock
from loopx_chat.errors import CodexError, Remedy, StateError, UsageError
from loopx_chat.goals.gate_store import Gate as OwnerGate
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import GoalRun, GoalRuns, RunObjective, run_objective
from loopx_chat.pids import pid_alive
from loopx_chat.state.session_records import SessionRecord


@dataclass(frozen=True)
class RunPlan:
    goal_id: str
    session: SessionRecord
    token_budget: int
    objective: RunObjective
    # What codex may ask the owner during the run (`thread/resume` carries it, and every
    # continuation turn runs with it); None: whatever the thread is loaded with.
    approval_policy: str | None = None
    # The owner's `--max-turns`: continuation turns before the run pauses with a gate.
    max_turns: int | None = None
    # Wait for the account's usage limit to reset and go on (the flag, else the goal_state).
    resume_after_usage_limit: bool = False


def _refuse(message: str, code: str, summary: str, next_action: str) -> UsageError:
    return UsageError(
        message, error_code=code, remedy=Remedy(summary=summary, next_action=next_action)
    )


def ended_complete(runs: GoalRuns, goal_id: str) -> GoalRun:
    """The goal's last run, which Codex reported complete: what Accept and Reopen answer."""
    run = runs.latest(goal_id)
    if run is None or run.state != "ended" or run.host_status != "complete":
        shown = "no run" if run is None else f"run {run.run_id} is {run.state}"
        raise StateError(
            f"goal {goal_id} has no run that Codex reported complete ({shown})",
            error_code="run_not_complete",
            remedy=Remedy(
                summary="Accept and Reopen answer a run Codex says is done.",
                next_action=f"Run it first: `loopx-chat goal run {goal_id}`.",
            ),
        )
    return run


def person_gates(goals: GateStore, goal_id: str) -> list[OwnerGate]:
    """The goal's open blocking gates, oldest first."""
    pending = [g for g in goals.gates(goal_id) if g.status == "pending" and g.blocking]
    return sorted(pending, key=lambda g: g.created_at)


class RunChecks:
    """The checks before a run, in the order the owner fixes them."""

    def __init__(self, controller: ChatController, goals: GateStore) -> None:
        self.controller = controller
        self.goals = goals
        self.records = GoalLedger(goals)
        self.runs = GoalRuns(goals)

    def plan(
        self,
        goal_id: str,
        session_id: str | None = None,
        token_budget: int | None = None,
        *,
        reopen_note: str | None = None,
        approval_policy: str | None = None,
        plan_mode: bool = False,
        max_turns: int | None = None,
        resume_after_usage_limit: bool | None = None,
    ) -> RunPlan:
        """Every check before a run, in the order the owner fixes them. `reopen_note`: Reopen
        the run Codex said was done, the note its objective (its budget and session unless
        given; `authorize` notes it). `approval_policy` is the run's own (else the goal's
        goal_state, else the controller's default); Plan mode is refused (`plan_not_in_run`):
        codex continues no goal in Plan mode."""
        goals, records = self.goals, self.records
        from loopx_chat.goals.goal_ledger import approval_policy_field

        objective = None
        if reopen_note is not None:
            from loopx_chat.goals.gate_store import public_text

            done = ended_complete(self.runs, goal_id)
            objective = RunObjective(public_text(reopen_note, "note"), "owner_note", done.run_id)
            token_budget = token_budget or done.token_budget
            session_id = session_id or done.session_id

        approval_policy_field(approval_policy)  # `approval_policy_unknown`
        options = self.controller.thread_options(goal_id, approval_policy)
        if plan_mode or options.plan:
            source = "--plan" if plan_mode else "Plan mode is this goal's or the service's default"
            raise _refuse(
                f"goal {goal_id} cannot run in Plan mode ({source}): Codex starts no "
                "continuation turn on a thread in Plan mode",
                "plan_not_in_run",
                "Codex 0.171.0 continues a goal only in its Default collaboration mode; a "
                "run has no turn of loopx-chat's own that could ask for Plan mode.",
                f"Run it without --plan; for a goal set to Plan mode, `loopx-chat goal set "
                f"{goal_id} --no-plan` and send one turn (`loopx-chat chat send`), then run.",
            )
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
                remedy=Remedy(
                    summary="A goal runs only on the Codex home its session belongs to.",
                    next_action="Restart loopx-chat with the session's original "
                    "LOOPX_CHAT_CODEX_HOME; do not copy or rebind its history.",
                ),
            )
        raw = records.raw_material(goal_id)
        if raw:
            raise _refuse(
                f"goal {goal_id}'s records carry raw material ({'; '.join(raw)})",
                "raw_material_detected",
                "A record of the goal holds raw material (a transcript, a credential, a path, "
                "raw output): loopx-chat's writers refuse it, so a hand edit or another tool "
                "put it there.",
                "Remove that key from the named file (or replace its value with a compact "
                f"summary), then run the goal; `loopx-chat status --goal {goal_id}` agrees.",
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
        if resume_after_usage_limit is None:
            resume_after_usage_limit = bool(state and state.resume_after_usage_limit)
        return RunPlan(
            goal_id,
            session,
            budget,
            objective,
            options.approval_policy,
            max_turns=max_turns,
            resume_after_usage_limit=resume_after_usage_limit,
        )

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

    def _pending_handoff(self, goal_id: str, handoffs: list[Any]) -> Any:
        from loopx_chat.goals.goal_facts import goal_turns, handoff_consumers

        if not handoffs:
            return None
        consumers = handoff_consumers(handoffs, goal_turns(self.controller.store, goal_id))
        pending = [h for h in handoffs if consumers[h.handoff_id] is None]
        return pending[-1] if pending else None

    def _check_not_busy(self, goal_id: str, session: SessionRecord) -> None:
        latest = self.runs.latest(goal_id)
        if latest is not None and latest.live and pid_alive(latest.pid):
            raise CodexError(
                f"goal {goal_id} is already running (run {latest.run_id}, pid {latest.pid})",
                error_code="thread_busy",
                remedy=Remedy(
                    summary="Codex's loop already runs this goal under another `goal run`.",
                    next_action=f"Watch it with `loopx-chat status --goal {goal_id}`, or pause "
                    f"it with `loopx-chat goal stop {goal_id}`.",
                ),
            )
        thread_id = session.upstream_thread_id
        if not thread_id or self.controller.holds(session.session_id):
            return  # no thread yet, or this process holds it (the service after a chat turn)
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
                remedy=Remedy(
                    summary=f"{holder[0].upper()}{holder[1:]} holds this thread; a goal runs "
                    "only in the process that holds it.",
                    next_action=f"{remedy}, then run the goal again.",
                ),
            )

"""Goal runs: the owner's authority for Codex's own goal loop, and what became of it.

Owns `<state>/goals/<goal>/runs.jsonl` (append-only, one event a line, under the goal's
lock): `run_authorized` (actor, surface, budget, objective source, time), then what the run
saw and did (`blocked`, `unblocked`, `paused`, `ended`, `accepted`, `reopened`), folded into
one `GoalRun` per run. Also the pure rules around a run: which objective goes to the host
(the pending handoff's next action and stop condition, else the goal_state objective and
its acceptance criteria, through the one text filter of every record), the exit code of
each way a run ends, and the words of the host goal on the first screen.

It never talks to Codex and never starts anything: the controller's goal run does, after
the checks here said yes. Records hold ids, statuses, numbers and text that already passed
`public_text`; never a transcript, a path or raw output.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from loopx_chat.errors import Remedy, StateError
from loopx_chat.goals.gate_store import GateStore, Handoff, public_text
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.state.jsonl import append_record, read_records

RUN_SCHEMA = "loopx_chat_goal_run_v1"
RUN_EVENTS = (
    "run_authorized",
    "started",
    "blocked",
    "unblocked",
    "paused",
    "ended",
    "accepted",
    "reopened",
    "recovered",
    "recovering",  # codex's app-server died mid-run: it is started again and the thread resumed
    "usage_wait",  # the usage limit stopped codex; the owner asked to go on after its reset
    "usage_resumed",
)
# Not a run: codex ran a goal loop on a thread loopx-chat loaded without a run of its own.
HOST_LOOP_EVENT = "host_loop_seen"
# ... and the owner paused that loop (Pause on the card or the API), with who did.
HOST_LOOP_PAUSED = "host_loop_paused"
HOST_LOOP_EVENTS = (HOST_LOOP_EVENT, HOST_LOOP_PAUSED)
SURFACES = ("cli", "page", "api")

# How `loopx-chat goal run` ends, by the host goal's final status (docs/reference.md).
EXIT_CODES: dict[str, int] = {
    "complete": 0,
    "budgetLimited": 3,
    "usageLimited": 4,
    "blocked": 5,
    "paused": 6,
}
EXIT_INTERRUPTED = 130  # Ctrl-C: the goal is set paused first


def exit_code_for(host_status: str | None) -> int:
    """The documented exit code of a run that ended with the host goal in this status."""
    return EXIT_CODES.get(host_status or "", 1)


@dataclass(frozen=True)
class RunObjective:
    text: str
    source: str  # handoff | goal_state | owner_note (its source_id: the run reopened)
    source_id: str


def objective_remedy(goal_id: str) -> Remedy:
    """How to give goal `goal_id` something to work on: the exact command. `goal run`'s
    `objective_required` carries it, and `chat new --goal` says it for a goal that has none."""
    return Remedy(
        summary=f"Goal {goal_id} has no objective yet: chat turns run, but `goal run` has "
        "nothing to ask Codex to work on.",
        next_action=f'Set one: `loopx-chat goal set {goal_id} --objective "what to do" '
        '--acceptance "how you will know it is done"`.',
    )


def has_objective(records: GoalLedger, goals: GateStore, goal_id: str) -> bool:
    """Whether a run of the goal would have an objective: a goal_state, or a handoff."""
    return records.goal_state(goal_id) is not None or bool(goals.handoffs(goal_id))


def run_objective(records: GoalLedger, goal_id: str, pending: Handoff | None) -> RunObjective:
    """What the host is asked to do: the pending handoff, else the goal_state; compact."""
    if pending is not None:
        text = f"{pending.next_action}. Stop when: {pending.stop_condition}"
        return RunObjective(public_text(text, "objective"), "handoff", pending.handoff_id)
    state = records.goal_state(goal_id)
    if state is None:
        raise StateError(
            f"goal {goal_id} has neither a pending handoff nor a goal_state: nothing says what "
            "Codex should work on",
            error_code="objective_required",
            remedy=objective_remedy(goal_id),
        )
    text = state.objective
    if state.acceptance:
        text += ". Done when: " + "; ".join(state.acceptance)
    return RunObjective(public_text(text, "objective"), "goal_state", state.record_id)


# The supervisor's states of a run, as its record says them: the state each event moves it
# to. `ended` moves it by how the host goal ended (ENDED_PHASES), or to `failed`.
PHASES = (
    "authorized",
    "running",
    "blocked on owner",
    "paused",
    "budget spent",
    "usage-limited",
    "complete",
    "failed",
    "recovering",
)
PHASE_AFTER: dict[str, str] = {
    "run_authorized": "authorized",
    "started": "running",
    "unblocked": "running",
    "recovered": "running",
    "reopened": "running",
    "usage_resumed": "running",
    "blocked": "blocked on owner",
    "paused": "paused",  # the runaway guard: the last turn finishes, then it ends paused
    "recovering": "recovering",
    "usage_wait": "usage-limited",
    "accepted": "complete",
}
ENDED_PHASES: dict[str, str] = {
    "complete": "complete",
    "budgetLimited": "budget spent",
    "usageLimited": "usage-limited",
    "blocked": "blocked on owner",
    "paused": "paused",
}


def phase_after(event: Mapping[str, Any], current: str) -> str:
    """The run's state after one of its events (PHASE_AFTER, ENDED_PHASES)."""
    kind = str(event.get("event"))
    if kind == "ended":
        if event.get("failed") is True:
            return "failed"
        return ENDED_PHASES.get(str(event.get("host_status")), "paused")
    return PHASE_AFTER.get(kind, current)


@dataclass(frozen=True)
class GoalRun:
    run_id: str
    goal_id: str
    session_id: str
    thread_id: str | None
    actor: str
    surface: str
    token_budget: int
    objective_source: str
    objective_source_id: str
    authorized_at: str
    pid: int | None
    state: str  # authorized | running | blocked | ended | closed
    host_status: str | None = None
    tokens_used: int = 0
    ended_at: str | None = None
    ended_by: str | None = None
    blocked_by: str | None = None
    reason: str | None = None
    # What codex may ask the owner during the run (None: a run recorded before it was kept),
    # and whether it ran in Plan mode (never: `plan_not_in_run`).
    approval_policy: str | None = None
    plan: bool = False
    # Ended because codex could not be kept running (its app-server died and every restart
    # failed): the goal shows failed, with `reason`.
    failed: bool = False
    # The owner's limits on the run: `--max-turns`, `--resume-after-usage-limit`.
    max_turns: int | None = None
    resume_after_usage_limit: bool = False
    phase: str = "authorized"  # one of PHASES
    history: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "history"}
        data["events"] = [e.get("event") for e in self.history]
        return data

    @property
    def live(self) -> bool:
        """Whether the run's process should still be following the host's loop."""
        return self.state in ("authorized", "running", "blocked")

    def host_tokens_before(self) -> int | None:
        """The tokens codex counted for the goal when the run last started (what the run
        spent is the growth from it); None: it never started."""
        started = [e for e in self.history if e.get("event") == "started"]
        return int(started[-1].get("host_tokens_before") or 0) if started else None

    def host_run_tokens(self, goal_tokens_used: int) -> int | None:
        """What codex counted for this run: the growth of its count for the goal
        (`goal_tokens_used`, now) since the run last started; None: it never started."""
        base = self.host_tokens_before()
        return None if base is None else max(0, goal_tokens_used - base)


def _fold(event: dict[str, Any], run: GoalRun | None) -> GoalRun | None:
    kind = event.get("event")
    if kind == "run_authorized":
        return GoalRun(
            run_id=str(event.get("run_id")),
            goal_id=str(event.get("goal_id")),
            session_id=str(event.get("session_id")),
            thread_id=event.get("thread_id"),
            actor=str(event.get("actor")),
            surface=str(event.get("surface")),
            token_budget=int(event.get("token_budget") or 0),
            objective_source=str(event.get("objective_source")),
            objective_source_id=str(event.get("objective_source_id")),
            authorized_at=str(event.get("at")),
            pid=event.get("pid") if isinstance(event.get("pid"), int) else None,
            state="authorized",
            approval_policy=event.get("approval_policy")
            if isinstance(event.get("approval_policy"), str)
            else None,
            plan=event.get("plan") is True,
            max_turns=event.get("max_turns") if isinstance(event.get("max_turns"), int) else None,
            resume_after_usage_limit=event.get("resume_after_usage_limit") is True,
            history=(event,),
        )
    if run is None:
        return None
    changes: dict[str, Any] = {
        "history": (*run.history, event),
        "phase": phase_after(event, run.phase),
    }
    if isinstance(event.get("host_status"), str):
        changes["host_status"] = event["host_status"]
    if isinstance(event.get("tokens_used"), int):
        changes["tokens_used"] = event["tokens_used"]
    if kind == "recovered" and isinstance(event.get("pid"), int):
        changes["pid"] = event["pid"]
    if kind in ("started", "unblocked", "reopened", "recovered"):
        changes.update(state="running", blocked_by=None)
        if kind == "reopened":
            changes.update(ended_at=None, ended_by=None, reason=None)
    elif kind == "blocked":
        # A second gate while blocked is acknowledged too; the first one stays the blocker.
        first = run.blocked_by if run.state == "blocked" and run.blocked_by else None
        changes.update(state="blocked", blocked_by=first or event.get("gate_id"))
    elif kind == "ended":
        changes.update(
            state="ended",
            ended_at=event.get("at"),
            ended_by=event.get("by"),
            reason=event.get("reason"),
            failed=event.get("failed") is True,
        )
    elif kind == "accepted":
        changes.update(state="closed")
    return replace(run, **changes)


def fold_runs(events: Iterable[dict[str, Any]]) -> list[GoalRun]:
    """The runs of a goal, oldest first, folded from its `runs.jsonl` events (pure)."""
    folded: dict[str, GoalRun] = {}
    for event in events:
        if event.get("event") in HOST_LOOP_EVENTS:
            continue
        run_id = str(event.get("run_id"))
        run = _fold(event, folded.get(run_id))
        if run is not None:
            folded[run_id] = run
    return list(folded.values())


def latest_event(events: Sequence[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    """The last event of `kind` in a goal's `runs.jsonl` (a host loop seen, paused)."""
    for event in reversed(events):
        if event.get("event") == kind:
            return event
    return None


class GoalRuns:
    """The run records of goals, beside their other records."""

    def __init__(self, goals: GateStore) -> None:
        self.goals = goals

    def _path(self, goal_id: str) -> Any:
        return self.goals.goal_dir(goal_id) / "runs.jsonl"

    def runs(self, goal_id: str) -> list[GoalRun]:
        return fold_runs(read_records(self._path(goal_id), RUN_SCHEMA))

    def latest(self, goal_id: str) -> GoalRun | None:
        runs = self.runs(goal_id)
        return runs[-1] if runs else None

    def run(self, goal_id: str, run_id: str) -> GoalRun:
        for run in self.runs(goal_id):
            if run.run_id == run_id:
                return run
        raise StateError(f"no run {run_id} for goal {goal_id}", error_code="run_not_found")

    def authorize(
        self,
        goal_id: str,
        *,
        session_id: str,
        thread_id: str | None,
        actor: str,
        surface: str,
        token_budget: int,
        objective: RunObjective,
        approval_policy: str | None = None,
        max_turns: int | None = None,
        resume_after_usage_limit: bool = False,
    ) -> GoalRun:
        """Record the owner's authority for one run (before anything is sent to the host),
        with what codex may ask the owner meanwhile (its approval policy; Plan mode never)."""
        if surface not in SURFACES:
            raise ValueError(f"unknown surface {surface!r}")
        run_id = "run-" + uuid.uuid4().hex[:12]
        event = {
            "schema_version": RUN_SCHEMA,
            "event": "run_authorized",
            "run_id": run_id,
            "goal_id": goal_id,
            "session_id": session_id,
            "thread_id": thread_id,
            "actor": actor,
            "surface": surface,
            "token_budget": token_budget,
            "objective_source": objective.source,
            "objective_source_id": objective.source_id,
            "approval_policy": approval_policy,
            "plan": False,
            "max_turns": max_turns,
            "resume_after_usage_limit": resume_after_usage_limit,
            "pid": os.getpid(),
            "at": self.goals.now(),
        }
        with self.goals.locked(goal_id) as folder:
            self.runs(goal_id)  # an unreadable log takes no new record
            append_record(folder / "runs.jsonl", event)
        self.goals.control.record(
            "run_authorized", goal_id=goal_id, run_id=run_id, session_id=session_id
        )
        return self.run(goal_id, run_id)

    def host_loop_seen(self, goal_id: str) -> dict[str, Any] | None:
        """The latest sighting of a loop loopx-chat did not start, or None."""
        return self._latest_of(goal_id, HOST_LOOP_EVENT)

    def host_loop_paused(self, goal_id: str) -> dict[str, Any] | None:
        """The owner's latest Pause of a loop loopx-chat did not start, or None."""
        return self._latest_of(goal_id, HOST_LOOP_PAUSED)

    def _latest_of(self, goal_id: str, kind: str) -> dict[str, Any] | None:
        return latest_event(read_records(self._path(goal_id), RUN_SCHEMA), kind)

    def _append(self, goal_id: str, event: str, fields: dict[str, Any]) -> None:
        record = {
            "schema_version": RUN_SCHEMA,
            "event": event,
            "goal_id": goal_id,
            "at": self.goals.now(),
            **fields,
        }
        with self.goals.locked(goal_id) as folder:
            append_record(folder / "runs.jsonl", record)

    def record_host_loop(self, goal_id: str, session_id: str, thread_id: str | None) -> None:
        """Codex is running a goal loop on this thread that no run of ours authorized."""
        self._append(goal_id, HOST_LOOP_EVENT, {"session_id": session_id, "thread_id": thread_id})
        self.goals.control.record(
            "host_loop_detected", goal_id=goal_id, session_id=session_id, thread_id=thread_id
        )

    def record_host_loop_paused(
        self, goal_id: str, session_id: str, thread_id: str | None, *, actor: str, host_status: str
    ) -> dict[str, Any]:
        """The owner paused a loop loopx-chat did not start: who, and what codex answered."""
        fields = {"session_id": session_id, "thread_id": thread_id, "actor": actor}
        self._append(goal_id, HOST_LOOP_PAUSED, {**fields, "host_status": host_status})
        self.goals.control.record("host_loop_paused", goal_id=goal_id, **fields)
        paused = self.host_loop_paused(goal_id)
        assert paused is not None
        return paused

    def note(self, goal_id: str, run_id: str, event: str, **fields: Any) -> GoalRun:
        """Append one event of a run (what the host did, or what the owner decided)."""
        if event not in RUN_EVENTS or event == "run_authorized":
            raise ValueError(f"unknown run event {event!r}")
        self._append(goal_id, event, {"run_id": run_id, **fields})
        if event in ("ended", "accepted", "reopened"):
            self.goals.control.record(f"run_{event}", goal_id=goal_id, run_id=run_id)
        return self.run(goal_id, run_id)


# Why a run failed or Codex stopped under it, in words (the codes stay in the logs).
STOP_WORDS = {
    "app_server_exited": "Codex's app-server exited",
    "app_server_protocol": "Codex's app-server broke the protocol",
}


def _utc(epoch: int) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def run_line(run: GoalRun, event: Mapping[str, Any]) -> str | None:
    """What the run's terminal says for one of its recorded events (None: nothing). The
    run's own process and `goal follow` in any other shell say it from the same record."""
    kind = event.get("event")
    if kind == "started":
        return (
            f"Codex is working on goal {run.goal_id} (run {run.run_id}, budget "
            f"{run.token_budget:,} tokens)"
        )
    if kind == "blocked" and event.get("newly", True):
        held = event.get("host_status") == "blocked"
        waits = "Codex's goal is blocked until it is decided" if held else "Codex waits for you"
        return f"owner gate {event.get('gate_id')} is open: {waits}"
    if kind == "unblocked":
        return "the gate was approved: Codex continues"
    if kind == "recovering":
        why = STOP_WORDS.get(str(event.get("reason")), "Codex stopped")
        attempt = f"{event.get('attempt')} of {event.get('tries')}"
        return f"Codex stopped ({why}): starting it again ({attempt})"
    if kind == "recovered":
        return f"run {run.run_id} recovered: Codex goes on with goal {run.goal_id}"
    if kind == "usage_wait":
        resets = event.get("usage_resets_at")
        when = _utc(resets) if isinstance(resets, int) else "its reset"
        return f"the account's usage limit stopped Codex: it goes on at {when}"
    if kind == "usage_resumed":
        return "the usage limit has reset: Codex goes on"
    if kind == "paused":
        gate = event.get("gate_id")
        return f"paused: {event.get('reason')}; owner gate {gate} asks whether it should go on"
    return None


def host_goal_words(
    goal: dict[str, Any] | None,
    run: GoalRun | None,
    acceptance: list[str],
    *,
    paused_by: str | None = None,
    foreign: bool = False,
) -> str:
    """The host goal on the first screen, in plain words (one line); `paused_by`: who paused
    a loop loopx-chat did not start (its Pause is newer than any run); `foreign`: the loop
    on the thread now is one loopx-chat saw after its own last run, not that run."""
    if goal is None:
        if run is not None and run.failed:
            return f"run {run.run_id} failed: {run.reason or 'Codex stopped'}"
        return "no Codex goal on this thread"
    status = goal.get("status")
    used, budget = goal.get("tokens_used", 0), goal.get("token_budget")
    if goal.get("run_token_budget"):
        used, budget = goal.get("run_tokens_used", 0), goal["run_token_budget"]
    spent = f"{used:,} of {budget:,} tokens" if budget else f"{used:,} tokens, no budget set"
    turns = f"turn {goal['turns']}, " if goal.get("turns") else ""
    if status == "active":
        if run is None or foreign:
            return "Codex is running a goal loopx-chat did not start (no budget set here)"
        if run.failed:
            return (
                f"run {run.run_id} failed: {run.reason or 'Codex stopped'}; Codex's goal is "
                f"still active ({spent}): `loopx-chat goal run {run.goal_id}` starts it again"
            )
        if not run.live:
            return (
                f"run {run.run_id} ended ({run.ended_by or 'no longer followed'}) while "
                f"Codex's goal is still active ({spent}): `loopx-chat goal run {run.goal_id}` "
                "follows it again"
            )
        return f"Codex is working on it ({turns}{spent})"
    if status == "complete":
        check = "; ".join(acceptance) if acceptance else "the goal's acceptance criteria"
        return f"Codex says it is done: check {check} (Accept or Reopen)"
    if status == "budgetLimited":
        return f"budget spent ({spent}): raise it (`goal run --token-budget N`) or stop"
    if status == "usageLimited":
        resets = run.history[-1].get("usage_resets_at") if run and run.history else None
        if isinstance(resets, int):
            import time

            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(resets))
            return f"waiting on the account's usage limit (it resets at {when})"
        return "waiting on the account's usage limit"
    if status == "blocked":
        if run is not None and run.blocked_by:
            return f"blocked by owner gate {run.blocked_by}"
        return "blocked by the agent" + (f": {run.reason}" if run and run.reason else "")
    if status == "paused":
        if paused_by:
            return f"paused by {paused_by} (a goal loopx-chat did not start)"
        who = run.ended_by if run is not None and run.ended_by else "someone outside loopx-chat"
        return f"paused by {who}"
    return f"Codex goal status {status}"


def run_answer_gate(run: GoalRun | None, acceptance: list[str]) -> dict[str, Any] | None:
    """The owner gate a finished run leaves on the first screen: Codex says it is done
    (Accept or Reopen), or its budget is spent (raise it or stop). None otherwise."""
    if run is None or run.state != "ended":
        return None
    if run.host_status == "complete":
        check = "; ".join(acceptance) if acceptance else "the goal's acceptance criteria"
        question = (
            f"Codex says it is done: check {check}. Accept (`loopx-chat goal accept "
            f"{run.goal_id}`) or Reopen (`loopx-chat goal reopen {run.goal_id} --note TEXT`)"
        )
    elif run.host_status == "budgetLimited":
        spent = run.history[-1].get("run_tokens") if run.history else None
        used = f"{spent:,} of {run.token_budget:,}" if isinstance(spent, int) else "all"
        question = (
            f"budget spent ({used} tokens): raise it (`loopx-chat goal run {run.goal_id} "
            "--token-budget N`) or stop"
        )
    else:
        return None
    return {
        "gate_id": run.run_id,
        "kind": "gate",
        "status": "blocked",
        "actor": "owner",
        "blocking": True,
        "question": question,
        "created_at": run.ended_at or run.authorized_at,
    }

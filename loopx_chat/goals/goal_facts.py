"""Turn owner-local state into the compact inputs of the projection core.

Owns the mapping from managed sessions, their compact turn records, owner gates and handoff
packets to the projection's `sessions` / `outcomes` / `gates` / `decision_results` items. It
emits only compact keys the classifier accepts (ids, statuses, timestamps, short text we
wrote ourselves or a person typed into a gate) and never transcript text or local paths: the
Codex home of a session is reduced to "this home" or "another home".

It also derives the goal-level controls the projection must show so that status and quota
never tell two stories: a stopped goal and a throttle (failure streak or spent budget) become
owner gates on the first screen, placed so the first blocking gate is the one quota names
(stop, then a person's open gates, then a foreign Codex home, then the throttle). Recency: a
failure older than the latest completed turn is history (status `superseded`), not a blocker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopx_chat import errors
from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import Gate, GateStore, Handoff, is_valid_goal_id
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.state.session_records import SessionRecord, TurnRecord, turn_is_blocker
from loopx_chat.state.session_store import SessionStore

FAILURE_THRESHOLD = 3
CLEARS_FAILURES = "a turn completes, or you give it a next step (`loopx-chat handoff record`)"


@dataclass(frozen=True)
class GoalFacts:
    goal_id: str
    sessions: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)
    decision_results: list[dict[str, Any]] = field(default_factory=list)
    # Not projection inputs: the quota decision reads these.
    tokens_used: int = 0
    consecutive_failed_turns: int = 0
    token_budget: int | None = None
    stopped: bool = False
    home_mismatch: bool = False
    throttle: dict[str, Any] | None = None
    pending_handoffs: tuple[str, ...] = ()
    turn_running: bool = False
    # Raw-material keys found on the goal's record files ("file: key.path"), never values.
    raw_material: tuple[str, ...] = ()
    # Gates this module adds (stop, throttle): on the first screen, never in `gate list`.
    control_gate_ids: frozenset[str] = frozenset()
    # Sessions of the goal whose records cannot be read (goals/unreadable.py): they hold it.
    unreadable_records: tuple[str, ...] = ()
    # What our records cover of the host, for staleness: threads, turns per thread, last time.
    thread_ids: tuple[str, ...] = ()
    recorded_turns: dict[str, int] = field(default_factory=dict)
    last_recorded_at: str | None = None

    def builder_kwargs(self) -> dict[str, Any]:
        return {
            "goal_id": self.goal_id,
            "sessions": self.sessions,
            "outcomes": self.outcomes,
            "gates": self.gates,
            "decision_results": self.decision_results,
        }


def _session_item(record: SessionRecord) -> dict[str, Any]:
    item: dict[str, Any] = {
        "session_id": record.session_id,
        "kind": "session",
        "status": record.status,
        "updated_at": record.updated_at,
        "turn_count": record.turn_count,
    }
    if record.active_turn_id:
        item["next_action"] = "let the running Codex turn finish"
    return item


def _home_gate(record: SessionRecord) -> dict[str, Any]:
    # Refusal, not a migration: the person must restart with the session's own home.
    return {
        "gate_id": f"home-{record.session_id}",
        "kind": "gate",
        "status": "blocked",
        "actor": "operator",
        "blocking": True,
        "question": f"Session {record.session_id} belongs to another Codex home: restart "
        "loopx-chat with its original LOOPX_CHAT_CODEX_HOME (do not copy or rebind it)",
        "created_at": record.updated_at,
    }


def _outcome_item(turn: TurnRecord, last_done: str) -> dict[str, Any] | None:
    base: dict[str, Any] = {
        "outcome_id": turn.turn_id,
        "session_id": turn.session_id,
        "kind": "outcome",
        "created_at": turn.completed_at or turn.updated_at,
    }
    if turn.status == "completed":
        return {
            **base,
            "status": "ok",
            "validation_summary": f"turn {turn.turn_id} completed "
            f"({turn.tokens.total_tokens} tokens)",
        }
    if turn_is_blocker(turn.status, turn.error_code):
        if base["created_at"] < last_done:
            # A later turn completed: this failure is history, not the current blocker.
            return {**base, "status": "superseded"}
        return {
            **base,
            "status": "failed",
            "blocker": f"turn {turn.turn_id} {turn.status}: {turn.error_code or 'no code'}",
        }
    if turn.status == "interrupted":
        return {**base, "status": "interrupted"}
    return None  # running / queued turns are not outcomes yet


def _gate_item(gate: Gate, last_done: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        "gate_id": gate.gate_id,
        "kind": "gate",
        "status": gate.status,
        "actor": gate.actor,
        "blocking": gate.blocking,
        "advisory": not gate.blocking,
        "question": gate.question,
        "created_at": gate.created_at,
        "updated_at": gate.updated_at,
    }
    if gate.status == "rejected" and gate.updated_at >= last_done:
        item["blocker"] = f"gate {gate.gate_id} rejected" + (
            f": {gate.reason}" if gate.reason else ""
        )
    return item


def _control_gate(gate_id: str, question: str, at: str) -> dict[str, Any]:
    return {
        "gate_id": gate_id,
        "kind": "gate",
        "status": "blocked",
        "actor": "owner",
        "blocking": True,
        "question": question,
        "created_at": at,
    }


def handoff_consumers(
    handoffs: Sequence[Handoff], turns: Sequence[TurnRecord]
) -> dict[str, TurnRecord | None]:
    """Which turn consumed each handoff: the first turn that started after the packet was
    recorded and completed. None while the handoff is pending."""
    done = sorted(
        (t for t in turns if t.status == "completed" and t.completed_at),
        key=lambda t: (str(t.completed_at), t.turn_id),
    )
    return {
        h.handoff_id: next((t for t in done if t.created_at >= h.created_at), None)
        for h in handoffs
    }


def _handoff_item(handoff: Handoff) -> dict[str, Any]:
    return {
        "ref_id": handoff.handoff_id,
        "kind": "handoff",
        "recommended_action": handoff.next_action,
        "created_at": handoff.created_at,
    }


def facts_from_records(
    goal_id: str,
    *,
    sessions: Sequence[SessionRecord],
    turns: Sequence[TurnRecord],
    gates: Sequence[Gate],
    handoffs: Sequence[Handoff],
    codex_home: str,
    stopped: Mapping[str, Any] | None = None,
    token_budget: int | None = None,
    run_gate: dict[str, Any] | None = None,
    raw_material: Sequence[str] = (),
) -> GoalFacts:
    ordered = sorted(turns, key=lambda t: (t.completed_at or t.updated_at, t.turn_id))
    last_handoff = max((h.created_at for h in handoffs), default="")
    trailing_failures = 0
    for t in reversed(ordered):
        if (t.completed_at or t.updated_at) < last_handoff:
            break  # a person recorded what to do next after these: the streak is cleared
        if turn_is_blocker(t.status, t.error_code):
            trailing_failures += 1
        elif t.status in ("completed", "interrupted"):
            break
    tokens_used = sum(t.tokens.total_tokens for t in turns)
    throttle: dict[str, Any] | None = None
    if trailing_failures >= FAILURE_THRESHOLD:
        throttle = {
            "kind": "consecutive_failures",
            "count": trailing_failures,
            "threshold": FAILURE_THRESHOLD,
            "clears_when": CLEARS_FAILURES,
        }
    elif token_budget is not None and tokens_used >= token_budget:
        throttle = {
            "kind": "token_budget",
            "used": tokens_used,
            "budget": token_budget,
            "clears_when": "a person raises the budget above the tokens used "
            "(`loopx-chat goal set GOAL --token-budget N`)",
        }
    last_done = max((t.completed_at or "" for t in turns if t.status == "completed"), default="")
    consumers = handoff_consumers(handoffs, turns)
    pending = [h for h in handoffs if consumers[h.handoff_id] is None]
    thread_of = {r.session_id: r.upstream_thread_id for r in sessions if r.upstream_thread_id}
    recorded: dict[str, int] = {}
    for t in turns:
        thread = thread_of.get(t.session_id)
        if thread and t.upstream_turn_id:
            recorded[thread] = recorded.get(thread, 0) + 1
    home_gates = [
        _home_gate(r)
        for r in sessions
        if r.session_mode == "managed_runtime"
        and r.agent_id == "codex"
        and r.codex_home not in (None, codex_home)
    ]
    control: list[dict[str, Any]] = []
    facts = GoalFacts(
        goal_id=goal_id,
        tokens_used=tokens_used,
        consecutive_failed_turns=trailing_failures,
        token_budget=token_budget,
        stopped=stopped is not None,
        home_mismatch=bool(home_gates),
        throttle=throttle,
        pending_handoffs=tuple(h.handoff_id for h in pending),
        turn_running=any(r.active_turn_id for r in sessions),
        raw_material=tuple(raw_material),
        control_gate_ids=frozenset(
            {f"stopped-{goal_id}", f"throttled-{goal_id}"}
            | ({str(run_gate["gate_id"])} if run_gate else set())
        ),
        thread_ids=tuple(sorted(set(thread_of.values()))),
        recorded_turns=recorded,
        last_recorded_at=max((t.completed_at or t.updated_at for t in turns), default=None),
    )
    facts.sessions.extend(_session_item(r) for r in sessions)
    for turn in ordered[-8:]:
        item = _outcome_item(turn, last_done)
        if item is not None:
            facts.outcomes.append(item)
    if stopped is not None:
        control.append(
            _control_gate(
                f"stopped-{goal_id}",
                "goal stopped by the owner: `loopx-chat goal resume` lets the agent run again",
                str(stopped.get("created_at")),
            )
        )
    facts.gates.extend(control)
    # Open gates first, the oldest of them first: the builder takes the first blocking gate
    # in input order, and the owner decides first what has held the agent longest.
    open_first = sorted(gates, key=lambda g: (g.status != "pending", g.created_at))
    facts.gates.extend(_gate_item(g, last_done) for g in open_first)
    facts.gates.extend(home_gates)
    if run_gate is not None:
        facts.gates.append(dict(run_gate))  # a finished run waits on the owner's answer
    if throttle is not None:
        what = (
            f"{throttle['count']} failed turns in a row"
            if throttle["kind"] == "consecutive_failures"
            else f"token budget spent ({throttle['used']} of {throttle['budget']})"
        )
        facts.gates.append(
            _control_gate(
                f"throttled-{goal_id}",
                f"throttled: {what}; clears when {throttle['clears_when']}",
                facts.last_recorded_at or "",
            )
        )
    facts.decision_results.extend(_handoff_item(h) for h in reversed(pending))
    return facts


def facts_from_state(
    goal_id: str,
    *,
    store: SessionStore,
    goals: GateStore,
    codex_home: str,
    all_sessions: Sequence[SessionRecord] | None = None,
) -> GoalFacts:
    """Facts for one goal; pass `all_sessions` to reuse one listing across many goals."""
    listed = store.list().sessions if all_sessions is None else all_sessions
    sessions = [s for s in listed if s.goal_id == goal_id]
    turns = [t for s in sessions for t in store.list_turns(s.session_id)]
    records = GoalLedger(goals)
    state = records.goal_state(goal_id)
    from loopx_chat.goals.goal_runs import GoalRuns, run_answer_gate

    run_gate = run_answer_gate(
        GoalRuns(goals).latest(goal_id), list(state.acceptance) if state else []
    )
    return facts_from_records(
        goal_id,
        sessions=sessions,
        turns=turns,
        gates=goals.gates(goal_id),
        handoffs=goals.handoffs(goal_id),
        codex_home=codex_home,
        stopped=records.stopped(goal_id),
        token_budget=state.token_budget if state else None,
        run_gate=run_gate,
        raw_material=records.raw_material(goal_id),
    )


def goal_turns(store: SessionStore, goal_id: str) -> list[TurnRecord]:
    """Every turn of the goal. A session that cannot be read might hold one, so its error
    is raised rather than the turn reported missing."""
    listing = store.list()
    if listing.problems:
        problem = listing.problems[0]
        raise StateError(problem.message, error_code=problem.error_code)
    return [
        t for s in listing.sessions if s.goal_id == goal_id for t in store.list_turns(s.session_id)
    ]


def goal_exists(store: SessionStore, goals: GateStore, goal_id: str) -> bool:
    """Whether some session or goal record names `goal_id` (a folder left empty by a write
    that failed names no goal: records do)."""
    return goals.has_records(goal_id) or any(s.goal_id == goal_id for s in store.list().sessions)


def known_goal_ids(sessions: Sequence[SessionRecord], goals: GateStore) -> list[str]:
    named = {s.goal_id for s in sessions if is_valid_goal_id(s.goal_id)}
    return sorted(named | set(goals.goal_ids()))


def require_goal(store: SessionStore, goals: GateStore, goal_id: str) -> str:
    """GOAL_ID (checked) when some session or goal record names it; else `goal_not_found`
    listing the goals that exist. The CLI and the service refuse a typo the same way."""
    from loopx_chat.goals.gate_store import validate_goal_id

    gid = validate_goal_id(goal_id)
    sessions = store.list().sessions
    # A folder left empty by a write that failed names no goal: records do.
    if any(s.goal_id == gid for s in sessions) or goals.has_records(gid):
        return gid
    known = known_goal_ids(sessions, goals)
    shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
    raise StateError(
        f"no goal {gid}" + (f" (goals: {shown})" if known else " (there are no goals yet)"),
        error_code="goal_not_found",
        remedy=errors.Remedy(
            summary="No session or goal record names this goal.",
            next_action="Check the spelling with `loopx-chat status`, or start the goal with "
            f"`loopx-chat goal set {gid} --objective TEXT` or `loopx-chat chat new --goal {gid}`.",
        ),
    )

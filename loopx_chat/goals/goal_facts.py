"""Turn owner-local state into the compact inputs of the projection core.

Owns the mapping from managed sessions, their compact turn records, owner gates and handoff
packets to the projection's `sessions` / `outcomes` / `gates` / `decision_results` items. It
emits only compact keys the classifier accepts (ids, statuses, timestamps, short text we
wrote ourselves or a person typed into a gate) and never transcript text or local paths: the
Codex home of a session is reduced to "this home" or "another home".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loopx_chat.goals.goal_store import Gate, GoalStore, Handoff, is_valid_goal_id
from loopx_chat.state.session_records import SessionRecord, TurnRecord, turn_is_blocker
from loopx_chat.state.session_store import SessionStore


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


def _outcome_item(turn: TurnRecord) -> dict[str, Any] | None:
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
        return {
            **base,
            "status": "failed",
            "blocker": f"turn {turn.turn_id} {turn.status}: {turn.error_code or 'no code'}",
        }
    if turn.status == "interrupted":
        return {**base, "status": "interrupted"}
    return None  # running / queued turns are not outcomes yet


def _gate_item(gate: Gate) -> dict[str, Any]:
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
    if gate.status == "rejected":
        item["blocker"] = f"gate {gate.gate_id} rejected" + (
            f": {gate.reason}" if gate.reason else ""
        )
    return item


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
) -> GoalFacts:
    ordered = sorted(turns, key=lambda t: (t.completed_at or t.updated_at, t.turn_id))
    trailing_failures = 0
    for t in reversed(ordered):
        if turn_is_blocker(t.status, t.error_code):
            trailing_failures += 1
        elif t.status in ("completed", "interrupted"):
            break
    thread_of = {r.session_id: r.upstream_thread_id for r in sessions if r.upstream_thread_id}
    recorded: dict[str, int] = {}
    for t in turns:
        thread = thread_of.get(t.session_id)
        if thread and t.upstream_turn_id:
            recorded[thread] = recorded.get(thread, 0) + 1
    facts = GoalFacts(
        goal_id=goal_id,
        tokens_used=sum(t.tokens.total_tokens for t in turns),
        consecutive_failed_turns=trailing_failures,
        thread_ids=tuple(sorted(set(thread_of.values()))),
        recorded_turns=recorded,
        last_recorded_at=max((t.completed_at or t.updated_at for t in turns), default=None),
    )
    for record in sessions:
        facts.sessions.append(_session_item(record))
        managed = record.session_mode == "managed_runtime" and record.agent_id == "codex"
        if managed and record.codex_home not in (None, codex_home):
            facts.gates.append(_home_gate(record))
    for turn in ordered[-8:]:
        item = _outcome_item(turn)
        if item is not None:
            facts.outcomes.append(item)
    # Open gates first, the oldest of them first: the builder takes the first blocking gate
    # in input order, and the owner decides first what has held the agent longest.
    open_first = sorted(gates, key=lambda g: (g.status != "pending", g.created_at))
    facts.gates.extend(_gate_item(g) for g in open_first)
    # A handoff is pending until a turn completes after it; then the agent has acted on it.
    last_done = max((t.completed_at or "" for t in turns if t.status == "completed"), default="")
    pending = [h for h in handoffs if h.created_at > last_done]
    facts.decision_results.extend(_handoff_item(h) for h in reversed(pending))
    return facts


def facts_from_state(
    goal_id: str,
    *,
    store: SessionStore,
    goals: GoalStore,
    codex_home: str,
    all_sessions: Sequence[SessionRecord] | None = None,
) -> GoalFacts:
    """Facts for one goal; pass `all_sessions` to reuse one listing across many goals."""
    listed = store.list().sessions if all_sessions is None else all_sessions
    sessions = [s for s in listed if s.goal_id == goal_id]
    turns = [t for s in sessions for t in store.list_turns(s.session_id)]
    return facts_from_records(
        goal_id,
        sessions=sessions,
        turns=turns,
        gates=goals.gates(goal_id),
        handoffs=goals.handoffs(goal_id),
        codex_home=codex_home,
    )


def known_goal_ids(sessions: Sequence[SessionRecord], goals: GoalStore) -> list[str]:
    named = {s.goal_id for s in sessions if is_valid_goal_id(s.goal_id)}
    return sorted(named | set(goals.goal_ids()))

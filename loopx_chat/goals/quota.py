"""quota_decision: should the goal spend its next automatic agent turn? The rule and its record.

The decision is the first screen's answer, never a second opinion: `decide_quota` reads the
goal's facts and the projection built from them (status shows the same projection), first
match wins:
1. the goal was stopped (`goal stop`) → `paused` (`goal_stopped`);
2. a person's open blocking gate → `operator_gate` (`open_blocking_gate`);
3. the session belongs to another Codex home → `blocked` (`codex_home_mismatch`);
   a record of the goal cannot be read → `blocked` (`record_unreadable`);
4. a failure streak or a spent token budget → `throttled`, with the window and what clears
   it (goal_facts puts the same throttle on the first screen as an owner gate, and the
   clearing action really clears it there too);
5. raw material detected in the goal's facts → `blocked` (`raw_material_detected`);
6. a turn is running now → `waiting` (`turn_running`);
7. the first screen says the agent cannot continue, or there is no executable agent todo
   (a pending handoff, which is also what a promoted proposal becomes) → `waiting`
   (`no_agent_todo`);
8. otherwise `eligible`.
So a goal with nothing to do is never eligible: a completed turn consumes its handoffs.
It is a scheduler hint only: it never starts a turn and never bills, and says so in its output.

Also owns `<state>/goals/<goal>/quota.jsonl` (append-only: each decision with its transition
key, the digest of the facts it was decided on).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from loopx_chat.goals.goal_facts import FAILURE_THRESHOLD, GoalFacts
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.state.jsonl import append_record, read_records

QUOTA_SCHEMA = "loopx_chat_quota_decision_v1"
HINT_NOTE = "scheduler hint only: it never starts a turn and never bills"
DECISIONS = ("eligible", "waiting", "operator_gate", "throttled", "blocked", "paused")

__all__ = ["DECISIONS", "FAILURE_THRESHOLD", "QuotaFacts", "decide_quota", "quota_facts"]


@dataclass(frozen=True)
class QuotaFacts:
    stopped: bool
    open_blocking_gate: bool
    home_mismatch: bool
    throttle: dict[str, Any] | None
    raw_material_detected: bool
    turn_running: bool
    agent_can_continue: bool
    pending_handoffs: tuple[str, ...]
    transition_key: str
    record_unreadable: bool = False


def transition_key(material: Any) -> str:
    """A stable digest of the facts a decision was made on."""
    import hashlib  # on first need: OpenSSL costs a status of no goals 3 ms

    blob = json.dumps(material, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


_CLEARS = {
    "goal_stopped": "you resume the goal (`loopx-chat goal resume GOAL`)",
    "open_blocking_gate": "you decide the open question (the card, or `loopx-chat gate resolve`)",
    "codex_home_mismatch": "loopx-chat runs with the session's own Codex home",
    "record_unreadable": "the unreadable record is repaired or moved out of the state dir",
    "raw_material_detected": "the goal's records carry compact summaries only",
    "turn_running": "the running turn finishes",
    "no_agent_todo": "you Run it, or give it a next step (`loopx-chat handoff record`)",
}


def decide_quota(facts: QuotaFacts) -> dict[str, Any]:
    window: dict[str, Any] | None = None
    if facts.stopped:
        decision, reason = "paused", "goal_stopped"
    elif facts.open_blocking_gate:
        decision, reason = "operator_gate", "open_blocking_gate"
    elif facts.home_mismatch:
        decision, reason = "blocked", "codex_home_mismatch"
    elif facts.record_unreadable:
        decision, reason = "blocked", "record_unreadable"
    elif facts.throttle is not None:
        decision = "throttled"
        reason = (
            "consecutive_failed_turns"
            if facts.throttle["kind"] == "consecutive_failures"
            else "token_budget_spent"
        )
        window = dict(facts.throttle)
    elif facts.raw_material_detected:
        decision, reason = "blocked", "raw_material_detected"
    elif facts.turn_running:
        decision, reason = "waiting", "turn_running"
    elif not facts.agent_can_continue or not facts.pending_handoffs:
        decision, reason = "waiting", "no_agent_todo"
    else:
        decision, reason = "eligible", "eligible"
    clears = window["clears_when"] if window else _CLEARS.get(reason)
    return {
        "schema_version": QUOTA_SCHEMA,
        "decision": decision,
        "reason_code": reason,
        "window": window,
        "clears_when": clears,
        "todo_refs": list(facts.pending_handoffs) if decision == "eligible" else [],
        "transition_key": facts.transition_key,
        "scheduler_hint_only": True,
        "starts_turns": False,
        "bills": False,
        "note": HINT_NOTE,
    }


def quota_facts(facts: GoalFacts, projection: dict[str, Any]) -> QuotaFacts:
    """`projection` is the compact projection status shows for the same facts."""
    first = projection.get("first_screen", {})
    person_gates = [
        g
        for g in facts.gates
        if g.get("gate_id") not in facts.control_gate_ids
        and not str(g.get("gate_id", "")).startswith("home-")
        and g.get("status") == "pending"
        and g.get("blocking", True)
    ]
    material = {
        "outcomes": [(o.get("outcome_id"), o.get("status")) for o in facts.outcomes],
        "gates": [(g.get("gate_id"), g.get("status")) for g in facts.gates],
        "handoffs": list(facts.pending_handoffs),
        "first_screen": first,
    }
    return QuotaFacts(
        stopped=facts.stopped,
        open_blocking_gate=bool(person_gates),
        home_mismatch=facts.home_mismatch,
        throttle=facts.throttle,
        raw_material_detected=bool(
            projection.get("boundary", {}).get("raw_material_detected") or facts.raw_material
        ),
        turn_running=facts.turn_running,
        agent_can_continue=bool(first.get("agent_can_continue")),
        pending_handoffs=facts.pending_handoffs,
        transition_key=transition_key(material),
        record_unreadable=bool(facts.unreadable_records),
    )


def current_quota(facts: GoalFacts, projection: dict[str, Any]) -> dict[str, Any]:
    return decide_quota(quota_facts(facts, projection))


def record_quota(goal_id: str, decision: dict[str, Any], records: GoalLedger) -> dict[str, Any]:
    entry = {
        **decision,
        "decision_id": "quota-" + uuid.uuid4().hex[:12],
        "goal_id": goal_id,
        "created_at": records.goals.now(),
        "actor": "controller",
    }
    with records.goals.locked(goal_id) as folder:
        append_record(folder / "quota.jsonl", entry)
    return entry


def quota_decisions(goal_id: str, records: GoalLedger) -> list[dict[str, Any]]:
    """Every recorded decision of the goal, oldest first."""
    return read_records(records.goals.goal_dir(goal_id) / "quota.jsonl")


# The writeback contract's hint words (a closed set older than `waiting` and `paused`): a
# goal with nothing to do is a quiet skip, a stopped goal is blocked (its reason code says
# `goal_stopped`).
CONTRACT_HINTS = {"waiting": "monitor_quiet_skip", "paused": "blocked"}


def contract_hint(decision: str) -> str:
    return CONTRACT_HINTS.get(decision, decision)

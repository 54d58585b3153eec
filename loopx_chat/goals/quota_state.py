"""The quota decision of a goal from its facts, and the record of decisions made.

Owns `<state>/goals/<goal>/quota.jsonl` (append-only: each decision with its transition key,
so "no material transition since the last decision" can be told) and the mapping from goal
facts and the first screen to `QuotaFacts`. The decision itself is the pure `quota.decide_quota`.
"""

from __future__ import annotations

import uuid
from typing import Any

from loopx_chat.goals.goal_facts import GoalFacts
from loopx_chat.goals.goal_state import GoalRecords, GoalState
from loopx_chat.goals.quota import QUOTA_SCHEMA, QuotaFacts, decide_quota, transition_key
from loopx_chat.state.jsonl import append_record, read_records


def quota_facts(
    facts: GoalFacts,
    projection: dict[str, Any],
    records: GoalRecords,
    state: GoalState | None,
) -> QuotaFacts:
    """`state` is the goal's goal_state, as the caller already read it (or None)."""
    first = projection.get("first_screen", {})
    lane = projection.get("work_lane_contract", {}).get("lane", "monitor")
    material = {
        "lane": lane,
        "outcomes": [o.get("outcome_id") for o in facts.outcomes],
        "gates": [(g.get("gate_id"), g.get("status")) for g in facts.gates],
        "handoffs": [d.get("ref_id") for d in facts.decision_results],
    }
    history = read_records(records.goals.goal_dir(facts.goal_id) / "quota.jsonl", QUOTA_SCHEMA)
    return QuotaFacts(
        open_blocking_gate=bool(first.get("user_action_required")),
        raw_material_detected=bool(projection.get("boundary", {}).get("raw_material_detected")),
        consecutive_failed_turns=facts.consecutive_failed_turns,
        tokens_used=facts.tokens_used,
        token_budget=state.token_budget if state else None,
        lane=str(lane),
        transition_key=transition_key(material),
        last_decision_key=history[-1].get("transition_key") if history else None,
    )


def current_quota(
    facts: GoalFacts,
    projection: dict[str, Any],
    records: GoalRecords,
    state: GoalState | None,
) -> dict[str, Any]:
    return decide_quota(quota_facts(facts, projection, records, state))


def record_quota(goal_id: str, decision: dict[str, Any], records: GoalRecords) -> dict[str, Any]:
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

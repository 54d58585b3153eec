"""quota_decision: should the goal spend its next automatic agent turn? The rule and its record.

The decision (`decide_quota`) is pure, facts in. Rules, first match wins:
1. an open blocking gate → `operator_gate` (`open_blocking_gate`);
2. raw material detected in the goal's facts → `blocked` (`raw_material_detected`);
3. `FAILURE_THRESHOLD` or more consecutive failed turns → `throttled` with the failure window;
4. the token budget spent → `throttled` with the token window;
5. a monitor lane with no material transition since the last decision → `monitor_quiet_skip`;
6. otherwise `eligible`.
It is a scheduler hint only: it never starts a turn and never bills, and says so in its output.

Also owns `<state>/goals/<goal>/quota.jsonl` (append-only: each decision with its transition
key, so "no material transition since the last decision" can be told) and the mapping from
goal facts and the first screen to `QuotaFacts`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from loopx_chat.goals.goal_facts import GoalFacts
from loopx_chat.goals.goal_state import GoalRecords, GoalState
from loopx_chat.state.jsonl import append_record, read_records

QUOTA_SCHEMA = "loopx_chat_quota_decision_v1"
FAILURE_THRESHOLD = 3
HINT_NOTE = "scheduler hint only: it never starts a turn and never bills"


@dataclass(frozen=True)
class QuotaFacts:
    open_blocking_gate: bool
    raw_material_detected: bool
    consecutive_failed_turns: int
    tokens_used: int
    token_budget: int | None
    lane: str
    transition_key: str
    last_decision_key: str | None = None


def transition_key(material: Any) -> str:
    """A stable digest of the facts whose change counts as a material transition."""
    blob = json.dumps(material, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def decide_quota(facts: QuotaFacts) -> dict[str, Any]:
    window: dict[str, Any] | None = None
    if facts.open_blocking_gate:
        decision, reason = "operator_gate", "open_blocking_gate"
    elif facts.raw_material_detected:
        decision, reason = "blocked", "raw_material_detected"
    elif facts.consecutive_failed_turns >= FAILURE_THRESHOLD:
        decision, reason = "throttled", "consecutive_failed_turns"
        window = {
            "kind": "consecutive_failures",
            "count": facts.consecutive_failed_turns,
            "threshold": FAILURE_THRESHOLD,
            "clears_when": "a turn completes or a person records a handoff",
        }
    elif facts.token_budget is not None and facts.tokens_used >= facts.token_budget:
        decision, reason = "throttled", "token_budget_spent"
        window = {"kind": "token_budget", "used": facts.tokens_used, "budget": facts.token_budget}
    elif facts.lane == "monitor" and facts.last_decision_key == facts.transition_key:
        decision, reason = "monitor_quiet_skip", "no_material_transition"
    else:
        decision, reason = "eligible", "eligible"
    return {
        "schema_version": QUOTA_SCHEMA,
        "decision": decision,
        "reason_code": reason,
        "window": window,
        "transition_key": facts.transition_key,
        "scheduler_hint_only": True,
        "starts_turns": False,
        "bills": False,
        "note": HINT_NOTE,
    }


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

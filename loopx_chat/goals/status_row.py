"""One goal's attention row, pure: its facts in, the row of the status document out.

Owns the four plain questions of the spec's first screen (`four_answers`), the row of a goal
(`goal_status`) or of one whose records could not be read (`goal_problem`), the summary of
its records (`record_summary`) and the blockers its first screen shows
(`displayed_blocker_refs`). It reads nothing and writes nothing: the status index
(status_index.py) folds rows with it, and the status document (status.py) orders them. What
it returns comes from the compact projection: no transcript text, credentials, raw output or
local paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loopx_chat.errors import StateError
from loopx_chat.goals.quota import current_quota

if TYPE_CHECKING:
    from loopx_chat.goals.goal_facts import GoalFacts
    from loopx_chat.goals.goal_ledger import GoalState

_WAITING_WORDS = {
    "codex": "Codex (the agent has work it can do now)",
    "user_or_controller": "a person: an owner gate needs a decision",
    "external_evidence": "evidence from the host: the last run was blocked",
    "monitor_signal": "nothing: all is quiet",
}


def four_answers(
    first_screen: dict[str, Any], waiting_on: str, quota: dict[str, Any]
) -> dict[str, str]:
    """The spec's first demo, in plain words. "Can the agent continue" is the quota decision
    in words, so the first screen and the scheduler hint never tell two stories."""
    waiting = _WAITING_WORDS.get(waiting_on, waiting_on)
    actor = first_screen.get("waiting_on")
    if waiting_on == "user_or_controller" and actor:
        waiting = f"the {actor}: an owner gate needs a decision"
    decision, reason = quota["decision"], quota["reason_code"]
    if decision == "eligible":
        can = "yes: " + str(first_screen.get("first_agent_todo") or "continue")
    elif reason == "turn_running":
        can = "no new turn: a turn is running now; let it finish"
    elif decision in ("paused", "throttled"):
        can = f"no: {decision}; clears when {quota['clears_when']}"
    elif decision == "operator_gate":
        can = "no: blocked by an open owner gate"
    elif reason == "no_agent_todo":
        can = "no: nothing to do yet; " + str(quota["clears_when"])
    else:
        can = "no: " + str(first_screen.get("recommended_action") or reason)
    gate_state = first_screen.get("gate_state") or "none"
    if first_screen.get("user_action_required"):
        required = (
            f"gate ({gate_state}): {first_screen.get('first_user_todo') or 'decision needed'}"
        )
    else:
        required = "none"
    if first_screen.get("latest_blocker"):
        latest = "blocked: " + str(first_screen["latest_blocker"])
    elif first_screen.get("latest_validation"):
        latest = "validated: " + str(first_screen["latest_validation"])
    else:
        latest = "no run recorded yet"
    return {
        "waiting_on": waiting,
        "agent_can_continue": can,
        "gate_or_evidence_required": required,
        "latest_run": latest,
    }


def goal_status(facts: GoalFacts) -> dict[str, Any]:
    """The goal's attention row: projection, quota decided on it, and the four answers."""
    # The projection core and the memory adapter load with the first goal to show: a
    # status of no goals (a new install, a script's first call) never needs them.
    from loopx_chat.session_runtime import (
        build_session_runtime_readonly_projection,
        session_runtime_projection_attention,
    )

    projection = build_session_runtime_readonly_projection(**facts.builder_kwargs())
    attention = session_runtime_projection_attention(
        {"session_runtime_readonly_projection": projection}
    )
    assert attention is not None  # the builder always emits a v0 projection
    compact = attention["session_runtime_projection"]
    first_screen = compact.get("first_screen", {})
    quota = current_quota(facts, compact)
    return {
        "goal_id": facts.goal_id,
        "status": attention["status"],
        "severity": attention["severity"],
        "waiting_on": attention["waiting_on"],
        "recommended_action": attention["recommended_action"],
        "stopped": facts.stopped,
        "answers": four_answers(first_screen, attention["waiting_on"], quota),
        "quota": quota,
        "projection": compact,
    }


def goal_problem(goal_id: str, exc: StateError) -> dict[str, Any]:
    """The attention-queue entry of a goal whose records could not be read."""
    return {
        "goal_id": goal_id,
        "status": "problem",
        "severity": "high",
        "waiting_on": "owner",
        "recommended_action": "repair_state",
        "error_code": exc.error_code,
        "error": exc.message,
        "answers": {
            "waiting_on": "the owner: this goal's records could not be read",
            "agent_can_continue": "no: its records could not be read",
            "gate_or_evidence_required": f"repair ({exc.error_code}): {exc.message}",
            "latest_run": "unknown",
        },
        "projection": {},
    }


def record_summary(
    state: GoalState | None,
    rewards: Sequence[Mapping[str, Any]],
    proposals: Sequence[Mapping[str, Any]],
    memory: dict[str, Any] | None,
) -> dict[str, Any]:
    """`goal_record_summary` over records already read (pure)."""
    from loopx_chat.session_runtime.writeback_contract import REWARD_LABELS  # see goal_status

    return {
        **({"memory": memory} if memory is not None else {}),
        "goal_state": (
            {
                "objective": state.objective,
                "acceptance": list(state.acceptance),
                "stop_condition": state.stop_condition,
                "boundary": state.boundary,
                "non_goals": list(state.non_goals),
                "authority_sources": list(state.authority_sources),
                "approval_policy": state.approval_policy,
                "plan": state.plan,
            }
            if state
            else None
        ),
        "human_rewards": {
            label: sum(r["label"] == label for r in rewards) for label in REWARD_LABELS
        },
        # Advisory only: never a todo until promoted into a handoff packet.
        "advisory_proposals": sum(p["status"] == "advisory" for p in proposals),
    }


def displayed_blocker_refs(facts: GoalFacts, first_screen: dict[str, Any]) -> list[str]:
    """Ids of the blockers this first screen shows: the blocking gate, the latest blocker."""
    refs: list[str] = []
    if first_screen.get("user_action_required"):
        for gate in facts.gates:
            if gate.get("status") in ("pending", "blocked") and gate.get("blocking", True):
                if gate.get("gate_id") not in facts.control_gate_ids:
                    refs.append(str(gate.get("gate_id")))
                break
    if first_screen.get("latest_blocker"):
        failing = [o for o in facts.outcomes if o.get("blocker")]
        if failing:
            refs.append(str(max(failing, key=lambda o: str(o.get("created_at")))["outcome_id"]))
    return refs

"""The public contract of each goal, from the state the first screen reads.

Owns which goals get a `session_runtime_readonly_projection_v0` contract (every goal status
lists, including one known only through a session that cannot be read) and the fail-closed
contract of a goal whose records cannot be read: a blocking owner gate, never a missing goal.
The contract itself is built by the pure core (session_runtime/contract.py); this module only
reads owner-local state through the stores. It writes nothing, and never records that an
owner saw anything (a contract is read by programs).
"""

from __future__ import annotations

from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_facts import GoalFacts, facts_from_state, known_goal_ids
from loopx_chat.goals.unreadable import (
    attribute,
    goal_records_gate,
    require_listed_goal,
    with_unreadable,
)
from loopx_chat.state.session_store import SessionStore

CONTRACTS_SCHEMA_VERSION = "loopx_chat_contracts_v1"


def goal_contract(facts: GoalFacts) -> dict[str, Any]:
    """One goal's v0 contract from its facts (pure)."""
    from loopx_chat.session_runtime.contract import build_session_runtime_readonly_contract

    return build_session_runtime_readonly_contract(**facts.builder_kwargs())


def collect_contracts(
    store: SessionStore, goals: GateStore, codex_home: str, goal_id: str | None = None
) -> list[dict[str, Any]]:
    """The contract of every goal (or of `goal_id`, `goal_not_found` when no record, readable
    or not, names it), in goal id order."""
    listing = store.list()
    unreadable = attribute(listing.problems, goals)
    known = {*known_goal_ids(listing.sessions, goals), *unreadable.by_goal}
    if goal_id is not None and goal_id not in known:
        require_listed_goal(store, goals, goal_id)  # goal_not_found, naming the goals there are
    contracts = []
    for g in [goal_id] if goal_id is not None else sorted(known):
        try:
            facts = facts_from_state(
                g, store=store, goals=goals, codex_home=codex_home, all_sessions=listing.sessions
            )
            facts = with_unreadable(facts, unreadable.by_goal.get(g, ()))
        except StateError as exc:
            facts = GoalFacts(goal_id=g, gates=[goal_records_gate(g, exc.error_code)])
        contracts.append(goal_contract(facts))
    return contracts


def contracts_document(contracts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "ok": True,
        "schema_version": CONTRACTS_SCHEMA_VERSION,
        "goal_count": len(contracts),
        "contracts": contracts,
    }

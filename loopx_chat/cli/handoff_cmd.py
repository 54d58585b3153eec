"""`loopx-chat handoff record|list`: handoff packets, the approved next action for the agent
with its stop condition (`GateStore`)."""

from __future__ import annotations

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_ok,
    json_option,
    nothing_found,
)
from loopx_chat.cli.options import known_goal
from loopx_chat.goals.gate_store import validate_goal_id
from loopx_chat.goals.goal_facts import goal_turns, handoff_consumers


@click.group()
def handoff() -> None:
    """Handoff packets: the approved next action for the agent, with a stop condition."""


@handoff.command("record")
@click.option("--goal", "goal_id", required=True, help="Goal the handoff is for (created if new).")
@click.option("--next-action", required=True, help="What the agent may do next, in short words.")
@click.option("--stop-condition", required=True, help="When the agent must stop and report.")
@click.option(
    "--evidence", "evidence", multiple=True, help="An id pointing at evidence (repeatable)."
)
@json_option
@click.pass_obj
def handoff_record(
    cli: CliContext,
    goal_id: str,
    next_action: str,
    stop_condition: str,
    evidence: tuple[str, ...],
    as_json: bool,
) -> None:
    """Record a handoff packet for GOAL."""
    packet = cli.gate_store().record_handoff(
        validate_goal_id(goal_id), next_action, stop_condition, evidence
    )
    line = f"{packet.handoff_id}: {packet.next_action} (stop when: {packet.stop_condition})"
    emit_ok({"handoff": packet.to_dict()}, as_json, [line])


@handoff.command("list")
@click.option("--goal", "goal_id", required=True, help="Goal whose handoffs to list.")
@json_option
@click.pass_obj
def handoff_list(cli: CliContext, goal_id: str, as_json: bool) -> None:
    """List the handoff packets of GOAL: pending, or consumed (by which turn)."""
    handoffs = cli.gate_store().handoffs(known_goal(cli, goal_id))
    consumers = handoff_consumers(handoffs, goal_turns(cli.store(), goal_id))
    packets = []
    for h in handoffs:
        turn = consumers[h.handoff_id]
        packets.append(
            {
                **h.to_dict(),
                "state": "consumed" if turn else "pending",
                "consumed_by_turn": turn.turn_id if turn else None,
                "consumed_in_session": turn.session_id if turn else None,
            }
        )
    lines = (
        f"{h['handoff_id']}  {h['created_at']}  "
        + (f"consumed by {h['consumed_by_turn']}" if h["consumed_by_turn"] else "pending")
        + f"  {h['next_action']}"
        for h in packets
    )
    emit_ok({"handoffs": packets}, as_json, lines, empty=nothing_found("handoffs", goal_id))

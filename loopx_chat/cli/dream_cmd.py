"""`loopx-chat dream record|list|promote|dismiss|close`: dreaming proposals, advisory ideas
that cause nothing until promoted into a handoff packet; an unknown goal is
`goal_not_found`, never created."""

from __future__ import annotations

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_ok,
    json_option,
    nothing_found,
)
from loopx_chat.cli.options import actor_option, known_goal
from loopx_chat.goals.gate_store import validate_goal_id


@click.group()
def dream() -> None:
    """dreaming_proposal: advisory exploration ideas; nothing happens until promoted."""


@dream.command("record")
@click.option("--goal", "goal_id", required=True, help="Goal the idea is for (it must exist).")
@click.option("--title", required=True, help="The idea, in a few words.")
@click.option("--rationale", required=True, help="Why it might be worth exploring.")
@click.option("--next-action", required=True, help="What the agent would do if promoted.")
@actor_option("agent", "Who proposes it")
@json_option
@click.pass_obj
def dream_record(
    cli: CliContext,
    goal_id: str,
    title: str,
    rationale: str,
    next_action: str,
    actor: str,
    as_json: bool,
) -> None:
    """Record an advisory idea for GOAL; it causes nothing until `dream promote`."""
    records, gid = cli.goal_ledger(), known_goal(cli, goal_id)
    entry = records.record_proposal(
        gid,
        title=title,
        rationale=rationale,
        next_action=next_action,
        actor=actor,
    )
    emit_ok({"proposal": entry}, as_json, [f"{entry['proposal_id']}: {title} (advisory)"])


@dream.command("list")
@click.option("--goal", "goal_id", required=True, help="Goal whose proposals to list.")
@json_option
@click.pass_obj
def dream_list(cli: CliContext, goal_id: str, as_json: bool) -> None:
    """List GOAL's proposals with their status (advisory, promoted, dismissed)."""
    entries = cli.goal_ledger().proposals(known_goal(cli, goal_id))
    lines = (f"{e['proposal_id']}  {e['status']:9}  {e['title']}" for e in entries)
    emit_ok({"proposals": entries}, as_json, lines, empty=nothing_found("proposals", goal_id))


@dream.command("promote")
@click.argument("proposal_id")
@click.option("--goal", "goal_id", required=True, help="Goal the proposal belongs to.")
@click.option("--stop-condition", required=True, help="When the agent must stop and report.")
@actor_option("owner", "Who promotes it")
@json_option
@click.pass_obj
def dream_promote(
    cli: CliContext, proposal_id: str, goal_id: str, stop_condition: str, actor: str, as_json: bool
) -> None:
    """Turn PROPOSAL_ID into a handoff packet (only now can it cause action)."""
    promoted, packet = cli.goal_ledger().promote(
        validate_goal_id(goal_id), proposal_id, stop_condition=stop_condition, actor=actor
    )
    emit_ok(
        {"proposal": promoted, "handoff": packet.to_dict()},
        as_json,
        [f"{proposal_id} promoted to {packet.handoff_id}"],
    )


def _closing_command(name: str, event: str, doc: str) -> None:
    """`dream dismiss` and `dream close`: the same checked, locked write, another event."""

    @dream.command(name, help=doc)
    @click.argument("proposal_id")
    @click.option("--goal", "goal_id", required=True, help="Goal the proposal belongs to.")
    @actor_option("owner", "Who closes it")
    @json_option
    @click.pass_obj
    def command(cli: CliContext, proposal_id: str, goal_id: str, actor: str, as_json: bool) -> None:
        entry = cli.goal_ledger().dismiss(
            validate_goal_id(goal_id), proposal_id, actor=actor, event=event
        )
        emit_ok({"proposal": entry}, as_json, [f"{proposal_id} {event}"])


_closing_command("dismiss", "dismissed", "Dismiss PROPOSAL_ID: it stays as advisory history.")


_closing_command("close", "closed", "Close PROPOSAL_ID without acting on it (done or overtaken).")

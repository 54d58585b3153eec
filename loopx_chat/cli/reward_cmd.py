"""`loopx-chat reward record|list`: human_reward, a person's judgment on a run, kept apart
from any automated score; an unknown goal is `goal_not_found`, never created."""

from __future__ import annotations

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_ok,
    json_option,
    nothing_found,
)
from loopx_chat.cli.options import actor_option, known_goal
from loopx_chat.goals.goal_facts import (
    goal_turns,
)
from loopx_chat.session_runtime.writeback_contract import REWARD_LABELS


@click.group()
def reward() -> None:
    """human_reward: a person's judgment on a run, separate from any automated score."""


@reward.command("record")
@click.option("--goal", "goal_id", required=True, help="Goal the run worked for.")
@click.option("--turn", "run_ref", required=True, help="The judged run: a turn id.")
@click.option("--label", type=click.Choice(REWARD_LABELS), required=True, help="The judgment.")
@click.option("--reason", required=True, help="Why, in short words.")
@actor_option("owner", "Whose judgment it is")
@json_option
@click.pass_obj
def reward_record(
    cli: CliContext, goal_id: str, run_ref: str, label: str, reason: str, actor: str, as_json: bool
) -> None:
    """Record a person's judgment of a turn of GOAL; a second one for the turn replaces it."""
    records, gid = cli.goal_ledger(), known_goal(cli, goal_id)
    turns = {t.turn_id for t in goal_turns(cli.store(), gid)}
    entry = records.record_reward(
        gid, run_ref=run_ref, label=label, reason=reason, actor=actor, goal_turns=turns
    )
    replaced = f" (replaces {entry['replaces']})" if entry["replaces"] else ""
    emit_ok({"reward": entry}, as_json, [f"{entry['reward_id']}: {label} for {run_ref}{replaced}"])


@reward.command("list")
@click.option("--goal", "goal_id", required=True, help="Goal whose judgments to list.")
@json_option
@click.pass_obj
def reward_list(cli: CliContext, goal_id: str, as_json: bool) -> None:
    """The rewards of GOAL: one per judged turn, and every earlier one as history."""
    records = cli.goal_ledger()
    history = records.rewards(known_goal(cli, goal_id))
    current = {e["reward_id"] for e in records.current_rewards(goal_id)}
    entries = [{**e, "current": e["reward_id"] in current} for e in history]
    lines = (
        f"{e['reward_id']}  {e['created_at']}  {e['label']:5}  {e['run_ref']}: {e['reason']}"
        + ("" if e["current"] else "  (replaced)")
        for e in entries
    )
    emit_ok({"rewards": entries}, as_json, lines, empty=nothing_found("rewards", goal_id))

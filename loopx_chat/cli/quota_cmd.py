"""`loopx-chat quota`: should each goal spend its next automatic turn? A scheduler hint that
is recorded and starts nothing; an unknown goal is `goal_not_found`, never created."""

from __future__ import annotations

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    json_option,
    nothing_found,
)
from loopx_chat.cli.options import known_goal
from loopx_chat.goals.goal_facts import (
    facts_from_state,
    known_goal_ids,
)
from loopx_chat.goals.quota import record_quota
from loopx_chat.goals.status_row import goal_status


@click.command("quota")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@json_option
@click.pass_obj
def quota(cli: CliContext, goal_id: str | None, as_json: bool) -> None:
    """Should each goal spend its next automatic turn? A scheduler hint; it starts nothing.

    The same answer as status's "agent can continue now"."""
    store, records = cli.store(), cli.goal_ledger()
    sessions = store.list().sessions
    ids = [known_goal(cli, goal_id)] if goal_id else known_goal_ids(sessions, records.goals)
    decisions = []
    codex_home = str(cli.binding().path)  # resolved once, not once per goal
    for gid in ids:
        facts = facts_from_state(
            gid,
            store=store,
            goals=records.goals,
            codex_home=codex_home,
            all_sessions=sessions,
        )
        decisions.append(record_quota(gid, goal_status(facts)["quota"], records))
    if as_json:
        emit_json({"ok": True, "decisions": decisions})
        return
    for d in decisions:
        clears = f"; clears when {d['clears_when']}" if d["decision"] != "eligible" else ""
        click.echo(f"{d['goal_id']}: {d['decision']} ({d['reason_code']}{clears})")
    click.echo(f"({decisions[0]['note']})" if decisions else nothing_found("goals"))

"""`loopx-chat status`: for each goal, who it waits on and whether the agent can continue.

It reads owner-local state and the bound home's rollout facts; the only write is the record
that an owner saw the status (`record_owner_view`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    json_option,
    nothing_found,
)
from loopx_chat.codex.rollouts.host_facts import scan_bound_home
from loopx_chat.goals.status import collect_status, record_owner_view

if TYPE_CHECKING:
    from loopx_chat.goals.badges import RunFacts


@click.command("status")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@click.option(
    "--viewer",
    type=click.Choice(["owner", "script"]),
    default=None,
    help="Who reads this. Default: owner on a terminal without --json, else script. Only "
    "an owner's read counts as the owner having seen a blocker (a metric).",
)
@click.option(
    "--contract",
    is_flag=True,
    help="Print each goal's public read-only contract (session_runtime_readonly_projection_v0)"
    " as JSON instead: what another product surface reads.",
)
@json_option
@click.pass_obj
def status(
    cli: CliContext, goal_id: str | None, viewer: str | None, contract: bool, as_json: bool
) -> None:
    """For each goal: who it waits on, can the agent continue, what gate, what last ran."""
    if contract:
        from loopx_chat.goals.contract_view import collect_contracts, contracts_document

        binding = cli.binding()
        found = collect_contracts(cli.store(), cli.gate_store(), str(binding.path), goal_id)
        emit_json(contracts_document(found))
        return
    if goal_id:
        from loopx_chat.goals.unreadable import require_listed_goal

        # A goal known only through a session that cannot be read is still listed.
        require_listed_goal(cli.store(), cli.gate_store(), goal_id)
    binding = cli.binding()
    scan = scan_bound_home(cli.state_dir, binding.path)
    doc = collect_status(
        cli.store(), cli.gate_store(), str(binding.path), goal_id, surface="cli", host=scan.threads
    )
    if viewer == "owner":
        record_owner_view(cli.gate_store(), doc, "cli_owner")
    elif viewer is None and not as_json and sys.stdout.isatty():
        record_owner_view(cli.gate_store(), doc, "cli_tty")
    doc["host_scan"] = scan.summary()
    runs = _host_goals(cli, doc)
    # The badge and the run's sentence: the page's own words (`goals/badges.py`).
    from loopx_chat.goals.badges import goal_badge, row_actor, run_is_live, run_says

    for row in doc["attention_queue"]:
        deciding = (
            row.get("status") == "problem"
            or bool(row.get("problems"))
            or (row.get("quota") or {}).get("reason_code") == "open_blocking_gate"
        )
        facts = runs.get(row["goal_id"])
        row["badge"] = goal_badge(row_actor(row, deciding), deciding, facts).code
        if facts is not None:
            row["host_goal"]["says"] = run_says(facts)[1]
    if as_json:
        emit_json(doc)
        return
    from loopx_chat.goals.badges import BADGES
    from loopx_chat.goals.words import humanize, quota_words

    for record in doc.get("unreadable_records") or ():
        click.echo(f"UNREADABLE {record['problem']} (no goal names it)")
        click.echo(f"  what to do:              {record['what_to_do']}")
    if not doc["attention_queue"] and not doc.get("unreadable_records"):
        click.echo(nothing_found("goals"))
    for goal in doc["attention_queue"]:
        answers = goal["answers"]
        facts = runs.get(goal["goal_id"])
        click.echo(f"goal {goal['goal_id']}  [{BADGES[goal['badge']].words}]")
        state = goal.get("goal_state") or {}
        if state.get("objective"):
            click.echo(f"  objective:               {state['objective']}")
        for criterion in state.get("acceptance") or ():
            click.echo(f"  acceptance:              {criterion}")
        if state.get("stop_condition"):
            click.echo(f"  stop when:               {state['stop_condition']}")
        for problem in goal.get("problems") or ():
            click.echo(f"  PROBLEM:                 {problem['problem']}")
            click.echo(f"  what to do:              {problem['what_to_do']}")
        if goal.get("stopped"):
            click.echo("  STOPPED:                 by the owner (`loopx-chat goal resume`)")
        if state.get("boundary"):
            click.echo(f"  boundary:                {state['boundary']}")
        if facts is not None:
            click.echo(f"  run:                     {goal['host_goal']['says']}")
        elif goal.get("host_goal"):
            click.echo(f"  Codex goal:              {goal['host_goal']['words']}")
        click.echo(f"  waiting on:              {humanize(answers['waiting_on'])}")
        click.echo(f"  agent can continue now:  {humanize(answers['agent_can_continue'])}")
        click.echo(f"  gate or evidence needed: {humanize(answers['gate_or_evidence_required'])}")
        click.echo(f"  latest run:              {humanize(answers['latest_run'])}")
        host = goal.get("host") or {}
        live = run_is_live(facts)  # Codex's turn in progress is expected then
        if host.get("stale") and not live:
            lag = f", {host['behind_seconds']}s" if host.get("behind_seconds") is not None else ""
            click.echo(
                f"  STALE:                   Codex is {host['behind_turns']} turn(s) ahead{lag}"
            )
        if goal.get("reconcile_reason") and not live:
            reason = humanize(goal["reconcile_reason"])
            click.echo(f"  Codex and records differ: {reason}")
        quota = goal.get("quota") or {}
        if quota:
            words = quota_words(str(quota["decision"]), str(quota["reason_code"]))
            click.echo(f"  next automatic turn:     {words} (a scheduler hint)")


def _host_goals(cli: CliContext, doc: dict[str, Any]) -> dict[str, RunFacts]:
    """Each goal loopx-chat ran on Codex's loop (or saw a loop on) gets its host goal, read
    now through an app-server that loads no thread; other goals spawn nothing. The facts
    each run's badge is decided on, by goal."""
    from loopx_chat.goals.goal_runs import GoalRuns

    runs = GoalRuns(cli.gate_store())
    rows = [
        row
        for row in doc["attention_queue"]
        if row.get("status") != "problem"
        and (runs.latest(row["goal_id"]) or runs.host_loop_seen(row["goal_id"]))
    ]
    if not rows:
        return {}
    from loopx_chat.controller.chat_controller import ChatController
    from loopx_chat.controller.host_goal_view import host_goal_view

    controller = ChatController(
        store=cli.store(), environ=cli.environ, cwd=cli.cwd, codex_bin=cli.codex_bin
    )
    facts: dict[str, RunFacts] = {}
    with controller:
        for row in rows:
            view = host_goal_view(controller, cli.gate_store(), row["goal_id"])
            if view is not None and "facts" in view:
                facts[row["goal_id"]] = view.pop("facts")
            row["host_goal"] = view
    return facts

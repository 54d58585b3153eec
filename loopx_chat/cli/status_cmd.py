"""`loopx-chat status`: for each goal, who it waits on and whether the agent can continue.

It reads owner-local state and the bound home's rollout facts; it writes only the record
that an owner saw the status (`record_owner_view`) and the persisted status index (a cache,
goals/status_index.py)."""

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
from loopx_chat.goals.status_index import StatusIndex, index_path
from loopx_chat.goals.status_render import status_text

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
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also list finished goals (accepted, or idle for 30 days), which the first screen "
    "only counts.",
)
@json_option
@click.pass_obj
def status(
    cli: CliContext,
    goal_id: str | None,
    viewer: str | None,
    contract: bool,
    show_all: bool,
    as_json: bool,
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
    # Rows of goals whose files did not change since the last status come from the index.
    index = StatusIndex(
        cli.store(), cli.gate_store(), str(binding.path), path=index_path(cli.state_dir)
    )
    doc = collect_status(
        cli.store(),
        cli.gate_store(),
        str(binding.path),
        goal_id,
        surface="cli",
        host=scan.threads,
        index=index,
        include_archived=show_all,
    )
    if viewer == "owner":
        record_owner_view(cli.gate_store(), doc, "cli_owner")
    elif viewer is None and not as_json and sys.stdout.isatty():
        record_owner_view(cli.gate_store(), doc, "cli_tty")
    doc["host_scan"] = scan.summary()
    runs = _host_goals(cli, doc, index)
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
        # Each row's text is kept with the index and laid out again only when it changed.
        text, kept = status_text(doc, index.bare_rows(), index.texts)
        # Rows this look did not lay out (another goal, an archived one) keep their texts.
        index.texts = {g: t for g, t in {**index.texts, **kept}.items() if g in index.entries}
        index.save()
        click.echo(text)
        return
    index.save()
    from loopx_chat.goals.badges import BADGES
    from loopx_chat.goals.words import humanize, quota_words

    for record in doc.get("unreadable_records") or ():
        click.echo(f"UNREADABLE {record['problem']} (no goal names it)")
        click.echo(f"  what to do:              {record['what_to_do']}")
    archived = doc["archive"]
    if not doc["attention_queue"] and not archived["count"] and not doc.get("unreadable_records"):
        click.echo(nothing_found("goals"))
    for goal in [*doc["attention_queue"], *archived.get("goals", ())]:
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
        if goal.get("archived_because"):
            click.echo(f"  archived:                {goal['archived_because']} (finished)")
    if archived["count"] and not show_all:
        click.echo(
            f"{archived['count']} finished goal(s) archived: `loopx-chat status --all` lists them"
        )


def _host_goals(cli: CliContext, doc: dict[str, Any], index: StatusIndex) -> dict[str, RunFacts]:
    """Each goal loopx-chat ran on Codex's loop (or saw a loop on) gets its host goal, read
    now through an app-server that loads no thread; other goals spawn nothing (which ran is
    folded with the row: no goal's run log is read again). The facts each run's badge is
    decided on, by goal."""
    rows = [
        row
        for row in doc["attention_queue"]
        if row.get("status") != "problem" and index.entries[row["goal_id"]].ran
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

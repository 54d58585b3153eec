"""`loopx-chat goal set|show|list|stop|resume|memory`: the goal's own record (`GoalLedger`).

Only `goal set` creates a goal; the others refuse a goal no record names (`goal_not_found`)."""

from __future__ import annotations

from typing import Any

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    emit_ok,
    json_option,
    nothing_found,
    read_json_input,
)
from loopx_chat.cli.options import actor_option, known_goal
from loopx_chat.errors import StateError, UsageError
from loopx_chat.goals.gate_store import validate_goal_id


@click.group()
def goal() -> None:
    """goal_state: objective, non-goals, authority sources, current boundary."""


@goal.command("set")
@click.argument("goal_id")
@click.option("--objective", default=None, help="What the goal is for, in short words.")
@click.option(
    "--acceptance",
    "acceptance",
    multiple=True,
    help="A criterion that says the goal is met (at least one; repeat for more).",
)
@click.option("--stop-condition", default=None, help="When the agent must stop and ask.")
@click.option("--non-goal", "non_goals", multiple=True, help="Something out of scope (repeatable).")
@click.option(
    "--authority",
    "authority_sources",
    multiple=True,
    help="Who or what may direct the goal, e.g. owner or a doc id (repeatable).",
)
@click.option("--boundary", default=None, help="What the agent may and may not touch.")
@click.option(
    "--token-budget", type=click.IntRange(min=1), default=None, help="Tokens the goal may spend."
)
@click.option(
    "--approval",
    "approval_policy",
    default=None,
    metavar="never|on-request|untrusted",
    help="What Codex may ask you before it acts on this goal's turns and runs (a command's "
    "own --approval wins; without either, the service's default, else never).",
)
@click.option(
    "--plan/--no-plan",
    "plan",
    default=None,
    help="Run this goal's chat turns in Codex's Plan mode (not `goal run`: Codex continues "
    "no goal in Plan mode).",
)
@click.option(
    "--resume-after-usage-limit/--stop-at-usage-limit",
    "resume_after_usage_limit",
    default=None,
    help="When the account's usage limit stops a run of this goal, wait for the reset time "
    "Codex reported and go on (default: stop at the limit).",
)
@click.option(
    "--from-json",
    "from_json",
    default=None,
    help="Fields as a JSON object (same names) from a file or -; raw-material keys are refused.",
)
@actor_option("owner", "Who sets it")
@json_option
@click.pass_obj
def goal_set(
    cli: CliContext,
    goal_id: str,
    objective: str | None,
    acceptance: tuple[str, ...],
    stop_condition: str | None,
    non_goals: tuple[str, ...],
    authority_sources: tuple[str, ...],
    boundary: str | None,
    token_budget: int | None,
    approval_policy: str | None,
    plan: bool | None,
    resume_after_usage_limit: bool | None,
    from_json: str | None,
    actor: str,
    as_json: bool,
) -> None:
    """Set (or change) GOAL_ID's goal_state; the previous value stays in its history."""
    fields: dict[str, Any] = {}
    if from_json is not None:
        loaded = read_json_input(from_json, "--from-json", limit=1 << 20)
        if not isinstance(loaded, dict):
            raise UsageError("--from-json must hold a JSON object", error_code="input_invalid")
        fields.update(loaded)
    for key, value in (
        ("objective", objective),
        ("stop_condition", stop_condition),
        ("boundary", boundary),
        ("token_budget", token_budget),
        ("approval_policy", approval_policy),
        ("plan", plan),
        ("resume_after_usage_limit", resume_after_usage_limit),
    ):
        if value is not None:
            fields[key] = value
    if acceptance:
        fields["acceptance"] = list(acceptance)
    if non_goals:
        fields["non_goals"] = list(non_goals)
    if authority_sources:
        fields["authority_sources"] = list(authority_sources)
    state = cli.goal_ledger().set_goal_state(validate_goal_id(goal_id), fields, actor=actor)
    emit_ok({"goal_state": state.to_dict()}, as_json, [f"{goal_id}: {state.objective}"])


@goal.command("show")
@click.argument("goal_id")
@click.option("--history", is_flag=True, help="Also show every earlier value.")
@json_option
@click.pass_obj
def goal_show(cli: CliContext, goal_id: str, history: bool, as_json: bool) -> None:
    """Show GOAL_ID's goal_state (and with --history every earlier value)."""
    records = cli.goal_ledger()
    state = records.goal_state(validate_goal_id(goal_id))
    if state is None:
        raise UsageError(f"goal {goal_id} has no goal_state yet", error_code="goal_state_missing")
    doc: dict[str, Any] = {"goal_state": state.to_dict()}
    if history:
        doc["history"] = records.goal_state_history(goal_id)
    if as_json:
        emit_json({"ok": True, **doc})
        return
    click.echo(f"objective:  {state.objective}")
    for criterion in state.acceptance:
        click.echo(f"acceptance: {criterion}")
    click.echo(f"stop when:  {state.stop_condition or '-'}")
    click.echo(f"boundary:   {state.boundary or '-'}")
    click.echo(f"non-goals:  {', '.join(state.non_goals) or '-'}")
    click.echo(f"authority:  {', '.join(state.authority_sources) or '-'}")
    click.echo(f"budget:     {state.token_budget or '-'} tokens")
    click.echo(f"approval:   {state.approval_policy or '- (the default)'}")
    click.echo(f"plan mode:  {'-' if state.plan is None else ('on' if state.plan else 'off')}")
    for entry in doc.get("history", []):
        click.echo(f"  {entry['created_at']} by {entry['actor']}: {entry['objective']}")


@goal.command("list")
@json_option
@click.pass_obj
def goal_list(cli: CliContext, as_json: bool) -> None:
    """Goals with a goal_state."""
    records = cli.goal_ledger()
    states, problems = [], []
    for gid in records.goals.goal_ids():
        try:  # one goal's unreadable log never hides the others
            if state := records.goal_state(gid):
                states.append(state)
        except StateError as exc:
            problems.append({"goal_id": gid, **exc.to_dict()})
    lines = [
        *(f"{s.goal_id}: {s.objective}" for s in states),
        *(f"{p['goal_id']}: error [{p['error_code']}]: {p['error']}" for p in problems),
    ]
    emit_ok(
        {"goals": [s.to_dict() for s in states], "problems": problems},
        as_json,
        lines,
        empty=nothing_found("goals with a goal_state"),
    )


@goal.command("stop")
@click.argument("goal_id")
@click.option("--reason", default=None, help="Why, in a few public words (shown on status).")
@actor_option("owner", "Who stops it")
@json_option
@click.pass_obj
def goal_stop(cli: CliContext, goal_id: str, reason: str | None, actor: str, as_json: bool) -> None:
    """Stop GOAL_ID: no automatic turn until `goal resume` (quota says `paused`)."""
    records, gid = cli.goal_ledger(), known_goal(cli, goal_id)
    entry = records.set_stopped(gid, True, reason=reason, actor=actor)
    emit_ok({"lifecycle": entry}, as_json, [f"{gid}: stopped (resume with `goal resume {gid}`)"])


@goal.command("resume")
@click.argument("goal_id")
@actor_option("owner", "Who resumes it")
@json_option
@click.pass_obj
def goal_resume(cli: CliContext, goal_id: str, actor: str, as_json: bool) -> None:
    """Resume a stopped GOAL_ID."""
    records, gid = cli.goal_ledger(), known_goal(cli, goal_id)
    entry = records.set_stopped(gid, False, actor=actor)
    emit_ok({"lifecycle": entry}, as_json, [f"{gid}: resumed"])


@goal.command("memory")
@click.argument("goal_id")
@click.option(
    "--input",
    "source",
    default=None,
    help='JSON {"issue": {...}, "memory": {...}} (a file, or - for stdin): the OpenViking '
    "memory input status shows as the goal's `memory`.",
)
@click.option("--clear", is_flag=True, help="Remove the goal's memory input (history kept).")
@actor_option("owner", "Who sets it")
@json_option
@click.pass_obj
def goal_memory(
    cli: CliContext, goal_id: str, source: str | None, clear: bool, actor: str, as_json: bool
) -> None:
    """Set, clear or show GOAL_ID's OpenViking memory input (read-only preview refs).

    Stored is what the read-only adapter made of it (never raw material, never a retrieval);
    `status --json` and /status.json show it as the goal's `memory`."""
    # The OpenViking adapter loads for this command only (not for `goal run` or `goal set`).
    from loopx_chat.goals.memory_input import clear_memory_input, memory_field, set_memory_input

    records, gid = cli.goal_ledger(), known_goal(cli, goal_id)
    if source is not None and clear:
        raise UsageError("give --input or --clear, not both", error_code="usage_error")
    if clear:
        entry = clear_memory_input(records, gid, actor=actor)
        emit_ok({"memory_input": entry}, as_json, [f"{gid}: memory input cleared"])
        return
    if source is not None:
        doc = read_json_input(source, "memory input")
        entry = set_memory_input(records, gid, doc, actor=actor)
        count = len(entry["memory"]["candidate_refs"])
        emit_ok({"memory_input": entry}, as_json, [f"{gid}: memory input set ({count} refs)"])
        return
    field = memory_field(records, gid)
    if field is None:
        emit_ok({"memory": None}, as_json, [f"{gid}: no memory input"])
        return
    lines = [f"{gid}: {field.get('namespace')} ({field.get('memory_state')})"] + [
        f"  {c['memory_ref_id']}  {c['source_kind']}  {c['score_bucket']}  {c['summary']}"
        for c in field.get("candidate_refs", ())
    ]
    emit_ok({"memory": field}, as_json, lines)


def _add_run_commands() -> None:
    """`goal run` (and its owner decisions) live in their own module; they join `goal` here."""
    from loopx_chat.cli.goal_follow import goal_follow
    from loopx_chat.cli.goal_run import goal_accept, goal_reopen, goal_run

    for command in (goal_run, goal_accept, goal_reopen, goal_follow):
        goal.add_command(command)


_add_run_commands()

"""`loopx-chat project|status|gate|handoff`: the read-only projection and goal records."""

from __future__ import annotations

import sys
from typing import Any

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    emit_ok,
    json_option,
    nothing_found,
    read_json_input,
    renders_errors,
)
from loopx_chat.cli.delegation import service_for
from loopx_chat.cli.options import actor_option, known_goal
from loopx_chat.codex.rollouts.host_facts import scan_bound_home
from loopx_chat.errors import StateError, UsageError
from loopx_chat.goals.goal_facts import goal_turns, handoff_consumers
from loopx_chat.goals.goal_store import DECISIONS, GoalStore, validate_goal_id
from loopx_chat.goals.status import collect_status, record_owner_view

GROUPS = ("sessions", "events", "outcomes", "gates", "artifacts", "decision_results")


def _goals(cli: CliContext) -> GoalStore:
    return GoalStore(cli.state_dir)


@click.command("project")
@click.option(
    "--input", "source", required=True, help="JSON file of compact facts, or - for stdin."
)
@click.option("--goal", "goal_id", default=None, help="Goal id (default: the input's goal_id).")
@click.option("--compact", is_flag=True, help="Print the compact, public-safe form.")
@click.pass_obj
@renders_errors
def project(cli: CliContext, source: str, goal_id: str | None, compact: bool) -> None:
    """Project compact session facts (JSON in) into the first screen (JSON out)."""
    from loopx_chat.session_runtime import (
        build_session_runtime_readonly_projection,
        compact_session_runtime_readonly_projection,
    )

    doc = read_json_input(source, "input")
    if not isinstance(doc, dict):
        raise UsageError(
            'input must be a JSON object like {"goal_id": ..., "sessions": [...], ...}',
            error_code="input_invalid",
        )
    groups = {name: doc.get(name) for name in GROUPS}
    projection = build_session_runtime_readonly_projection(
        goal_id=goal_id or doc.get("goal_id") or "goal", **groups
    )
    emit_json(compact_session_runtime_readonly_projection(projection) if compact else projection)


@click.command("status")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@click.option(
    "--viewer",
    type=click.Choice(["owner", "script"]),
    default=None,
    help="Who reads this. Default: owner on a terminal without --json, else script. Only "
    "an owner's read counts as the owner having seen a blocker (a metric).",
)
@json_option
@click.pass_obj
@renders_errors
def status(cli: CliContext, goal_id: str | None, viewer: str | None, as_json: bool) -> None:
    """For each goal: who it waits on, can the agent continue, what gate, what last ran."""
    if goal_id:
        known_goal(cli, goal_id)
    binding = cli.binding()
    scan = scan_bound_home(cli.state_dir, binding.path)
    doc = collect_status(
        cli.store(), _goals(cli), str(binding.path), goal_id, surface="cli", host=scan.threads
    )
    if viewer == "owner":
        record_owner_view(_goals(cli), doc, "cli_owner")
    elif viewer is None and not as_json and sys.stdout.isatty():
        record_owner_view(_goals(cli), doc, "cli_tty")
    doc["host_scan"] = scan.summary()
    if as_json:
        emit_json(doc)
        return
    from loopx_chat.goals.words import humanize, quota_words  # the words only a person reads

    if not doc["attention_queue"]:
        click.echo(nothing_found("goals"))
    for goal in doc["attention_queue"]:
        answers = goal["answers"]
        click.echo(f"goal {goal['goal_id']}  [{goal['severity']}] {goal['status']}")
        state = goal.get("goal_state") or {}
        if state.get("objective"):
            click.echo(f"  objective:               {state['objective']}")
        for criterion in state.get("acceptance") or ():
            click.echo(f"  acceptance:              {criterion}")
        if state.get("stop_condition"):
            click.echo(f"  stop when:               {state['stop_condition']}")
        if goal.get("stopped"):
            click.echo("  STOPPED:                 by the owner (`loopx-chat goal resume`)")
        if state.get("boundary"):
            click.echo(f"  boundary:                {state['boundary']}")
        click.echo(f"  waiting on:              {humanize(answers['waiting_on'])}")
        click.echo(f"  agent can continue now:  {humanize(answers['agent_can_continue'])}")
        click.echo(f"  gate or evidence needed: {humanize(answers['gate_or_evidence_required'])}")
        click.echo(f"  latest run:              {humanize(answers['latest_run'])}")
        host = goal.get("host") or {}
        if host.get("stale"):
            lag = f", {host['behind_seconds']}s" if host.get("behind_seconds") is not None else ""
            click.echo(
                f"  STALE:                   host is {host['behind_turns']} turn(s) ahead{lag}"
            )
        if goal.get("reconcile_reason"):
            click.echo(f"  reconcile:               {goal['reconcile_reason']}")
        quota = goal.get("quota") or {}
        if quota:
            words = quota_words(str(quota["decision"]), str(quota["reason_code"]))
            click.echo(f"  next automatic turn:     {words} (a scheduler hint)")


@click.group()
def gate() -> None:
    """Owner gates: questions a person must decide before the agent continues."""


@gate.command("request")
@click.option("--goal", "goal_id", required=True, help="Goal the gate blocks (created if new).")
@click.option("--question", required=True, help="What the person must decide, in short words.")
@actor_option("operator", "Who must decide (a person; the agent cannot decide a gate)")
@click.option("--advisory", is_flag=True, help="Record it without blocking the agent.")
@json_option
@click.pass_obj
@renders_errors
def gate_request(
    cli: CliContext, goal_id: str, question: str, actor: str, advisory: bool, as_json: bool
) -> None:
    """Open a gate for GOAL."""
    created = _goals(cli).request_gate(
        validate_goal_id(goal_id), question, actor=actor, blocking=not advisory
    )
    _emit_gate(created.to_dict(), as_json)


@gate.command("resolve")
@click.argument("gate_id")
@click.option("--goal", "goal_id", required=True, help="Goal the gate belongs to.")
@click.option("--decision", type=click.Choice(DECISIONS), required=True, help="The decision.")
@click.option("--reason", default=None, help="Why, in short words (kept on record).")
@json_option
@click.pass_obj
@renders_errors
def gate_resolve(
    cli: CliContext, gate_id: str, goal_id: str, decision: str, reason: str | None, as_json: bool
) -> None:
    """Approve or reject GATE_ID (through the running service when one of ours is up)."""
    service = service_for(cli)
    if service is not None:
        _emit_gate(service.resolve_gate(goal_id, gate_id, decision, reason), as_json)
        return
    resolved = _goals(cli).resolve_gate(known_goal(cli, goal_id), gate_id, decision, reason)
    _emit_gate(resolved.to_dict(), as_json)


@gate.command("list")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@json_option
@click.pass_obj
@renders_errors
def gate_list(cli: CliContext, goal_id: str | None, as_json: bool) -> None:
    """List gates (all goals, or one)."""
    store = _goals(cli)
    if goal_id:
        gates = [g.to_dict() for g in store.gates(known_goal(cli, goal_id))]
        problems: list[dict[str, Any]] = []
    else:
        gates, problems = [], []
        for gid in store.goal_ids():
            try:  # one goal's unreadable log never hides the others' gates
                gates.extend(g.to_dict() for g in store.gates(gid))
            except StateError as exc:
                problems.append({"goal_id": gid, **exc.to_dict()})
    emit_ok(
        {"gates": gates, "problems": problems},
        as_json,
        [
            *(
                f"{g['gate_id']}  goal={g['goal_id']}  {g['status']}  {g['actor']}: {g['question']}"
                for g in gates
            ),
            *(f"goal={p['goal_id']}  error [{p['error_code']}]: {p['error']}" for p in problems),
        ],
        empty=nothing_found("gates", goal_id),
    )


def _emit_gate(data: dict[str, Any], as_json: bool) -> None:
    line = f"{data['gate_id']}: {data['status']} ({data['actor']}) {data['question']}"
    emit_ok({"gate": data}, as_json, [line])


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
@renders_errors
def handoff_record(
    cli: CliContext,
    goal_id: str,
    next_action: str,
    stop_condition: str,
    evidence: tuple[str, ...],
    as_json: bool,
) -> None:
    """Record a handoff packet for GOAL."""
    packet = _goals(cli).record_handoff(
        validate_goal_id(goal_id), next_action, stop_condition, evidence
    )
    line = f"{packet.handoff_id}: {packet.next_action} (stop when: {packet.stop_condition})"
    emit_ok({"handoff": packet.to_dict()}, as_json, [line])


@handoff.command("list")
@click.option("--goal", "goal_id", required=True, help="Goal whose handoffs to list.")
@json_option
@click.pass_obj
@renders_errors
def handoff_list(cli: CliContext, goal_id: str, as_json: bool) -> None:
    """List the handoff packets of GOAL: pending, or consumed (by which turn)."""
    handoffs = _goals(cli).handoffs(known_goal(cli, goal_id))
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


@click.command("metrics")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@json_option
@click.pass_obj
@renders_errors
def metrics(cli: CliContext, goal_id: str | None, as_json: bool) -> None:
    """The six goal-control metrics, each with its numerator and denominator."""
    store = _goals(cli)
    if goal_id:
        known_goal(cli, goal_id)
    from loopx_chat.goals.metrics import compute_metrics

    doc = {"ok": True, **compute_metrics(store.control.events(), goal_id)}
    if as_json:
        emit_json(doc)
        return
    click.echo(f"goal-control metrics{' for ' + goal_id if goal_id else ''}")
    for name, value in doc.items():
        if not isinstance(value, dict):
            continue
        if "numerator" in value:
            ratio = "n/a" if value["ratio"] is None else f"{value['ratio']:.2%}"
            extras = ", ".join(
                f"{k}={v}"
                for k, v in value.items()
                if k not in ("numerator", "denominator", "ratio")
            )
            click.echo(
                f"  {name}: {value['numerator']}/{value['denominator']} ({ratio})"
                + (f"  [{extras}]" if extras else "")
            )
        else:
            click.echo(f"  {name}: " + ", ".join(f"{k}={v}" for k, v in value.items()))

"""`loopx-chat goal|quota|reward|dream`: the goal's own control records.

Only `goal set` creates a goal; quota, reward and dream refuse a goal no record names
(`goal_not_found`) rather than creating it."""

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
    renders_errors,
)
from loopx_chat.cli.options import actor_option, known_goal
from loopx_chat.errors import StateError, UsageError
from loopx_chat.goals.goal_facts import (
    facts_from_state,
    goal_turns,
    known_goal_ids,
)
from loopx_chat.goals.goal_state import GoalRecords
from loopx_chat.goals.goal_store import GoalStore, validate_goal_id
from loopx_chat.goals.memory_input import clear_memory_input, memory_field, set_memory_input
from loopx_chat.goals.quota import record_quota
from loopx_chat.goals.status import goal_status
from loopx_chat.session_runtime.writeback_contract import REWARD_LABELS


def _records(cli: CliContext) -> GoalRecords:
    return GoalRecords(GoalStore(cli.state_dir))


def _known(cli: CliContext, goal_id: str) -> tuple[GoalRecords, str]:
    """The goal's records, after checking some record already names the goal."""
    return _records(cli), known_goal(cli, goal_id)


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
    "--from-json",
    "from_json",
    default=None,
    help="Fields as a JSON object (same names) from a file or -; raw-material keys are refused.",
)
@actor_option("owner", "Who sets it")
@json_option
@click.pass_obj
@renders_errors
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
    ):
        if value is not None:
            fields[key] = value
    if acceptance:
        fields["acceptance"] = list(acceptance)
    if non_goals:
        fields["non_goals"] = list(non_goals)
    if authority_sources:
        fields["authority_sources"] = list(authority_sources)
    state = _records(cli).set_goal_state(validate_goal_id(goal_id), fields, actor=actor)
    emit_ok({"goal_state": state.to_dict()}, as_json, [f"{goal_id}: {state.objective}"])


@goal.command("show")
@click.argument("goal_id")
@click.option("--history", is_flag=True, help="Also show every earlier value.")
@json_option
@click.pass_obj
@renders_errors
def goal_show(cli: CliContext, goal_id: str, history: bool, as_json: bool) -> None:
    """Show GOAL_ID's goal_state (and with --history every earlier value)."""
    records = _records(cli)
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
    for entry in doc.get("history", []):
        click.echo(f"  {entry['created_at']} by {entry['actor']}: {entry['objective']}")


@goal.command("list")
@json_option
@click.pass_obj
@renders_errors
def goal_list(cli: CliContext, as_json: bool) -> None:
    """Goals with a goal_state."""
    records = _records(cli)
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
@renders_errors
def goal_stop(cli: CliContext, goal_id: str, reason: str | None, actor: str, as_json: bool) -> None:
    """Stop GOAL_ID: no automatic turn until `goal resume` (quota says `paused`)."""
    records, gid = _known(cli, goal_id)
    entry = records.set_stopped(gid, True, reason=reason, actor=actor)
    emit_ok({"lifecycle": entry}, as_json, [f"{gid}: stopped (resume with `goal resume {gid}`)"])


@goal.command("resume")
@click.argument("goal_id")
@actor_option("owner", "Who resumes it")
@json_option
@click.pass_obj
@renders_errors
def goal_resume(cli: CliContext, goal_id: str, actor: str, as_json: bool) -> None:
    """Resume a stopped GOAL_ID."""
    records, gid = _known(cli, goal_id)
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
@renders_errors
def goal_memory(
    cli: CliContext, goal_id: str, source: str | None, clear: bool, actor: str, as_json: bool
) -> None:
    """Set, clear or show GOAL_ID's OpenViking memory input (read-only preview refs).

    Stored is what the read-only adapter made of it (never raw material, never a retrieval);
    `status --json` and /status.json show it as the goal's `memory`."""
    records, gid = _known(cli, goal_id)
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


@click.command("quota")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@json_option
@click.pass_obj
@renders_errors
def quota(cli: CliContext, goal_id: str | None, as_json: bool) -> None:
    """Should each goal spend its next automatic turn? A scheduler hint; it starts nothing.

    The same answer as status's "agent can continue now"."""
    store, records = cli.store(), _records(cli)
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
@renders_errors
def reward_record(
    cli: CliContext, goal_id: str, run_ref: str, label: str, reason: str, actor: str, as_json: bool
) -> None:
    """Record a person's judgment of a turn of GOAL; a second one for the turn replaces it."""
    records, gid = _known(cli, goal_id)
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
@renders_errors
def reward_list(cli: CliContext, goal_id: str, as_json: bool) -> None:
    """The rewards of GOAL: one per judged turn, and every earlier one as history."""
    records = _records(cli)
    history = records.rewards(known_goal(cli, goal_id))
    current = {e["reward_id"] for e in records.current_rewards(goal_id)}
    entries = [{**e, "current": e["reward_id"] in current} for e in history]
    lines = (
        f"{e['reward_id']}  {e['created_at']}  {e['label']:5}  {e['run_ref']}: {e['reason']}"
        + ("" if e["current"] else "  (replaced)")
        for e in entries
    )
    emit_ok({"rewards": entries}, as_json, lines, empty=nothing_found("rewards", goal_id))


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
@renders_errors
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
    records, gid = _known(cli, goal_id)
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
@renders_errors
def dream_list(cli: CliContext, goal_id: str, as_json: bool) -> None:
    """List GOAL's proposals with their status (advisory, promoted, dismissed)."""
    entries = _records(cli).proposals(known_goal(cli, goal_id))
    lines = (f"{e['proposal_id']}  {e['status']:9}  {e['title']}" for e in entries)
    emit_ok({"proposals": entries}, as_json, lines, empty=nothing_found("proposals", goal_id))


@dream.command("promote")
@click.argument("proposal_id")
@click.option("--goal", "goal_id", required=True, help="Goal the proposal belongs to.")
@click.option("--stop-condition", required=True, help="When the agent must stop and report.")
@actor_option("owner", "Who promotes it")
@json_option
@click.pass_obj
@renders_errors
def dream_promote(
    cli: CliContext, proposal_id: str, goal_id: str, stop_condition: str, actor: str, as_json: bool
) -> None:
    """Turn PROPOSAL_ID into a handoff packet (only now can it cause action)."""
    promoted, packet = _records(cli).promote(
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
    @renders_errors
    def command(cli: CliContext, proposal_id: str, goal_id: str, actor: str, as_json: bool) -> None:
        entry = _records(cli).dismiss(
            validate_goal_id(goal_id), proposal_id, actor=actor, event=event
        )
        emit_ok({"proposal": entry}, as_json, [f"{proposal_id} {event}"])


_closing_command("dismiss", "dismissed", "Dismiss PROPOSAL_ID: it stays as advisory history.")
_closing_command("close", "closed", "Close PROPOSAL_ID without acting on it (done or overtaken).")


def _add_run_commands() -> None:
    """`goal run` (and its owner decisions) live in their own module; they join `goal` here."""
    from loopx_chat.cli.goal_run_cmd import goal_accept, goal_reopen, goal_run

    for command in (goal_run, goal_accept, goal_reopen):
        goal.add_command(command)


_add_run_commands()

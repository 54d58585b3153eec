"""`loopx-chat gate request|resolve|list`: owner gates, the questions a person must decide.

The agent cannot decide a gate; every request and decision stays on record (`GateStore`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_ok,
    json_option,
    nothing_found,
)
from loopx_chat.cli.delegation import service_for
from loopx_chat.cli.options import actor_option, known_goal
from loopx_chat.errors import StateError, UsageError
from loopx_chat.goals.gate_store import DECISIONS, HOST_GATE_PREFIX, validate_goal_id
from loopx_chat.visible_text import ControlMode, visible_text

if TYPE_CHECKING:
    from loopx_chat.goals.run_block import RunBlock


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
def gate_request(
    cli: CliContext, goal_id: str, question: str, actor: str, advisory: bool, as_json: bool
) -> None:
    """Open a gate for GOAL (through the running service when one of ours is up). A running
    goal is blocked before this answers; one a `goal run` in another terminal follows is
    given up to 5 s to say it blocked it."""
    from loopx_chat.goals.run_block import RunBlock, await_block

    goal_id = validate_goal_id(goal_id)
    service = service_for(cli)
    if service is not None:
        answer = service.request_gate(goal_id, question, actor, not advisory)
        _emit_gate(answer["gate"], as_json, RunBlock.from_doc(answer))
        return
    store = cli.gate_store()
    created = store.request_gate(goal_id, question, actor=actor, blocking=not advisory)
    _emit_gate(created.to_dict(), as_json, await_block(store, created))


@gate.command("resolve")
@click.argument("gate_id")
@click.option("--goal", "goal_id", required=True, help="Goal the gate belongs to.")
@click.option(
    "--decision",
    type=click.Choice((*DECISIONS, "decline", "cancel")),
    required=True,
    help="The decision (decline = reject; cancel stops the turn of a host gate).",
)
@click.option("--reason", default=None, help="Why, in short words (kept on record).")
@click.option(
    "--for-session", is_flag=True, help="Host gate: approve this command for the whole session."
)
@click.option(
    "--answer",
    "answers",
    multiple=True,
    help="Host gate: the answer to Codex's question; with several questions (or an MCP "
    "server's fields) one ID=TEXT per question, repeated. Never for a secret question "
    "(every local user can read a command line): use the prompt, --answer-stdin or "
    "--answer-file.",
)
@click.option(
    "--answer-stdin",
    is_flag=True,
    help="Host gate: read the answers from stdin, one TEXT or ID=TEXT per line.",
)
@click.option(
    "--answer-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Host gate: read the answers from this file (mode 0600), one TEXT or ID=TEXT per line.",
)
@json_option
@click.pass_obj
def gate_resolve(
    cli: CliContext,
    gate_id: str,
    goal_id: str,
    decision: str,
    reason: str | None,
    for_session: bool,
    answers: tuple[str, ...],
    answer_stdin: bool,
    answer_file: Path | None,
    as_json: bool,
) -> None:
    """Approve or reject GATE_ID (through the running service when one of ours is up); a
    host gate (what Codex asked) is answered to codex's live request. Approving a question
    on a terminal asks for each answer not given (a secret one without echo)."""
    if gate_id.startswith(HOST_GATE_PREFIX):
        from loopx_chat.cli.host_gate_resolve import host_choice, resolve_host_gate

        goal = known_goal(cli, goal_id)
        asked = cli.gate_store().gate(goal, gate_id).host or {}
        given = _host_answers(asked, decision, answers, answer_stdin, answer_file)
        choice = host_choice(decision, for_session, given, asked)
        _emit_gate(
            resolve_host_gate(cli, goal, gate_id, choice, reason), as_json, said=choice.decision
        )
        return
    if for_session or answers or answer_stdin or answer_file or decision == "cancel":
        raise UsageError(
            "--for-session, --answer, --answer-stdin, --answer-file and cancel are for host "
            "gates (what Codex asked)",
            error_code="usage_error",
        )
    decision = "reject" if decision == "decline" else decision
    service = service_for(cli)
    if service is not None:
        _emit_gate(service.resolve_gate(goal_id, gate_id, decision, reason), as_json, said=decision)
        return
    resolved = cli.gate_store().resolve_gate(known_goal(cli, goal_id), gate_id, decision, reason)
    _emit_gate(resolved.to_dict(), as_json, said=decision)


@gate.command("list")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@json_option
@click.pass_obj
def gate_list(cli: CliContext, goal_id: str | None, as_json: bool) -> None:
    """List gates (all goals, or one)."""
    store = cli.gate_store()
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


def _host_answers(
    host: dict[str, Any],
    decision: str,
    argv: tuple[str, ...],
    from_stdin: bool,
    from_file: Path | None,
) -> list[str]:
    """The answer words from every source `gate resolve` was given (see `answer_sources`);
    on a terminal, approving a question asks for the rest."""
    from loopx_chat.cli import answer_sources as sources

    sources.refuse_secret_on_argv(argv, host)
    given = list(argv)
    if from_stdin:
        given += sources.read_stdin()
    if from_file is not None:
        given += sources.read_file(from_file, lambda words: click.echo(f"note: {words}", err=True))
    if decision == "approve" and not from_stdin and sys.stdin.isatty():
        given += sources.prompted(host, given, _ask)
    return given


def _ask(label: str, hidden: bool) -> str:
    """One answer typed at the terminal; a hidden one is never echoed."""
    shown = visible_text(label, ControlMode.ESCAPES)
    # On stderr, so `--json` keeps stdout for the one document.
    return str(
        click.prompt(f"  {shown}", default="", show_default=False, hide_input=hidden, err=True)
    )


def _emit_gate(
    data: dict[str, Any], as_json: bool, block: RunBlock | None = None, said: str | None = None
) -> None:
    """A gate, and with `block` what opening it did to the goal's run (`run_blocked`);
    `said`: what the owner did, confirmed in the page's words (`goals/badges.SAID`)."""
    from loopx_chat.goals.badges import SAID

    lines = [f"{data['gate_id']}: {data['status']} ({data['actor']}) {data['question']}"]
    if said is not None and said in SAID:
        lines.insert(0, SAID[said])
    words = block.words() if block is not None else None
    if words is not None:
        lines.append(words)
    emit_ok({"gate": data, **(block.to_dict() if block else {})}, as_json, lines)

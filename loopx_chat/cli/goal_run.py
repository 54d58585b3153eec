"""`loopx-chat goal run|accept|reopen`: let Codex work on a goal on its own loop, in the foreground.

Parses, calls the controller's goal run and renders: one progress line per turn on stderr
(turn n, outcome, tokens used of budget, elapsed), one JSON document with --json, and the
documented exit code of how the run ended (0 complete, 3 budget spent, 4 usage limit,
5 blocked, 6 paused, 130 Ctrl-C). It owns no rule of its own.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import click

from loopx_chat.cli.context import CliContext, emit_json, json_option
from loopx_chat.cli.options import actor_option, known_goal
from loopx_chat.errors import UsageError

if TYPE_CHECKING:
    from loopx_chat.controller.chat_controller import ChatController

# A run spends the owner's budget: only a person may authorize or answer one (never the
# agent, never a controller). `--actor` keeps the values it has everywhere; these refuse.
RUN_ACTORS = ("owner", "operator", "user", "human")


def _person(actor: str) -> str:
    if actor not in RUN_ACTORS:
        raise UsageError(
            f"a goal run is the owner's decision: --actor must be a person "
            f"({', '.join(RUN_ACTORS)}), not {actor}",
            error_code="usage_error",
        )
    return actor


def _render(result: object, as_json: bool) -> None:
    from loopx_chat.controller.goal_run import RunResult

    assert isinstance(result, RunResult)
    if as_json:
        emit_json(result.to_dict())
    else:
        host = result.host
        status = host.status if host else "unknown"
        click.echo(
            f"[loopx-chat] run {result.run.run_id} ended: Codex goal {status} after "
            f"{result.turns} turn(s), {result.ledger_tokens:,} tokens (exit {result.exit_code})",
            err=True,
        )
        for difference in result.differences:
            click.echo(f"[loopx-chat] difference: {difference}", err=True)
        from loopx_chat.cli.goal_follow import paused_line

        if (paused := paused_line(result.run)) is not None:
            click.echo(f"[loopx-chat] {paused}", err=True)
        if result.run.reason == "first_output_timeout":
            from loopx_chat.cli.options import FIRST_OUTPUT_HINT

            click.echo(f"[loopx-chat] {FIRST_OUTPUT_HINT}", err=True)
    sys.exit(result.exit_code)


def _runner(ctx: click.Context) -> AbstractContextManager[ChatController]:
    from loopx_chat.cli.controller_scope import command_controller

    return command_controller(ctx)


def _follow(
    ctx: click.Context,
    goal_id: str,
    session_id: str | None,
    budget: int | None,
    actor: str,
    as_json: bool,
    note: str | None = None,
    approval: str | None = None,
    plan_mode: bool = False,
    max_turns: int | None = None,
    resume: bool | None = None,
) -> None:
    from loopx_chat.controller.goal_run import GoalRunner, TurnProgress
    from loopx_chat.goals.gate_store import GateStore

    cli: CliContext = ctx.obj

    streaming = not as_json and sys.stdout.isatty()
    streamed = False

    def on_delta(text: str) -> None:
        nonlocal streamed
        from loopx_chat.visible_text import ControlMode, visible_text

        streamed = True
        click.echo(visible_text(text, ControlMode.PICTURES), nl=False)
        sys.stdout.flush()

    def on_turn(p: TurnProgress) -> None:
        nonlocal streamed
        if as_json:
            return
        if streamed:
            click.echo()
            streamed = False
        used = f"{p.tokens_used:,}" if p.tokens_used is not None else "?"
        click.echo(
            f"[loopx-chat] turn {p.n} {p.status}  {used} of {p.token_budget:,} tokens  "
            f"{p.elapsed_sec:.1f}s",
            err=True,
        )

    def on_event(line: str) -> None:
        if not as_json:
            click.echo(f"[loopx-chat] {line}", err=True)

    with _runner(ctx) as controller:
        if not as_json and sys.stdin.isatty():
            # What codex asks during the run is asked here too (any other surface may answer).
            from loopx_chat.cli.terminal_decide import TerminalDecider

            TerminalDecider(controller)
        runner = GoalRunner(controller, GateStore(cli.state_dir))
        # Every refusal comes from here, before anything is written or spawned.
        plan = runner.plan(
            goal_id,
            session_id,
            budget,
            reopen_note=note,
            approval_policy=approval,
            plan_mode=plan_mode,
            max_turns=max_turns,
            resume_after_usage_limit=resume,
        )
        try:
            result = runner.run(
                plan,
                actor=actor,
                surface="cli",
                on_turn=on_turn,
                on_event=on_event,
                on_delta=on_delta if streaming else None,
            )
        except KeyboardInterrupt:
            click.echo("[loopx-chat] stopped (Ctrl-C)", err=True)
            sys.exit(130)
    _render(result, as_json)


@click.command("run")
@click.argument("goal_id")
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Session whose thread Codex works on (default: the goal's latest).",
)
@click.option(
    "--token-budget",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens Codex's loop may spend (default: the goal_state's budget).",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=None,
    help="Continuation turns before the run pauses and asks you (an owner gate). A run also "
    "pauses after 3 turns in a row with no tool call and the same answer.",
)
@click.option(
    "--resume-after-usage-limit/--stop-at-usage-limit",
    "resume",
    default=None,
    help="When the account's usage limit stops the run, wait for the reset time Codex "
    "reported and go on (default: the goal's setting, else stop at the limit).",
)
@click.option(
    "--foreground",
    is_flag=True,
    help="Run it in this process even when the local service is up (which runs it otherwise).",
)
@click.option(
    "--approval",
    default=None,
    metavar="never|on-request|untrusted",
    help="What Codex may ask you before it acts during the run (default: the goal's "
    "goal_state, else the service's default, else never). What it asks blocks the run "
    "until you decide (`gate resolve`).",
)
@click.option(
    "--plan",
    "plan_mode",
    is_flag=True,
    help="Refused (plan_not_in_run): Codex continues no goal in Plan mode.",
)
@click.option(
    "--sandbox",
    type=click.Choice(["read-only", "workspace-write"]),
    default=None,
    help="What the agent may touch in a run in this process: read only (the default), or "
    "write inside the work dir. The service's runs use its own `serve --sandbox`.",
)
@actor_option("owner", "Who authorizes the run (a person)")
@json_option
@click.pass_context
def goal_run(
    ctx: click.Context,
    goal_id: str,
    session_id: str | None,
    token_budget: int | None,
    max_turns: int | None,
    resume: bool | None,
    foreground: bool,
    approval: str | None,
    plan_mode: bool,
    sandbox: str | None,
    actor: str,
    as_json: bool,
) -> None:
    """Let Codex work on GOAL_ID on its own goal loop, until the goal leaves `active`.

    Sets the thread goal active with a finite token budget in the process that holds the
    thread: the local service when it is up (this shell follows it), else this process;
    codex starts each continuation turn itself. Exit codes: 0 complete, 3 budget spent,
    4 usage limit, 5 blocked, 6 paused, 130 Ctrl-C (the goal is paused)."""
    _person(actor)
    gid = known_goal(ctx.obj, goal_id)
    from loopx_chat.goals.goal_ledger import approval_policy_field

    approval_policy_field(approval)  # `approval_policy_unknown`, before anything else
    if sandbox is not None:
        from dataclasses import replace

        from loopx_chat.controller.chat_controller import DEFAULT_CONFIG

        options = replace(DEFAULT_CONFIG.options, sandbox=sandbox)
        ctx.obj = replace(ctx.obj, controller_config=replace(DEFAULT_CONFIG, options=options))
    if not foreground:
        from loopx_chat.cli.delegation import service_for

        service = service_for(ctx.obj)
        if service is not None:
            # Only with a service up: its client (http, the owner socket) is not needed by a
            # run here, and imported before the run's spawn it delayed codex's start.
            from loopx_chat.cli.goal_run_remote import run_in_service

            if sandbox is not None:
                click.echo(
                    "[loopx-chat] the service runs the goal with its own `serve --sandbox`; "
                    "--sandbox applies to a run here (`--foreground`)",
                    err=True,
                )
            run_in_service(
                service,
                ctx.obj.state_dir,
                gid,
                session_id,
                token_budget,
                as_json,
                approval=approval,
                plan_mode=plan_mode,
                codex_home=ctx.obj.binding().path,
                max_turns=max_turns,
                resume=resume,
            )
            return
    _follow(
        ctx,
        gid,
        session_id,
        token_budget,
        actor,
        as_json,
        approval=approval,
        plan_mode=plan_mode,
        max_turns=max_turns,
        resume=resume,
    )


@click.command("accept")
@click.argument("goal_id")
@click.option("--reason", default=None, help="Why it is done, in short words (kept on record).")
@actor_option("owner", "Who accepts it (a person)")
@json_option
@click.pass_obj
def goal_accept(
    cli: CliContext, goal_id: str, reason: str | None, actor: str, as_json: bool
) -> None:
    """Accept the run Codex says is done: a human_reward on its last turn; the run closes."""
    from loopx_chat.cli.context import emit_ok
    from loopx_chat.controller.goal_run import GoalRunner
    from loopx_chat.goals.gate_store import GateStore

    _person(actor)
    gid = known_goal(cli, goal_id)
    # No Codex is started: the controller is only the owner of the stores here.
    from loopx_chat.controller.chat_controller import ChatController

    controller = ChatController(
        store=cli.store(), environ=cli.environ, cwd=cli.cwd, codex_bin=cli.codex_bin
    )
    run = GoalRunner(controller, GateStore(cli.state_dir)).accept(gid, reason, actor)
    from loopx_chat.goals.badges import SAID  # the page's own confirmation

    emit_ok({"run": run.to_dict()}, as_json, [f"{gid}: {SAID['accept']}"])


@click.command("reopen")
@click.argument("goal_id")
@click.option("--note", required=True, help="What is still missing: Codex's next objective.")
@click.option(
    "--token-budget",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens the reopened run may spend (default: the last run's budget).",
)
@actor_option("owner", "Who reopens it (a person)")
@json_option
@click.pass_context
def goal_reopen(
    ctx: click.Context, goal_id: str, note: str, token_budget: int | None, actor: str, as_json: bool
) -> None:
    """Reopen the run Codex says is done: active again, with NOTE as the next objective.

    Runs in the foreground like `goal run`, with the same exit codes."""
    _person(actor)
    gid = known_goal(ctx.obj, goal_id)
    _follow(ctx, gid, None, token_budget, actor, as_json, note=note)

"""`loopx-chat chat new|send|resume|interrupt|history`: drive Codex threads from a shell.

Human mode streams the agent's text to stdout as it arrives, with status lines on stderr;
`--json` prints one final JSON document. The controller does the work (in this process, or
in the owner's running service: `delegation` picks); this only renders.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loopx_chat.cli.approval_options import chat_policy_options
from loopx_chat.cli.chat_message import MESSAGE_LIMIT_BYTES, message_text
from loopx_chat.cli.chat_output import SERVED_HOST_LOOP, finish, host_loop_line, started_line
from loopx_chat.cli.context import CliContext, emit_json, json_option
from loopx_chat.cli.delegation import CHAT_OPTIONS, ChatBackend, chat_backend, given_turn_options
from loopx_chat.cli.options import POSITIVE_SECONDS
from loopx_chat.codex import turn_defaults
from loopx_chat.errors import LoopxChatError, Remedy
from loopx_chat.visible_text import ControlMode, visible_text

if TYPE_CHECKING:
    from loopx_chat.controller.chat_controller import ChatController


def message_input(func: Callable[..., Any]) -> Callable[..., Any]:
    """`[MESSAGE]` and `--file PATH`, turned into one `message: str` before the command runs."""

    @click.option(
        "--file",
        "message_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=f"Read the message from this UTF-8 file (at most {MESSAGE_LIMIT_BYTES >> 20} MiB).",
    )
    @click.argument("message", required=False)
    @functools.wraps(func)
    def wrapper(*args: Any, message: str | None, message_file: Path | None, **kwargs: Any) -> Any:
        return func(*args, message=(message, message_file), **kwargs)

    return wrapper


def _finish(
    result: dict[str, Any], as_json: bool, streamed: bool, hint: Remedy | None = None
) -> None:
    if not finish(click.echo, result, as_json, streamed, hint):
        sys.exit(1)


def objective_hint(cli: CliContext, goal_id: str) -> Remedy | None:
    """What `chat new` adds for a goal with nothing for a run to work on: how to set it."""
    from loopx_chat.goals.goal_runs import has_objective, objective_remedy

    try:
        if has_objective(cli.goal_ledger(), cli.gate_store(), goal_id):
            return None
    except LoopxChatError:
        return None  # a bad goal id or an unreadable record: the command's own checks say it
    return objective_remedy(goal_id)


def _submit(
    backend: ChatBackend,
    session_id: str,
    message: str,
    client_turn_id: str | None,
    as_json: bool,
    hint: Remedy | None = None,
) -> None:
    streamed = False

    def on_delta(delta: str) -> None:
        nonlocal streamed
        streamed = True
        if not as_json:
            click.echo(visible_text(delta, ControlMode.PICTURES), nl=False)
            sys.stdout.flush()

    def on_started(turn_id: str) -> None:
        if not as_json:
            click.echo(started_line(turn_id), err=True)

    def on_notice(line: str) -> None:
        # On stderr with --json too: stdout then holds only the one document.
        click.echo(f"[loopx-chat] {line}", err=True)

    controller = getattr(backend, "controller", None)  # a turn run here, not in the service
    if controller is not None and not as_json and sys.stdin.isatty():
        # What codex asks during this turn is asked here too (any other surface may answer).
        from loopx_chat.cli.terminal_decide import TerminalDecider

        TerminalDecider(controller)
    result = backend.submit_turn(
        session_id,
        message,
        client_turn_id=client_turn_id,
        on_delta=on_delta,
        on_started=on_started,
        on_notice=on_notice,
    )
    _finish(result, as_json, streamed, hint)


def host_loop_notice(controller: ChatController | None) -> None:
    """One line on stderr when a thread this command loaded runs a loop nobody here started;
    the turns codex ran on it meanwhile are recorded before the command lets it go. The
    direct path passes its controller; a delegated command passes None when the service
    said so (the service keeps its threads, and records those turns as it follows them)."""
    if controller is None:
        _say_host_loop(SERVED_HOST_LOOP)
        return
    for session_id in controller.host_loop_notices:
        controller.record_host_loop_turns(session_id)
    if controller.host_loop_notices:
        _say_host_loop("it continues on its own; pause it in Codex")
        controller.host_loop_notices.clear()


def _say_host_loop(pause: str) -> None:
    click.echo(host_loop_line(pause), err=True)


@click.group()
@click.option(
    "--sandbox",
    type=click.Choice(["read-only", "workspace-write"]),
    default=turn_defaults.SANDBOX,
    help="What the agent may touch: read only, or write inside the work dir.",
)
@click.option(
    "--idle-timeout",
    type=POSITIVE_SECONDS,
    default=turn_defaults.IDLE_TIMEOUT_SEC,
    help="Seconds a turn may go without any event before it is stopped.",
)
@click.option(
    "--turn-timeout",
    type=POSITIVE_SECONDS,
    default=turn_defaults.HARD_TIMEOUT_SEC,
    help="Seconds a turn may run in all before it is stopped.",
)
@click.option(
    "--first-output-timeout",
    type=POSITIVE_SECONDS,
    default=turn_defaults.FIRST_OUTPUT_TIMEOUT_SEC,
    envvar=turn_defaults.FIRST_OUTPUT_ENV,
    help="Seconds a turn may go without producing anything (codex cannot reach its model) "
    "before it is stopped.",
)
@click.pass_context
def chat(
    ctx: click.Context,
    sandbox: str,
    idle_timeout: float,
    turn_timeout: float,
    first_output_timeout: float,
) -> None:
    """Open, resume and drive Codex threads through `codex app-server`."""
    values = dict(
        zip(
            CHAT_OPTIONS,
            (sandbox, idle_timeout, turn_timeout, first_output_timeout),
            strict=True,
        )
    )
    given = given_turn_options(ctx, values)  # the turn's own, here or in the service
    if not given:
        return  # the controller's defaults (the same values): no need to load it to say so
    from loopx_chat.controller.chat_controller import DEFAULT_CONFIG

    config = DEFAULT_CONFIG
    ctx.obj = replace(
        ctx.obj,
        controller_config=replace(
            config,
            timeouts=replace(
                config.timeouts,
                idle=idle_timeout,
                hard=turn_timeout,
                first_output=first_output_timeout,
            ),
            options=replace(config.options, sandbox=sandbox),
        ),
    )


@chat.command("new")
@click.option("--goal", "goal_id", required=True, help="Goal id the session works for.")
@click.option(
    "--cwd",
    "work_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Work dir of the session (default: the current folder).",
)
@click.option("--client-turn-id", default=None, help="Retry-safe id: a repeat never runs twice.")
@chat_policy_options
@json_option
@message_input
@click.pass_context
def chat_new(
    ctx: click.Context,
    goal_id: str,
    work_dir: Path | None,
    client_turn_id: str | None,
    as_json: bool,
    message: tuple[str | None, Path | None],
) -> None:
    """Open a session for GOAL and run its first turn with MESSAGE.

    MESSAGE is the text itself, or `-` to read it from stdin; --file PATH reads it from a
    UTF-8 file instead (at most 8 MiB either way, and not empty).
    """
    cli: CliContext = ctx.obj
    text = message_text(*message)  # before anything is opened or spawned
    with chat_backend(ctx, notice=host_loop_notice) as backend:
        record = backend.open_session(goal_id, str(cli.cwd / work_dir if work_dir else cli.cwd))
        if not as_json:
            click.echo(
                f"[loopx-chat] session {record['session_id']} on thread "
                f"{record['upstream_thread_id']}",
                err=True,
            )
        hint = objective_hint(cli, goal_id)
        _submit(backend, record["session_id"], text, client_turn_id, as_json, hint)


@chat.command("send")
@click.argument("session_id")
@click.option("--client-turn-id", default=None, help="Retry-safe id: a repeat never runs twice.")
@chat_policy_options
@json_option
@message_input
@click.pass_context
def chat_send(
    ctx: click.Context,
    session_id: str,
    client_turn_id: str | None,
    as_json: bool,
    message: tuple[str | None, Path | None],
) -> None:
    """Submit MESSAGE as the next turn of SESSION_ID (resuming its thread if needed).

    MESSAGE is the text itself, or `-` to read it from stdin; --file PATH reads it from a
    UTF-8 file instead (at most 8 MiB either way, and not empty).
    """
    text = message_text(*message)  # before anything is resumed or spawned
    with chat_backend(ctx, notice=host_loop_notice) as backend:
        _submit(backend, session_id, text, client_turn_id, as_json)


@chat.command("resume")
@click.argument("session_id")
@json_option
@click.pass_context
def chat_resume(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Restore SESSION_ID's thread in a fresh app-server (binds a legacy session)."""
    with chat_backend(ctx, notice=host_loop_notice) as backend:
        record = backend.resume_session(session_id)
    if as_json:
        emit_json(
            {
                "ok": True,
                "session_id": record["session_id"],
                "thread_id": record["upstream_thread_id"],
                "status": record["status"],
            }
        )
    else:
        click.echo(
            f"session {record['session_id']} resumed on thread {record['upstream_thread_id']}"
        )


@chat.command("interrupt")
@click.argument("session_id")
@json_option
@click.pass_context
def chat_interrupt(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Interrupt SESSION_ID's active turn (also when another process is running it); a goal
    run's turn is stopped at once and the run paused, as is a run whose process died, also
    between turns."""
    with chat_backend(ctx) as backend:
        done = backend.interrupt_turn(session_id)
    turn, run = done["turn"], done.get("goal_run")
    if as_json:
        emit_json({"ok": True, "session_id": session_id, "turn": turn, "goal_run": run})
        return
    if turn is not None:
        click.echo(f"interrupt requested for turn {turn['id']} (now {turn['status']})")
    if run is not None:
        words = f"run {run['run_id']} {run['state']}, goal {run['host_status']}"
        click.echo(f"goal {run['goal_id']}: {words}, by {run['ended_by']}")


@chat.command("history")
@click.argument("session_id")
@json_option
@click.pass_context
def chat_history(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Show SESSION_ID's conversation, read from Codex now (loopx-chat keeps no text)."""
    from loopx_chat.cli.controller_scope import command_controller

    with command_controller(ctx) as controller:
        turns = controller.history(session_id)
    if as_json:
        emit_json({"ok": True, "session_id": session_id, "turns": turns})
        return
    for turn in turns:
        click.echo(f"--- turn {turn['turn_id']} ({turn['status']})")
        for message in turn["messages"]:
            click.echo(visible_text(f"{message['role']}: {message['text']}", ControlMode.PICTURES))

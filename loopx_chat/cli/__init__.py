"""The `loopx-chat` command line: global options and the command groups.

Parses, calls and renders; it owns no logic of its own. Environment is read once here, at
startup, and handed down as a snapshot.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from loopx_chat import __version__
from loopx_chat.cli.chat_cmd import chat
from loopx_chat.cli.codex_cmd import codex
from loopx_chat.cli.context import CliContext, NoTracebackGroup, show_state_notices
from loopx_chat.cli.demo_cmd import demo
from loopx_chat.cli.goal_cmds import gate, handoff, metrics, project, status
from loopx_chat.cli.home_cmd import home
from loopx_chat.cli.launchagent_cmd import launchagent
from loopx_chat.cli.records_cmds import dream, goal, quota, reward
from loopx_chat.cli.serve_cmd import serve
from loopx_chat.cli.sessions_cmd import sessions
from loopx_chat.cli.writeback_cmd import writeback
from loopx_chat.state.session_store import default_state_dir


@click.group(
    cls=NoTracebackGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Owner-local state folder (default: $LOOPX_CHAT_STATE_DIR, else the platform state dir).",
)
@click.option(
    "--codex-bin",
    default=None,
    help="codex executable to drive (default: $LOOPX_CHAT_CODEX_BIN, else codex on PATH).",
)
@click.version_option(__version__, prog_name="loopx-chat")
@click.pass_context
def main(ctx: click.Context, state_dir: Path | None, codex_bin: str | None) -> None:
    """Local control plane beside the Codex agent host."""
    environ = dict(os.environ)
    if environ.get("NO_COLOR"):
        # https://no-color.org: any non-empty value. click then strips every style, as it
        # already does when stdout is not a terminal.
        ctx.color = False
    show_state_notices()
    ctx.obj = CliContext(
        environ=environ,
        cwd=Path.cwd(),
        state_dir=(state_dir.expanduser().resolve() if state_dir else default_state_dir(environ)),
        codex_bin=codex_bin or environ.get("LOOPX_CHAT_CODEX_BIN") or None,
        state_dir_explicit=bool(state_dir or environ.get("LOOPX_CHAT_STATE_DIR")),
    )


main.add_command(chat)
main.add_command(codex)
main.add_command(demo)
main.add_command(dream)
main.add_command(gate)
main.add_command(goal)
main.add_command(handoff)
main.add_command(home)
main.add_command(launchagent)
main.add_command(metrics)
main.add_command(project)
main.add_command(quota)
main.add_command(reward)
main.add_command(serve)
main.add_command(sessions)
main.add_command(status)
main.add_command(writeback)

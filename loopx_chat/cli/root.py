"""The `loopx-chat` click group: the global options and the lazily loaded command groups.

Parses, calls and renders; it owns no logic of its own. Environment is read once here, at
startup, and handed down as a snapshot. The process's entry and end are `cli.run`'s
(`cli/__init__.py`); this module is what it loads for every command the served fast path
(`served_send`) does not take.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from loopx_chat import __version__
from loopx_chat.cli.lazy import LazyGroup


@click.group(
    cls=LazyGroup,
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
@click.option(
    "--direct",
    is_flag=True,
    help="Run chat and gate commands in this process, not through a running `serve`.",
)
@click.version_option(__version__, prog_name="loopx-chat")
@click.pass_context
def main(ctx: click.Context, state_dir: Path | None, codex_bin: str | None, direct: bool) -> None:
    """Local control plane beside the Codex agent host."""
    from loopx_chat.cli.context import CliContext
    from loopx_chat.state.location import default_state_dir

    environ = dict(os.environ)
    if environ.get("NO_COLOR"):
        # https://no-color.org: any non-empty value. click then strips every style, as it
        # already does when stdout is not a terminal.
        ctx.color = False
    ctx.obj = CliContext(
        environ=environ,
        cwd=Path.cwd(),
        state_dir=(state_dir.expanduser().resolve() if state_dir else default_state_dir(environ)),
        codex_bin=codex_bin or environ.get("LOOPX_CHAT_CODEX_BIN") or None,
        state_dir_explicit=bool(state_dir or environ.get("LOOPX_CHAT_STATE_DIR")),
        direct=direct,
    )

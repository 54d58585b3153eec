"""The `loopx-chat` command line: global options and the command groups.

Parses, calls and renders; it owns no logic of its own. Environment is read once here, at
startup, and handed down as a snapshot.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import NoReturn

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


def run() -> NoReturn:
    """The console script and `python -m loopx_chat`: run the CLI, then end the process.

    A finished command ends with `os._exit` once everything the interpreter would do for it
    at exit is done: other non-daemon threads joined, atexit callbacks run (a library's log
    flush among them), stdout and stderr flushed. What it skips is tearing down some 200 modules
    and their objects, 30 to 50 ms of nothing for a process that is ending anyway (measured
    in docs/performance.md). In-process callers (tests, `CliRunner`) call `main` and keep
    their interpreter.
    """
    try:
        main()  # standalone mode: it always ends by raising SystemExit
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except OSError as exc:
        # Only writing the output gets here (every other OSError is a command's error code):
        # `--help > /dev/full`, say. click itself already ends a closed pipe quietly.
        from loopx_chat.errors import ERRORS

        code = ERRORS["output_unwritable"].exit_code
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(
                f"error [output_unwritable]: could not write the output "
                f"({exc.strerror or type(exc).__name__}); whatever the command did is done, "
                "and `loopx-chat status` shows it.\n"
            )
    try:
        me = threading.current_thread()
        for worker in threading.enumerate():
            if worker is not me and not worker.daemon:
                worker.join()
        atexit._run_exitfuncs()
    except KeyboardInterrupt:
        code = 130  # Ctrl-C while ending: stop now, as a shell expects, with no traceback
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # what CPython's own exit does when a final flush fails
    os._exit(code)


def _exit_status(code: object) -> int:
    """SystemExit's code as the process status, the way the interpreter maps it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1

"""`loopx-chat demo --tour`: an offline playground a newcomer types into, no code written.

It makes one throwaway folder (a Codex home pointed at the mock, a state dir, a work folder),
starts the loopback mock model with the tour's script (`tour.TOUR_SCRIPT`), prints the
exports that point a second terminal at them and the steps to type (`tour.render_steps`),
then waits until Ctrl-C, and removes the folder (`--keep` leaves it).

What it must never do: touch the owner's own Codex home or state dir, listen anywhere but
loopback, or run the steps itself (the person does; the tests run the same commands).
"""

from __future__ import annotations

import shlex
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.cli.tour import render_steps
from loopx_chat.state.location import STATE_DIR_ENV

TITLE = "loopx-chat tour: goals, runs, a gate, an approval and the page, offline"
READY = "The mock model is answering. Press Ctrl-C here to end the tour."


def _free_port() -> int:
    """A loopback port free now, for the tour's `serve` (not the owner's 8767)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _exports(home: Path, state: Path, work: Path, codex: Path) -> list[str]:
    lines = [
        f"export LOOPX_CHAT_CODEX_HOME={shlex.quote(str(home))}",
        f"export {STATE_DIR_ENV}={shlex.quote(str(state))}",
        f"export LOOPX_CHAT_CODEX_BIN={shlex.quote(str(codex))}",
    ]
    bindir = Path(sys.executable).parent
    if (bindir / "loopx-chat").exists():
        lines.append(f'export PATH={shlex.quote(str(bindir))}:"$PATH"')
    lines.append(f"cd {shlex.quote(str(work))}")
    return lines


def run_tour(cli: CliContext, keep: bool) -> None:
    from loopx_chat.cli.tour import TOUR_SCRIPT
    from loopx_chat.codex.binary import find_codex
    from loopx_chat.codex.offline_config import write_offline_codex_config
    from loopx_chat.model_mock.responses import MockResponsesServer, block_until_signalled
    from loopx_chat.state.service_runtime import read_runtime

    codex = find_codex(cli.codex_bin, cli.environ).path  # no codex: refused before anything
    root = Path(tempfile.mkdtemp(prefix="loopx-chat-tour-"))
    home, state, work = root / "codex-home", root / "state", root / "work"
    work.mkdir()
    try:
        with MockResponsesServer() as mock:
            mock.load_script(TOUR_SCRIPT)
            write_offline_codex_config(home, mock.base_url)
            click.secho(TITLE, bold=True)
            click.echo(
                f"A throwaway Codex home talks to a mock model at {mock.base_url}; nothing "
                "leaves this machine and your own Codex home and state are not touched.\n"
                "In another terminal, paste these lines first; every step runs there. A step "
                "marked (another terminal) runs beside the one before it: open one more "
                "terminal and paste the same lines there too.\n"
            )
            for line in _exports(home, state, work, codex):
                click.echo(f"    {line}")
            for line in render_steps(_free_port()):
                click.echo(line)
            click.echo(f"\n{READY}")
            sys.stdout.flush()
            block_until_signalled()
            left = read_runtime(state)
            if left is not None:
                click.echo(
                    f"The tour's `loopx-chat serve` (pid {left.pid}) still runs: stop it with "
                    "Ctrl-C in its terminal.",
                    err=True,
                )
    finally:
        if keep:
            click.echo(f"The tour's folder stays: {root}", err=True)
        else:
            shutil.rmtree(root, ignore_errors=True)
            click.echo("Tour ended; its throwaway folder is removed.", err=True)

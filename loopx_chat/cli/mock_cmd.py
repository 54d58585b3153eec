"""`loopx-chat mock serve`: the loopback mock of the model API in the foreground, scripted
from a JSON file, so codex can be driven offline without writing code.

It prints the mock's base URL on stdout (one line, flushed) and serves until Ctrl-C or
SIGTERM. `--script FILE` says what each model request answers (`model_mock/script.py`: the
next requests in order, a default, and per goal the continuation turns of its runs);
`--codex-home DIR` also writes the `config.toml` that points a Codex home at this mock.

What it must never do: listen anywhere but loopback, or write into a Codex home that is a
person's own (one with a `config.toml` it did not write, or an `auth.json`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from loopx_chat.cli.context import CliContext, read_json_input
from loopx_chat.cli.options import port_option
from loopx_chat.errors import Remedy, UsageError

if TYPE_CHECKING:
    from loopx_chat.model_mock.script import MockScript

SCRIPT_LIMIT = 1 << 20


def _script(source: str) -> MockScript:
    from loopx_chat.model_mock.script import ScriptRefused, parse_script

    doc = read_json_input(source, "--script", limit=SCRIPT_LIMIT)
    try:
        return parse_script(doc)
    except ScriptRefused as exc:
        raise UsageError(f"--script {source}: {exc}", error_code="input_invalid") from None


def _check_home(home: Path) -> None:
    """Refuse a folder that is a person's own Codex home, before anything listens."""
    from loopx_chat.codex.offline_config import OFFLINE_HEADER

    config = home / "config.toml"
    ours = not config.exists() or config.read_bytes().startswith(OFFLINE_HEADER.encode())
    if ours and not (home / "auth.json").exists():
        return
    raise UsageError(
        "--codex-home names a Codex home of your own (it has a config.toml loopx-chat did "
        "not write, or an auth.json); it was left as it is",
        error_code="usage_error",
        remedy=Remedy(
            summary="`mock serve` points only a throwaway home at the mock.",
            next_action="Give a new or empty folder: `loopx-chat mock serve --codex-home "
            "/tmp/mock-home`, then LOOPX_CHAT_CODEX_HOME=/tmp/mock-home for loopx-chat.",
        ),
    )


@click.group()
def mock() -> None:
    """The loopback mock of the model API, scriptable from a file: try codex offline."""


@mock.command("serve")
@port_option(0, " on 127.0.0.1")
@click.option(
    "--script",
    "script_file",
    metavar="FILE",
    default=None,
    help="What each model request answers, as JSON (`-`: stdin): requests, default, goals.",
)
@click.option(
    "--codex-home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also write the config.toml that points this (new or throwaway) Codex home at the mock.",
)
@click.pass_obj
def mock_serve(
    cli: CliContext, port: int, script_file: str | None, codex_home: Path | None
) -> None:
    """Serve the mock on loopback until Ctrl-C; print its base URL."""
    from loopx_chat.model_mock.responses import MockResponsesServer, block_until_signalled
    from loopx_chat.model_mock.script import MockScript

    script = _script(script_file) if script_file else MockScript()
    home = cli.cwd / codex_home if codex_home else None
    if home is not None:
        _check_home(home)
    server = MockResponsesServer("127.0.0.1", port)
    try:
        server.start()
    except OSError as exc:
        raise UsageError(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror}",
            error_code="listen_failed",
            remedy=Remedy(
                summary=f"Port {port} cannot be used.",
                next_action="Pick another: `loopx-chat mock serve --port 0` takes any free port.",
            ),
        ) from None
    try:
        server.load_script(script)
        if home is not None:
            from loopx_chat.codex.offline_config import write_offline_codex_config

            write_offline_codex_config(home, server.base_url)
            click.echo(f"codex home for the mock: LOOPX_CHAT_CODEX_HOME={home}", err=True)
        click.echo(server.base_url)
        sys.stdout.flush()  # the URL reaches a reader of the pipe before we block
        block_until_signalled()
    finally:
        server.stop()

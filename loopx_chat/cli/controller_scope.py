"""One ChatController for the length of a CLI command, closed however the command ends.

Shared by every command that drives Codex (`chat`, `writeback`). SIGTERM unwinds through it,
so an active turn is recorded as interrupted and the app-servers close.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.cli.options import first_output_from_env
from loopx_chat.controller.chat_controller import DEFAULT_CONFIG, ChatController, ControllerConfig


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def with_first_output(config: ControllerConfig, cli: CliContext) -> ControllerConfig:
    """`config` with `LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT` applied, when the environment sets it."""
    seconds = first_output_from_env(cli)
    if seconds is None:
        return config
    return replace(config, timeouts=replace(config.timeouts, first_output=seconds))


@contextmanager
def command_controller(ctx: click.Context) -> Iterator[ChatController]:
    """The controller for this command, with the config the `chat` group's options set
    (`CliContext.controller_config`), else the controller's defaults."""
    cli: CliContext = ctx.obj
    config = cli.controller_config or with_first_output(DEFAULT_CONFIG, cli)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    controller = ChatController(
        store=cli.store(), environ=cli.environ, cwd=cli.cwd, codex_bin=cli.codex_bin, config=config
    )
    try:
        yield controller
    finally:
        controller.close()
        signal.signal(signal.SIGTERM, previous)

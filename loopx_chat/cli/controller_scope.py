"""One ChatController for the length of a CLI command, closed however the command ends.

Shared by every command that drives Codex (`chat`, `writeback`). SIGTERM unwinds through it,
so an active turn is recorded as interrupted and the app-servers close.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.codex.thread import ThreadOptions, Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.controller.host_requests import DECISION_TIMEOUT_SEC


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def command_controller(ctx: click.Context) -> Iterator[ChatController]:
    """The controller for this command; `chat` options (if given) set its timeouts and sandbox."""
    cli: CliContext = ctx.obj
    opts: dict[str, Any] = ctx.meta.get("chat_options", {})
    config = ControllerConfig(
        timeouts=Timeouts(
            idle=opts.get("idle_timeout", 180.0), hard=opts.get("turn_timeout", 900.0)
        ),
        options=ThreadOptions(
            sandbox=opts.get("sandbox", "read-only"),
            approval_policy=opts.get("approval", "never"),
            plan=opts.get("plan", False),
        ),
        decision_timeout=opts.get("decision_timeout", DECISION_TIMEOUT_SEC),
    )
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    controller = ChatController(
        store=cli.store(), environ=cli.environ, cwd=cli.cwd, codex_bin=cli.codex_bin, config=config
    )
    try:
        yield controller
    finally:
        controller.close()
        signal.signal(signal.SIGTERM, previous)

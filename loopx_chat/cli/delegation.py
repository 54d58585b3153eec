"""Whether a command runs here or in the owner's running service, and the two ways it runs.

Owns the choice: `service_for(cli)` is the running service of this state dir serving the
Codex home this CLI resolved (found through `service.json`, checked by its `capabilities`),
or None: `--direct`, no service, or one skipped with a one-line note on stderr (stale file,
no answer in 1 s, another home). `chat_backend(ctx)` is what `chat new|send|resume|interrupt`
call: the service through `service.client`, or a controller in this process. Both answer
with the same plain documents, so the commands render one way, whichever ran.

It loads the controller only on the direct path, and the service client only when a
`service.json` is there; it never talks to a service that failed the identity check.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.errors import LoopxChatError
from loopx_chat.home import resolve_home_path

if TYPE_CHECKING:
    from loopx_chat.controller.chat_controller import ChatController
    from loopx_chat.service.client import ServiceClient

# The `chat` group's options a turn carries as its own (with `--approval`, `--plan` and
# `--decision-timeout` of `chat new|send`): given ones go with the turn, here or to the
# service, by these names (`controller.turn_settings.WIRE`).
CHAT_OPTIONS = ("sandbox", "idle_timeout", "turn_timeout", "first_output_timeout")
TURN_OPTIONS = "turn_options"  # the ctx.meta key of the options given, by name
# Not given by the command: a default, or the terminal's environment
# (LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT): the service reads its own environment, and
# `command_controller` applies the terminal's here.
_NOT_GIVEN = (click.core.ParameterSource.DEFAULT, click.core.ParameterSource.ENVIRONMENT)


def given_turn_options(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    """Record which of the options `values` names this command was given, for the turn."""
    given = {
        name: value
        for name, value in values.items()
        if ctx.get_parameter_source(name) not in _NOT_GIVEN
    }
    options = ctx.meta.setdefault(TURN_OPTIONS, {})
    options.update(given)
    return given


def _note(text: str) -> None:
    click.echo(f"[loopx-chat] {text}", err=True)


def _runtime_file_exists(cli: CliContext) -> bool:
    # A stat, before anything of the service is imported: most commands find no service.
    # The name is `state.service_runtime.RUNTIME_FILE` (the delegation tests find a service
    # by it); importing it here would load that module for every direct command.
    return os.path.exists(cli.state_dir / "service.json")


def service_for(cli: CliContext) -> ServiceClient | None:
    """The owner's running service for this state dir and home, or None (run here)."""
    if cli.direct or not _runtime_file_exists(cli):
        return None
    from loopx_chat.cli.served_send import NOT_PROBED, probed
    from loopx_chat.service.client import ServiceClient, Skipped, find_service

    # The home's path is its identity: no need to read its config.toml for the sqlite home.
    home = resolve_home_path(cli.environ, cli.cwd)[0]
    found = probed(cli.state_dir, home)  # by the fast path, in this process, a moment ago
    if found is NOT_PROBED:
        found = find_service(cli.state_dir, home)
    if isinstance(found, Skipped):
        _note(f"not using the service: {found.note}; running here")
        return None
    return found if isinstance(found, ServiceClient) else None


class DirectChat:
    """The chat calls on a controller in this process."""

    def __init__(
        self,
        controller: ChatController,
        notice: Callable[[ChatController | None], None] | None = None,
    ) -> None:
        self.controller = controller
        self._notice = notice  # what the command says after the controller's work, if anything

    def _said(self) -> None:
        if self._notice is not None:
            self._notice(self.controller)

    def open_session(self, goal_id: str, work_dir: str) -> dict[str, Any]:
        return self.controller.open_session(goal_id, Path(work_dir)).public_dict()

    def resume_session(self, session_id: str) -> dict[str, Any]:
        record = self.controller.resume_session(session_id).public_dict()
        self._said()
        return record

    def interrupt_turn(self, session_id: str) -> dict[str, Any]:
        return self.controller.interrupt(session_id)

    def submit_turn(
        self,
        session_id: str,
        text: str,
        client_turn_id: str | None,
        *,
        on_delta: Callable[[str], None],
        on_started: Callable[[str], None],
        on_notice: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        result = self.controller.submit_turn(
            session_id,
            text,
            client_turn_id=client_turn_id,
            on_delta=on_delta,
            on_started=lambda turn: on_started(turn.turn_id),
            on_notice=on_notice,
        )
        self._said()
        return {
            "session_id": result.session.session_id,
            "thread_id": result.session.upstream_thread_id,
            "created": result.created,
            "turn": result.turn.public_dict(),
        }


class ServedChat:
    """The chat calls through the service; one it refuses as `busy` (every app-server it
    may keep loaded is running a turn: nothing was tried) runs here instead, after a note,
    and so does the rest of the command (a session opened here is driven from here)."""

    def __init__(
        self,
        service: ServiceClient,
        direct: Callable[[], DirectChat],
        notice: Callable[[ChatController | None], None] | None = None,
        turn_options: dict[str, Any] | None = None,
    ) -> None:
        self.service = service
        self._direct = direct
        self._here: DirectChat | None = None
        self._notice = notice  # called with None when the service says `host_loop`
        # The turn's own options, sent with it; a command run here has them in its config.
        self._turn_options = turn_options or {}

    def _call(
        self, name: str, *args: Any, served: dict[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """`served`: what only the service's call takes."""
        if self._here is None:
            try:
                call = getattr(self.service, name)
                result: dict[str, Any] = call(*args, **kwargs, **(served or {}))
                if result.get("host_loop") and self._notice is not None:
                    self._notice(None)
                return result
            except LoopxChatError as exc:
                if exc.error_code != "busy" or name == "interrupt_turn":
                    raise
            _note("not using the service: every app-server it may keep loaded is busy; "
                  "running here")  # fmt: skip
            self._here = self._direct()
        result = getattr(self._here, name)(*args, **kwargs)
        return result

    def open_session(self, goal_id: str, work_dir: str) -> dict[str, Any]:
        return self._call("open_session", goal_id, work_dir)

    def resume_session(self, session_id: str) -> dict[str, Any]:
        return self._call("resume_session", session_id)

    def interrupt_turn(self, session_id: str) -> dict[str, Any]:
        return self._call("interrupt_turn", session_id)

    def submit_turn(
        self, session_id: str, text: str, client_turn_id: str | None, **stream: Any
    ) -> dict[str, Any]:
        """`stream`: `on_delta`, `on_started` and `on_notice`, as both paths take them."""
        served = {"options": self._turn_options} if self._turn_options else None
        return self._call("submit_turn", session_id, text, client_turn_id, served=served, **stream)


# What the chat commands call: the same methods, each answering with a plain document.
ChatBackend: TypeAlias = "DirectChat | ServedChat"


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def chat_backend(
    ctx: click.Context,
    notice: Callable[[ChatController | None], None] | None = None,
) -> Iterator[ChatBackend]:
    """The service when one of ours is up, else a controller here. The turn's own options
    go with it either way (to the service in its request; here in the controller's config);
    SIGTERM unwinds through either (a delegated turn is then interrupted in the service, as
    a direct one is stopped here). Every message the CLI takes fits in a turn request
    (`turn_defaults.TURN_BODY_LIMIT`)."""
    cli: CliContext = ctx.obj
    service = service_for(cli)
    if service is None:
        from loopx_chat.cli.controller_scope import command_controller

        with command_controller(ctx) as controller:
            yield DirectChat(controller, notice)
        return
    with ExitStack() as stack:

        def here() -> DirectChat:  # made on first use: a served command never loads it
            from loopx_chat.cli.controller_scope import command_controller

            return DirectChat(stack.enter_context(command_controller(ctx)), notice)

        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        stack.callback(signal.signal, signal.SIGTERM, previous)
        yield ServedChat(service, here, notice, ctx.meta.get(TURN_OPTIONS))

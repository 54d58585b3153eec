"""`loopx-chat serve`: run the local service in the foreground (what the LaunchAgent runs)."""

from __future__ import annotations

import threading

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.errors import UsageError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.service.app import ServiceApp
from loopx_chat.service.server import LoopbackServer, serve_forever


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback only.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8767,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.pass_obj
def serve(cli: CliContext, host: str, port: int) -> None:
    """Serve the chat API, /status.json and the first-screen page on loopback."""
    controller = ChatController(
        store=cli.store(), environ=cli.environ, cwd=cli.cwd, codex_bin=cli.codex_bin
    )
    goals = GateStore(cli.state_dir)
    try:
        server = LoopbackServer(
            host,
            port,
            lambda bound_port: ServiceApp(controller, goals, port=bound_port, work_dir=cli.cwd),
        )
    except OSError as exc:
        controller.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}", error_code="listen_failed"
        ) from None
    except BaseException:
        controller.close()  # e.g. a host that is not loopback (non_loopback_host)
        raise
    threading.Thread(
        target=server.app.warm_host_facts, name="loopx-host-warmup", daemon=True
    ).start()
    serve_forever(server)

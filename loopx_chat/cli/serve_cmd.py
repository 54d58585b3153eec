"""`loopx-chat serve`: run the local service in the foreground (what the LaunchAgent runs).

It makes (or reads) the owner's secret, writes `service.json` once it listens, and
removes `service.json` when it stops. The login URL is printed on stderr only when stderr is a
terminal: under launchd stderr is a log file, and the secret never goes into a log."""

from __future__ import annotations

import os
import sys
import threading

import click

from loopx_chat import __version__
from loopx_chat.cli.context import CliContext
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.errors import UsageError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.service.app import MAX_STREAMS, ServiceApp, log
from loopx_chat.service.server import (
    MAX_CONNECTIONS,
    LoopbackServer,
    raise_open_file_limit,
    serve_forever,
)
from loopx_chat.state.service_runtime import (
    ensure_secret,
    login_url,
    remove_runtime,
    runtime_for_this_process,
    write_runtime,
)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback only.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8767,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--max-warm",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Codex app-servers kept loaded at once (the least recently used idle one closes "
    "first; beyond it with all busy: refused as busy).",
)
@click.option(
    "--max-running",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Goals running on Codex's own loop at once (Run beyond it: too_many_running).",
)
@click.option(
    "--max-streams",
    type=click.IntRange(1, 4096),
    default=MAX_STREAMS,
    show_default=True,
    help="Event streams open at once.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 4096),
    default=MAX_CONNECTIONS,
    show_default=True,
    help="Connections open at once.",
)
@click.pass_obj
def serve(
    cli: CliContext,
    host: str,
    port: int,
    max_warm: int,
    max_running: int,
    max_streams: int,
    max_connections: int,
) -> None:
    """Serve the chat API, /status.json and the first-screen page on loopback, to the owner
    only (everything but /healthz needs the secret in the state dir)."""
    raise_open_file_limit()
    secret = ensure_secret(cli.state_dir)
    controller = ChatController(
        store=cli.store(),
        environ=cli.environ,
        cwd=cli.cwd,
        codex_bin=cli.codex_bin,
        config=ControllerConfig(max_warm=max_warm),
    )
    goals = GateStore(cli.state_dir)
    try:
        server = LoopbackServer(
            host,
            port,
            lambda bound_port: ServiceApp(
                controller,
                goals,
                port=bound_port,
                work_dir=cli.cwd,
                secret=secret,
                max_streams=max_streams,
                max_running=max_running,
            ),
            max_connections=max_connections,
        )
    except OSError as exc:
        controller.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}", error_code="listen_failed"
        ) from None
    except BaseException:
        controller.close()  # e.g. a host that is not loopback (non_loopback_host)
        raise
    threading.Thread(target=server.app.warm_up, name="loopx-host-warmup", daemon=True).start()
    # A run whose service died while its goal ran goes on here (codex continues it once the
    # thread is loaded again); one the owner paused or stopped is never restarted.
    threading.Thread(target=server.app.runs.recover, name="loopx-run-recovery", daemon=True).start()
    try:
        write_runtime(
            cli.state_dir,
            runtime_for_this_process(
                server.port, __version__, controller.binding.path, controller.store.now()
            ),
        )
    except BaseException:
        server.server_close()
        controller.close()
        raise
    if sys.stderr.isatty():
        log(f"open the page: {login_url(server.port, secret)}")
    else:
        # Under launchd stderr is a log file, which must never hold the secret.
        log("open the page with `loopx-chat open` (it carries the owner's login link)")
    try:
        serve_forever(server)
    finally:
        remove_runtime(cli.state_dir, os.getpid())

"""`loopx-chat serve`: run the local service in the foreground (what the LaunchAgent runs).

It makes (or reads) the owner's secret, writes `service.json` once it listens, and
removes `service.json` when it stops. The login URL is printed on stderr only when stderr is a
terminal: under launchd stderr is a log file, and the secret never goes into a log."""

from __future__ import annotations

import errno
import os
import sys
import threading

import click

from loopx_chat import __version__
from loopx_chat.cli.approval_options import policy_options
from loopx_chat.cli.context import CliContext
from loopx_chat.cli.options import port_option
from loopx_chat.codex.thread import ThreadOptions
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.errors import UsageError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.notify.dispatcher import MODES
from loopx_chat.notify.webhook import checked_url
from loopx_chat.service.app import MAX_STREAMS, ServiceApp, log
from loopx_chat.service.notices import NoticeWatcher, senders_for
from loopx_chat.service.port_holder import find_holder, listen_refusal
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
@port_option(8767, "")
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
@click.option(
    "--notify",
    "notify_mode",
    type=click.Choice(MODES),
    default="desktop",
    show_default=True,
    help="How the owner is told that a goal needs them: desktop notices (osascript or "
    "notify-send), the --notify-url webhook, both, or none.",
)
@click.option(
    "--notify-url",
    default=None,
    metavar="URL",
    help="Opt-in webhook: a signed JSON POST (goal, gate kind, page URL) per notice.",
)
@click.option(
    "--sandbox",
    type=click.Choice(["read-only", "workspace-write"]),
    default="read-only",
    show_default=True,
    help="What the agent may touch in the sessions this service runs.",
)
@policy_options
@click.pass_obj
def serve(
    cli: CliContext,
    host: str,
    port: int,
    max_warm: int,
    max_running: int,
    max_streams: int,
    max_connections: int,
    notify_mode: str,
    notify_url: str | None,
    sandbox: str,
    approval: str,
    plan: bool,
    decision_timeout: float,
) -> None:
    """Serve the chat API, /status.json and the first-screen page on loopback, to the owner
    only (everything but /healthz needs the secret in the state dir)."""
    if notify_url is not None:
        checked_url(notify_url)
    if notify_mode in ("webhook", "both") and not notify_url:
        raise UsageError(f"--notify {notify_mode} needs --notify-url URL", error_code="usage_error")
    raise_open_file_limit()
    secret = ensure_secret(cli.state_dir)
    controller = ChatController(
        store=cli.store(),
        environ=cli.environ,
        cwd=cli.cwd,
        codex_bin=cli.codex_bin,
        config=ControllerConfig(
            max_warm=max_warm,
            options=ThreadOptions(sandbox=sandbox, approval_policy=approval, plan=plan),
            decision_timeout=decision_timeout,
        ),
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
        holder = find_holder(port, cli.state_dir) if exc.errno == errno.EADDRINUSE else None
        raise listen_refusal(host, port, exc, holder) from None
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
    watcher = NoticeWatcher(
        status=server.app.status_snapshot,
        actions=server.app.page_actions,
        senders=senders_for(notify_mode, notify_url, cli.state_dir, cli.environ),
        state_dir=cli.state_dir,
        page_url=f"http://127.0.0.1:{server.port}/",
    )
    server.app.card_notes = watcher.notes
    controller.host_requests.listeners.append(lambda _live: watcher.wake())
    watcher.start()
    try:
        serve_forever(server)
    finally:
        watcher.close()
        remove_runtime(cli.state_dir, os.getpid())

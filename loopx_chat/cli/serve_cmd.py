"""`loopx-chat serve`: run the local service in the foreground (what the LaunchAgent runs).

It makes (or reads) the owner's secret, listens on loopback (browsers; or accepts on the TCP
socket systemd passed, service/inherited_socket.py) and on the owner's Unix socket in the state
dir (the CLI, always its own), writes `service.json` once it listens, and removes both when it
stops. It never prints a credential: `loopx-chat open` signs a browser in."""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import click

from loopx_chat import __version__
from loopx_chat.cli.approval_options import policy_options
from loopx_chat.cli.context import CliContext
from loopx_chat.cli.controller_scope import with_first_output
from loopx_chat.cli.options import port_option
from loopx_chat.codex.thread import ThreadOptions
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.errors import Remedy, UsageError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.notify.dispatcher import MODES
from loopx_chat.notify.ntfy import checked_topic_url
from loopx_chat.notify.webhook import checked_url
from loopx_chat.service.app import MAX_STREAMS, ServiceApp
from loopx_chat.service.inherited_socket import inherited_listener, server_class
from loopx_chat.service.launchd_socket import launchd_listener
from loopx_chat.service.logline import LOG_CAP_BYTES, log
from loopx_chat.service.logline import set_cap as set_log_cap
from loopx_chat.service.malloc_arenas import cap_malloc_arenas
from loopx_chat.service.notices import NoticeWatcher, push_senders, senders_for
from loopx_chat.service.port_holder import find_holder, listen_refusal
from loopx_chat.service.public_url import PublicOrigin, parse_public_url
from loopx_chat.service.server import (
    MAX_CONNECTIONS,
    OwnerSocketServer,
    raise_open_file_limit,
    serve_forever,
)
from loopx_chat.state import owner_socket
from loopx_chat.state.push_options import PUSH_CHANNELS
from loopx_chat.state.push_secrets import with_kept_secrets
from loopx_chat.state.service_runtime import (
    ensure_secret,
    remove_runtime,
    runtime_for_this_process,
    write_runtime,
)


def readiness_line(cli: CliContext) -> str:
    """What `home check` says of the codex and the home's sign-in, as one line with no path."""
    from loopx_chat.codex.compat_probe import check_codex, summary_line
    from loopx_chat.controller.home_ownership import home_check

    report = home_check(cli.binding(), cli.environ)
    line = summary_line(check_codex(cli.codex_bin, cli.environ, cli.state_dir))
    codes = ", ".join(p.code for p in report.issues)
    return f"{line}; home: {'ok' if not codes else 'not ok (' + codes + ')'}"


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
    help="The owner's connections open at once (connections that have not signed in share "
    "a small separate allowance).",
)
@click.option(
    "--log-cap",
    type=click.IntRange(4096, 1 << 40),
    default=LOG_CAP_BYTES,
    show_default=True,
    metavar="BYTES",
    help="When stderr is a file (launchd's log, `2>>file`) past this size, it is moved to "
    "<file>.1 and a new one started.",
)
@click.option(
    "--public-url",
    default=None,
    metavar="URL",
    help="The https origin your own reverse proxy (tailscale serve, Caddy) serves this "
    "service on, for your phone: accepted besides loopback, nothing else. The service still "
    "listens on loopback only.",
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
    "--ntfy-url",
    default=None,
    metavar="URL",
    help="Also push each notice to your phone through ntfy: http(s)://SERVER/TOPIC (a tap "
    "opens the gate's card; a token, if your server wants one, in LOOPX_CHAT_NTFY_TOKEN).",
)
@click.option(
    "--push",
    type=click.Choice(PUSH_CHANNELS),
    multiple=True,
    help="Also push each notice to your phone through this channel (repeat for more): "
    "pushover (LOOPX_CHAT_PUSHOVER_TOKEN and LOOPX_CHAT_PUSHOVER_USER), telegram "
    "(LOOPX_CHAT_TELEGRAM_TOKEN and --telegram-chat) or slack (LOOPX_CHAT_SLACK_WEBHOOK_URL). "
    "Secrets come from the environment only.",
)
@click.option(
    "--telegram-chat",
    default=None,
    metavar="ID",
    help="The Telegram chat `--push telegram` writes to: its numeric id or @channelname.",
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
    log_cap: int,
    public_url: str | None,
    notify_mode: str,
    notify_url: str | None,
    ntfy_url: str | None,
    push: tuple[str, ...],
    telegram_chat: str | None,
    sandbox: str,
    approval: str,
    plan: bool,
    decision_timeout: float,
) -> None:
    """Serve the chat API, /status.json and the first-screen page on loopback, and the
    owner's Unix socket, to the owner only."""
    public = parse_public_url(public_url) if public_url is not None else None
    if notify_url is not None:
        checked_url(notify_url)
    if ntfy_url is not None:
        checked_topic_url(ntfy_url)
    if notify_mode in ("webhook", "both") and not notify_url:
        raise UsageError(f"--notify {notify_mode} needs --notify-url URL", error_code="usage_error")
    if telegram_chat is not None and "telegram" not in push:
        raise UsageError("--telegram-chat is for --push telegram", error_code="usage_error")
    # A secret the environment lacks may have been kept at `service install` (0600 file).
    environ = with_kept_secrets(cli.environ, cli.state_dir) if push or ntfy_url else cli.environ
    push_senders(push, environ, telegram_chat)  # a missing secret stops serve here
    set_log_cap(log_cap)
    raise_open_file_limit()
    # Before any thread starts: threads that come and go spread freed memory over arenas.
    cap_malloc_arenas()
    secret = ensure_secret(cli.state_dir)
    # The state dir's claim comes before anything starts: a second service on it stops here,
    # before it checks codex, listens, warms a thread or looks for a run to recover.
    owner_listening = claim_state_dir(cli.state_dir)
    try:
        _serve_claimed(
            cli,
            owner_listening,
            ServeSettings(
                secret=secret,
                host=host,
                port=port,
                max_warm=max_warm,
                max_running=max_running,
                max_streams=max_streams,
                max_connections=max_connections,
                public=public,
                notify_mode=notify_mode,
                notify_url=notify_url,
                ntfy_url=ntfy_url,
                push=push,
                telegram_chat=telegram_chat,
                environ=environ,
                options=ThreadOptions(sandbox=sandbox, approval_policy=approval, plan=plan),
                decision_timeout=decision_timeout,
            ),
        )
    finally:
        owner_socket.remove(cli.state_dir, owner_listening)
        owner_listening.close()


@dataclass(frozen=True)
class ServeSettings:
    """What `serve` was asked for, checked, for the part that runs once it holds the claim."""

    secret: str
    host: str
    port: int
    max_warm: int
    max_running: int
    max_streams: int
    max_connections: int
    public: PublicOrigin | None
    notify_mode: str
    notify_url: str | None
    ntfy_url: str | None
    push: tuple[str, ...]
    telegram_chat: str | None
    environ: Mapping[str, str]  # the CLI's, with the push secrets kept at install
    options: ThreadOptions
    decision_timeout: float


def claim_state_dir(state_dir: Path) -> socket.socket:
    """The owner's socket, with the state dir's claim; a clear refusal when it is taken."""
    try:
        return owner_socket.listen(state_dir)
    except owner_socket.AlreadyServed:
        raise UsageError(
            "another loopx-chat service already serves this state dir",
            error_code="service_already_running",
            remedy=Remedy(
                summary="One service serves a state dir.",
                next_action="Use it (`loopx-chat open` opens its page), or stop it first "
                "(`loopx-chat service stop`, `launchagent uninstall`, or end its `serve`); "
                "another state dir takes `--state-dir DIR`.",
            ),
        ) from None
    except OSError as exc:
        raise UsageError(
            f"cannot open the owner's socket in the state dir: {exc.strerror or exc}",
            error_code="listen_failed",
        ) from None


def _serve_claimed(
    cli: CliContext, owner_listening: socket.socket, settings: ServeSettings
) -> None:
    # What `home check` says of the codex and the home, logged once, as one line: it runs
    # while the rest starts (a cold check runs codex three times; a cached one, none).
    checked: list[str] = []
    readiness = threading.Thread(
        target=lambda: checked.append(readiness_line(cli)), name="loopx-codex-check", daemon=True
    )
    readiness.start()
    controller = ChatController(
        store=cli.store(),
        environ=cli.environ,
        cwd=cli.cwd,
        codex_bin=cli.codex_bin,
        config=with_first_output(
            ControllerConfig(
                max_warm=settings.max_warm,
                options=settings.options,
                decision_timeout=settings.decision_timeout,
            ),
            cli,
        ),
    )
    goals = GateStore(cli.state_dir)
    # The check of the codex ends before the service listens: nothing of it runs, or is
    # written, once clients may come.
    readiness.join()
    try:
        # systemd's socket (`loopx-chat.socket`) or launchd's (the plist's `Sockets`) when the
        # service manager holds the port, else our own bind.
        listener = (
            inherited_listener(os.environ, cast(MutableMapping[str, str], cli.environ))
            or launchd_listener()
        )
        server = server_class(listener)(
            settings.host,
            settings.port,
            lambda bound_port: ServiceApp(
                controller,
                goals,
                port=bound_port,
                work_dir=cli.cwd,
                secret=settings.secret,
                max_streams=settings.max_streams,
                max_running=settings.max_running,
                state_dir=cli.state_dir,
                public=settings.public,
            ),
            max_connections=settings.max_connections,
        )
    except OSError as exc:
        controller.close()
        holder = (
            find_holder(settings.port, cli.state_dir) if exc.errno == errno.EADDRINUSE else None
        )
        raise listen_refusal(settings.host, settings.port, exc, holder) from None
    except BaseException:
        controller.close()  # e.g. a host that is not loopback (non_loopback_host)
        raise
    for line in checked:  # logged once the service listens (a failed start says only why)
        log(line)
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
    owner = OwnerSocketServer(cli.state_dir, server.app, owner_listening)
    # Nothing here carries a credential: the page signs in with `loopx-chat open`.
    log("open the page with `loopx-chat open` (it signs your browser in with a one-time code)")
    watcher = NoticeWatcher(
        status=server.app.status_snapshot,
        actions=server.app.page_actions,
        senders=senders_for(
            settings.notify_mode,
            settings.notify_url,
            cli.state_dir,
            settings.environ,
            settings.ntfy_url,
            settings.push,
            settings.telegram_chat,
        ),
        state_dir=cli.state_dir,
        page_url=settings.public.base_url + "/"
        if settings.public
        else f"http://127.0.0.1:{server.port}/",
    )
    server.app.card_notes = watcher.notes
    controller.host_requests.listeners.append(lambda _live: watcher.wake())
    watcher.start()
    try:
        serve_forever(server, also=(owner,))
    finally:
        watcher.close()
        remove_runtime(cli.state_dir, os.getpid())

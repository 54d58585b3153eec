"""`loopx-chat launchagent install|uninstall|start|stop|restart|status`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import click

from loopx_chat.cli.context import CliContext, emit_json, json_option
from loopx_chat.launchagent.installer import (
    STATUS_EXIT,
    TEST_SWITCH,
    InstallerContext,
    LaunchAgentInstaller,
    Report,
    describe,
    status_exit_code,
)
from loopx_chat.launchagent.launchctl import Launchctl, subprocess_runner
from loopx_chat.launchagent.plist import APPROVAL_MODES, NOTIFY_MODES
from loopx_chat.notify.webhook import checked_url
from loopx_chat.state.push_options import DROP, PUSH_CHANNELS, PushChoice, PushPlan


def _installer(cli: CliContext) -> LaunchAgentInstaller:
    ctx = InstallerContext.from_environ(
        cli.environ,
        state_dir=str(cli.state_dir) if cli.state_dir_explicit else None,
        codex_bin=cli.codex_bin,
    )
    return LaunchAgentInstaller(ctx, lambda: Launchctl(subprocess_runner(cli.environ), ctx.uid))


def _render(report: Report, as_json: bool) -> None:
    if as_json:
        emit_json(report.to_dict())
    else:
        for line in describe(report):
            click.echo(line)


def _simple(name: str, doc: str, call: Callable[[LaunchAgentInstaller], Report]) -> click.Command:
    @click.command(name, help=doc)
    @json_option
    @click.pass_obj
    def command(cli: CliContext, as_json: bool) -> None:
        _render(call(_installer(cli)), as_json)

    return command


@click.group()
def launchagent() -> None:
    """Manage the macOS LaunchAgent that keeps `loopx-chat serve` running."""


@launchagent.command("install")
@click.option(
    "--codex-home",
    type=click.Path(path_type=Path),
    default=None,
    help="Bind to this Codex home (default: $LOOPX_CHAT_CODEX_HOME, else keep the installed "
    "binding, else $CODEX_HOME, else ~/.codex).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port the service listens on (default: keep the installed one, else 8767).",
)
@click.option(
    "--notify",
    type=click.Choice(NOTIFY_MODES),
    default=None,
    help="How the service tells the owner (default: keep the installed choice, else desktop).",
)
@click.option(
    "--notify-url",
    default=None,
    metavar="URL",
    help="The opt-in webhook the service posts signed notices to.",
)
@click.option(
    "--approval",
    type=click.Choice(APPROVAL_MODES),
    default=None,
    help="What codex may ask the owner in the service's turns (default: keep the installed "
    "choice, else never).",
)
@click.option(
    "--public-url",
    default=None,
    metavar="URL",
    help="The https origin your reverse proxy serves the service on, for your phone "
    "(default: keep the installed one, else none).",
)
@click.option(
    "--ntfy-url",
    default=None,
    metavar="URL",
    help="Push notices to your phone through ntfy, as `serve --ntfy-url` (default: keep the "
    "installed one; `none` drops it). LOOPX_CHAT_NTFY_TOKEN, if set, is kept too.",
)
@click.option(
    "--push",
    type=click.Choice((*PUSH_CHANNELS, DROP)),
    multiple=True,
    help="Push channels, as `serve --push` (repeatable; default: keep the installed ones; "
    "`none` drops them). Their secrets are read from this shell's environment and kept in "
    "the state dir (0600), never in the service's definition.",
)
@click.option(
    "--telegram-chat",
    default=None,
    metavar="ID",
    help="The Telegram chat `--push telegram` writes to (default: keep the installed one).",
)
@json_option
@click.pass_obj
def install(
    cli: CliContext,
    codex_home: Path | None,
    port: int | None,
    notify: str | None,
    notify_url: str | None,
    approval: str | None,
    public_url: str | None,
    ntfy_url: str | None,
    push: tuple[str, ...],
    telegram_chat: str | None,
    as_json: bool,
) -> None:
    """Install or upgrade the LaunchAgent, keeping its Codex home binding."""
    public_url = checked_install_options(notify_url, public_url, ntfy_url)
    source = "--codex-home" if codex_home else "LOOPX_CHAT_CODEX_HOME"
    explicit = str(codex_home) if codex_home else cli.environ.get("LOOPX_CHAT_CODEX_HOME") or None
    report = _installer(cli).install(
        explicit_home=explicit,
        port=port,
        explicit_source=source,
        notify=notify,
        notify_url=notify_url,
        approval=approval,
        public_url=public_url,
        push=PushChoice(ntfy_url, push, telegram_chat),
        check_push=check_push,
    )
    _render(report, as_json)


def checked_install_options(
    notify_url: str | None, public_url: str | None, ntfy_url: str | None
) -> str | None:
    """`install`'s URLs checked before anything changes; the public URL as `serve` takes it."""
    if notify_url is not None:
        checked_url(notify_url)
    if ntfy_url not in (None, DROP):
        from loopx_chat.notify.ntfy import checked_topic_url

        checked_topic_url(ntfy_url)
    if public_url is None:
        return None
    from loopx_chat.service.public_url import parse_public_url

    return parse_public_url(public_url).base_url  # public_url_invalid, nothing changed


def check_push(plan: PushPlan, environ: Mapping[str, str]) -> None:
    """What `serve` would refuse at every start, refused at install instead: a missing or
    malformed secret (`usage_error` naming the variable, never its value)."""
    from loopx_chat.notify.ntfy import NtfySender
    from loopx_chat.service.notices import push_senders

    push_senders(plan.channels, environ, plan.telegram_chat)
    if plan.ntfy_url:
        NtfySender(plan.ntfy_url, environ)


launchagent.add_command(
    _simple(
        "uninstall", "Unload and remove the plist (logs and state stay).", lambda i: i.uninstall()
    )
)
launchagent.add_command(
    _simple("start", "Load or restart the installed agent.", lambda i: i.start())
)
launchagent.add_command(_simple("stop", "Unload the agent (the plist stays).", lambda i: i.stop()))
launchagent.add_command(
    _simple("restart", "Rewrite the plist (binding kept) and restart.", lambda i: i.restart())
)


@launchagent.command("status")
@json_option
@click.pass_obj
def status(cli: CliContext, as_json: bool) -> None:
    """Installed? loaded? running and answering? bound to which home?

    \b
    Exit codes a script can use:
      0  running and answering on its port
      3  installed but not loaded, not running, or not answering
      4  not installed
      1  the status could not be read (an error, e.g. a malformed plist)
    """
    if sys.platform != "darwin" and cli.environ.get(TEST_SWITCH) != "1":
        _no_launchd(as_json)
    report = _installer(cli).status()
    _render(report, as_json)
    sys.exit(status_exit_code(report))


def _no_launchd(as_json: bool) -> None:
    """No launchd here, so no LaunchAgent can be installed: exit 4 (not installed), as the
    status exit codes say, and point to the service manager this system has."""
    note = (
        "there are no LaunchAgents outside macOS; on Linux `loopx-chat service status` "
        "reports the systemd user service"
    )
    if as_json:
        emit_json({"ok": True, "state": "not_installed", "platform": sys.platform, "notes": [note]})
    else:
        click.echo(f"launchagent: not installed ({note})")
    sys.exit(STATUS_EXIT["not_installed"])

"""`loopx-chat service install|status|start|stop|restart|uninstall`: keep `serve` running.

On Linux a systemd user service (`loopx_chat.systemd`); on macOS the very same commands as
`launchagent`, which they call; anywhere else `platform_unsupported`. `status` exits 0/3/4
on both. `LOOPX_SERVICE_PLATFORM` names the platform for the tests only."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from loopx_chat.cli import launchagent_cmd
from loopx_chat.cli.context import CliContext, emit_json, json_option
from loopx_chat.errors import Remedy, UsageError
from loopx_chat.launchagent.installer import (
    codex_at_install,
    installed_service_argv,
    report_lines,
)
from loopx_chat.launchagent.probe import probe_capabilities, service_facts
from loopx_chat.state.push_options import PushChoice
from loopx_chat.systemd.installer import (
    ServiceContext,
    ServiceInstaller,
    ServiceReport,
    status_exit_code,
)
from loopx_chat.systemd.systemctl import Systemctl, subprocess_runner
from loopx_chat.systemd.unit import SERVICE_UNIT

PLATFORM_SWITCH = "LOOPX_SERVICE_PLATFORM"


def _platform(cli: CliContext) -> str:
    named = cli.environ.get(PLATFORM_SWITCH, "") or sys.platform
    if named == "darwin" or named.startswith("linux"):
        return "darwin" if named == "darwin" else "linux"
    raise UsageError(
        f"loopx-chat has no service manager for {named}",
        error_code="platform_unsupported",
        remedy=Remedy(
            summary="`service` manages a systemd user unit (Linux) or a LaunchAgent (macOS).",
            next_action="Run `loopx-chat serve` directly on this system instead.",
        ),
    )


def _installer(cli: CliContext) -> ServiceInstaller:
    argv, warning = installed_service_argv()
    ctx = ServiceContext(
        environ=dict(cli.environ),
        user_home=cli.environ.get("HOME") or str(Path.home()),
        service_argv=argv,
        find_codex=codex_at_install,
        state_dir=str(cli.state_dir) if cli.state_dir_explicit else None,
        codex_bin=cli.codex_bin,
        service_warning=warning,
    )
    return ServiceInstaller(ctx, lambda: Systemctl(subprocess_runner(cli.environ)), _facts)


def _facts(state_dir: Path, bound: str | None) -> tuple[dict[str, Any], list[str]]:
    return service_facts(
        probe_capabilities(state_dir),
        bound,
        unit="unit",
        restart="loopx-chat service restart",
    )


# What `status` says of the unit, in a person's words.
STATE_WORDS = {
    "not_installed": "not installed",
    "installed_not_running": "installed but not running",
    "failed": "installed but failed",
    "running": "running",
    "active_without_unit": "running in systemd but its unit file is missing",
    "installed_manager_unavailable": "installed; no systemd user manager to ask",
}


def describe(report: ServiceReport) -> list[str]:
    state = STATE_WORDS.get(report.state, report.state)
    if report.state == "running":
        state += f" (pid {report.pid})"
    elif report.last_exit_code:
        state += f" (last exit code {report.last_exit_code})"
    head = [
        f"{SERVICE_UNIT}: {state}",
        f"unit:    {report.unit_path}" + (" (enabled)" if report.enabled else ""),
    ]
    more = [f"your drop-ins (untouched): {', '.join(report.dropins)}"] if report.dropins else []
    return report_lines(report, head, noun="unit", logs=report.logs, more=more)


def _render(report: ServiceReport, as_json: bool) -> None:
    if as_json:
        emit_json(report.to_dict())
    else:
        for line in describe(report):
            click.echo(line)


def _simple(
    name: str, doc: str, call: Callable[[ServiceInstaller], ServiceReport]
) -> click.Command:
    @click.command(name, help=doc)
    @json_option
    @click.pass_context
    def command(ctx: click.Context, as_json: bool) -> None:
        cli: CliContext = ctx.obj
        if _platform(cli) == "darwin":
            ctx.forward(launchagent_cmd.launchagent.commands[name])
            return
        _render(call(_installer(cli)), as_json)

    return command


@click.group()
def service() -> None:
    """Keep `loopx-chat serve` running: a systemd user service on Linux, the LaunchAgent on
    macOS (the same as `loopx-chat launchagent`)."""


def install(ctx: click.Context, **options: Any) -> None:
    """Install or upgrade the service, keeping its Codex home binding and your lines."""
    cli: CliContext = ctx.obj
    if _platform(cli) == "darwin":
        ctx.forward(launchagent_cmd.install)
        return
    public_url = launchagent_cmd.checked_install_options(
        options["notify_url"], options["public_url"], options["ntfy_url"]
    )
    codex_home = options["codex_home"]
    explicit = str(codex_home) if codex_home else cli.environ.get("LOOPX_CHAT_CODEX_HOME") or None
    report = _installer(cli).install(
        explicit_home=explicit,
        port=options["port"],
        explicit_source="--codex-home" if codex_home else "LOOPX_CHAT_CODEX_HOME",
        notify=options["notify"],
        notify_url=options["notify_url"],
        approval=options["approval"],
        public_url=public_url,
        push=PushChoice(options["ntfy_url"], options["push"], options["telegram_chat"]),
        check_push=launchagent_cmd.check_push,
    )
    _render(report, options["as_json"])


# The very options of `launchagent install`, so the two can never differ.
service.add_command(
    click.Command(
        "install",
        callback=click.pass_context(install),
        params=launchagent_cmd.install.params,
        help=install.__doc__,
    )
)


service.add_command(
    _simple(
        "uninstall",
        "Stop, disable and remove both units (your drop-ins, logs and state stay).",
        lambda i: i.uninstall(),
    )
)
service.add_command(_simple("start", "Start the installed service.", lambda i: i.start()))
service.add_command(
    _simple("stop", "Stop the service and its socket (the units stay).", lambda i: i.stop())
)
service.add_command(
    _simple("restart", "Rewrite the units (binding kept) and restart.", lambda i: i.restart())
)


@service.command("status")
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Installed? running and answering? bound to which home?

    \b
    Exit codes a script can use (the same on macOS and Linux):
      0  running and answering on its port
      3  installed but not loaded, not running, or not answering
      4  not installed
      1  the status could not be read (an error, e.g. a malformed unit)
    """
    cli: CliContext = ctx.obj
    if _platform(cli) == "darwin":
        ctx.forward(launchagent_cmd.status)
        return
    report = _installer(cli).status()
    _render(report, as_json)
    sys.exit(status_exit_code(report))

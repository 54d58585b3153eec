"""`loopx-chat open`: open the running service's page in the owner's browser, logged in.

It reads where the service runs (`service.json`) and the owner's secret from the state dir,
and hands the login URL to the system's opener (`open` on macOS, `xdg-open` elsewhere, as
click launches them: argv, never a shell). `--print` only prints the URL. The URL carries the
secret: it goes to the owner's browser or terminal, never to a log.
"""

from __future__ import annotations

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.errors import Remedy, UsageError


@click.command("open")
@click.option("--print", "print_only", is_flag=True, help="Print the login URL; open nothing.")
@click.pass_obj
def open_page(cli: CliContext, print_only: bool) -> None:
    """Open the running service's page in your browser, logged in as its owner."""
    from loopx_chat.state.service_runtime import login_url, read_runtime, read_secret

    runtime = read_runtime(cli.state_dir)
    try:
        secret = read_secret(cli.state_dir)
    except ValueError:
        secret = None
    if runtime is None or secret is None:
        raise UsageError(
            "no loopx-chat service is running for this state dir",
            error_code="service_not_running",
            remedy=Remedy(
                summary="`open` opens the page of a running service.",
                next_action="Start it with `loopx-chat serve` (or `loopx-chat launchagent "
                "start` on macOS), then run `loopx-chat open` again.",
            ),
        )
    url = login_url(runtime.port, secret)
    if print_only:
        click.echo(url)
        return
    if click.launch(url) != 0:
        raise UsageError(
            "could not start a browser (no `open` or `xdg-open` that worked)",
            error_code="browser_unavailable",
            remedy=Remedy(
                summary="The page is running; only the browser could not be started.",
                next_action="Run `loopx-chat open --print` and open that URL yourself.",
            ),
        )
    click.echo(f"opened the page of the service on port {runtime.port}", err=True)

"""`loopx-chat open`: sign the owner's browser in to the running service and open its page.

It asks the service, over the owner's Unix socket, for a one-time code (single use, a few
minutes long), writes a 0600 HTML file in the 0700 state dir that sends the browser to
`/login#code=...`, and hands the browser that file: the only word on any command line is the
file's path, which grants nothing to a user who cannot read the state dir (as Jupyter's
`open` does). The code is in the URL's fragment, which a browser never sends to a server, and
the page spends it at once for a key of its own. `--print` prints the URL instead (to the
owner's terminal: the code is spent by the first browser that uses it).
"""

from __future__ import annotations

from html import escape

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.errors import Remedy, UsageError

REDIRECT_FILE = "open.html"


def _not_running() -> UsageError:
    return UsageError(
        "no loopx-chat service is running for this state dir",
        error_code="service_not_running",
        remedy=Remedy(
            summary="`open` signs your browser in to a running service.",
            next_action="Start it with `loopx-chat serve` (or `loopx-chat service start`), "
            "then run `loopx-chat open` again.",
        ),
    )


def sign_in_url(
    cli: CliContext, name: str | None, *, full: bool = True, public: bool = False
) -> str:
    """A one-time sign-in URL from the running service of this state dir, asked over the
    owner's socket (whose peer proves it runs as this user; whatever home it serves).
    `public`: on the service's `--public-url` when it has one (a phone), else loopback; a
    loopback sign-in (`open`) is the desk's browser, which may show pairing codes."""
    from loopx_chat.service.client import TRANSPORT_ERRORS, ServiceClient
    from loopx_chat.state.service_runtime import read_runtime

    runtime = read_runtime(cli.state_dir, check_process=False)
    if runtime is None:
        raise _not_running()
    client = ServiceClient(runtime, cli.state_dir)
    try:
        doc = client.login_code(name, full=full, desk=not public)
    except TRANSPORT_ERRORS:
        raise _not_running() from None
    from loopx_chat.service.device_auth import login_url

    base = doc.get("public_url") if public else None
    return login_url(base or runtime.base_url, doc["code"])


@click.command("open")
@click.option("--print", "print_only", is_flag=True, help="Print the sign-in URL; open nothing.")
@click.option("--name", default=None, help="What `loopx-chat devices` calls this browser.")
@click.pass_obj
def open_page(cli: CliContext, print_only: bool, name: str | None) -> None:
    """Sign your browser in to the running service (a one-time code) and open its page."""
    url = sign_in_url(cli, name)
    if print_only:
        click.echo(url)
        return
    from loopx_chat.state.private_files import PRIVATE_FILE_MODE, atomic_write_bytes

    target = escape(url, quote=True)
    page = (
        '<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0;url={target}">'
        '<meta name="referrer" content="no-referrer"><title>loopx-chat</title></head>'
        f'<body><a href="{target}">Open loopx-chat</a></body></html>\n'
    )
    path = cli.state_dir / REDIRECT_FILE
    atomic_write_bytes(path, page.encode(), mode=PRIVATE_FILE_MODE)
    if click.launch(path.as_uri()) != 0:
        raise UsageError(
            "could not start a browser (no `open` or `xdg-open` that worked)",
            error_code="browser_unavailable",
            remedy=Remedy(
                summary="The page is running; only the browser could not be started.",
                next_action="Run `loopx-chat open --print` and open that URL yourself.",
            ),
        )
    click.echo("opened a one-time sign-in page in your browser", err=True)

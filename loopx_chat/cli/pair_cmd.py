"""`loopx-chat pair`: pair a phone (or any other browser) with the running service.

It asks the service, over the owner's Unix socket, for a one-time sign-in code (single use,
5 minutes, redemption guesses rate-limited: service/device_auth.py) and prints, in the
owner's terminal only, a QR code of `<public URL or loopback>/login#code=...` with the URL
beside it. The phone's camera opens the URL; its page spends the code at once for a key of
its own (a non-extractable WebCrypto key), listed by `loopx-chat devices` and revoked by
`devices revoke NAME`. Without `--full` the device may read the cards, decide gates and
Codex's requests, hold and pause goals, and nothing else (`device_not_full`).

The code is never put on any command line, in a log or in a file other than the one the
owner asks for with `--png` (written 0600). The QR code is drawn by service/pairing_qr.py,
the one encoder the desk's page ("Pair a phone") uses too.
"""

from __future__ import annotations

from pathlib import Path

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.cli.open_cmd import sign_in_url


def write_png(url: str, path: Path) -> None:
    """The same QR code as a PNG, 0600 (it carries the one-time code)."""
    from loopx_chat.service.pairing_qr import qr_png
    from loopx_chat.state.private_files import PRIVATE_FILE_MODE, atomic_write_bytes

    atomic_write_bytes(path, qr_png(url), mode=PRIVATE_FILE_MODE)


@click.command("pair")
@click.option("--name", default=None, help="What `loopx-chat devices` calls this device.")
@click.option(
    "--full",
    is_flag=True,
    help="The device may also start chat turns and runs (default: decide, hold, pause only).",
)
@click.option(
    "--png",
    "png",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the QR code as a PNG file (0600) to this path.",
)
@click.pass_obj
def pair(cli: CliContext, name: str | None, full: bool, png: Path | None) -> None:
    """Pair a phone or another device: a one-time QR code for its browser."""
    if name is not None:
        from loopx_chat.state.devices import valid_name

        valid_name(name)  # invalid_device_name before a code is made
    from loopx_chat.service.pairing_qr import qr_text

    url = sign_in_url(cli, name, full=full, public=True)
    click.echo(qr_text(url), nl=False)
    click.echo(url)
    scope = "full: it may start turns and runs" if full else "it may decide, hold and pause"
    click.echo(
        f"Scan it with the device's camera within 5 minutes; it works once ({scope}). "
        "`loopx-chat devices` lists it, `loopx-chat devices revoke NAME` locks it out.",
        err=True,
    )
    if png is not None:
        write_png(url, png)

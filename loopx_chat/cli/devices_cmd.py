"""`loopx-chat devices`: the browsers and devices signed in to the service; revoke one.

Reads and writes `devices.json` in the state dir directly (no service needed): the running
service re-reads it on the next request, so a revoked device is refused at once and its open
streams end. It never prints a device's key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from loopx_chat.cli.context import CliContext, emit_ok

if TYPE_CHECKING:
    from loopx_chat.state.devices import Device


@click.group("devices", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@click.option("--all", "show_all", is_flag=True, help="Revoked devices too.")
@click.pass_context
def devices(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """The browsers and devices signed in to the service; `devices revoke NAME`."""
    if ctx.invoked_subcommand is not None:
        return
    from loopx_chat.state.devices import load

    cli: CliContext = ctx.obj
    found = [d for d in load(cli.state_dir) if show_all or d.active]

    def line(d: Device) -> str:
        state = f"revoked {d.revoked_at}" if d.revoked_at else f"last seen {d.last_seen or '-'}"
        scope = ("full" if d.full else "decide only") + (", at the machine" if d.desk else "")
        return f"{d.name:<20} added {d.created_at}  {state}  ({scope})"

    emit_ok(
        {"devices": [d.public() for d in found]},
        as_json,
        (line(d) for d in found),
        empty="no devices are signed in; `loopx-chat open` signs this browser in",
    )


@devices.command("revoke")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@click.pass_obj
def revoke(cli: CliContext, name: str, as_json: bool) -> None:
    """Revoke a device (by name or id): it is refused from its next request on."""
    from loopx_chat.state.devices import revoke as revoke_device
    from loopx_chat.state.session_store import utc_now

    device = revoke_device(cli.state_dir, name, utc_now())
    emit_ok(
        {"device": device.public()},
        as_json,
        [f"revoked {device.name}: it is refused from its next request on"],
    )

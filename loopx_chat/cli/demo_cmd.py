"""`loopx-chat demo`: the offline walkthrough `make demo` runs."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from loopx_chat.cli.context import CliContext, renders_errors
from loopx_chat.store import SessionStore


@click.command()
@click.pass_obj
@renders_errors
def demo(cli: CliContext) -> None:
    """Show the home this process binds to and the (empty) session list in a temp state dir."""
    binding = cli.binding()
    click.echo(f"1. codex home bound at startup: {binding.path} (from {binding.source})")
    click.echo(f"   sqlite home: {binding.sqlite_home} (from {binding.sqlite_source})")
    with tempfile.TemporaryDirectory(prefix="loopx-chat-demo-") as tmp:
        listing = SessionStore(Path(tmp) / "state").list()
        click.echo(f"2. sessions in a fresh owner-local state dir: {len(listing.sessions)}")

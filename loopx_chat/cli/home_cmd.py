"""`loopx-chat home`: show the Codex home this process would bind to."""

from __future__ import annotations

import click

from loopx_chat.cli.context import CliContext, emit_json, json_option, renders_errors


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
@renders_errors
def home(ctx: click.Context, as_json: bool) -> None:
    """Show the Codex home binding (path, source, sqlite home) and whether it exists."""
    if ctx.invoked_subcommand is not None:
        return
    cli: CliContext = ctx.obj
    binding = cli.binding()
    report = {
        "ok": True,
        **binding.to_dict(),
        "exists": binding.path.is_dir(),
        "sqlite_home_exists": binding.sqlite_home.is_dir(),
        "state_dir": str(cli.state_dir),
    }
    if as_json:
        emit_json(report)
        return
    click.echo(f"codex home:   {binding.path}  (from {binding.source})")
    click.echo(f"exists:       {'yes' if report['exists'] else 'no'}")
    click.echo(f"sqlite home:  {binding.sqlite_home}  (from {binding.sqlite_source})")
    if binding.config_error:
        click.echo(f"config:       {binding.config_error}")
    click.echo(f"state dir:    {cli.state_dir}")

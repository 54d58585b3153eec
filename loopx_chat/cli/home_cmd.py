"""`loopx-chat home [check|users|exclusive]`: the bound Codex home and who uses it."""

from __future__ import annotations

import sys

import click

from loopx_chat.cli.context import CliContext, emit_json, json_option
from loopx_chat.controller.home_ownership import (
    SIGN_IN_NEXT,
    AppServerRegistry,
    find_home_users,
    home_check,
    run_exclusive,
)
from loopx_chat.visible_text import ControlMode, visible_text


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
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


@home.command("check")
@json_option
@click.pass_obj
def home_check_cmd(cli: CliContext, as_json: bool) -> None:
    """Ordinary open: the home, its config and sign-in, and the codex it will run.

    Read-only on the home (safe while others use it). The codex is checked for being found
    and runnable, its version against the tested range, and every protocol method loopx-chat
    uses in its own schema; the verdict is cached per binary in the state dir.
    """
    from loopx_chat.codex.compat import TESTED_RANGE, features_lost
    from loopx_chat.codex.compat_probe import check_codex, summary_line
    from loopx_chat.errors import spec_for

    report = home_check(cli.binding(), cli.environ)
    codex = check_codex(cli.codex_bin, cli.environ, cli.state_dir)
    codes = ([codex.error_code] if codex.error_code else []) + [p.code for p in report.issues]
    warnings = [*report.warnings, *codex.warnings]
    if as_json:
        emit_json(
            {
                **report.to_dict(),
                "ok": not codes,
                "error_code": codes[0] if codes else None,
                "problem_codes": codes,
                "problems": [*([codex.error] if codex.error else []), *report.problems],
                "warnings": warnings,
                "codex": codex.to_dict(),
            }
        )
    else:
        click.echo(f"codex home:  {report.path} (from {report.source})")
        click.echo(f"sqlite home: {report.sqlite_home} (from {report.sqlite_source})")
        click.echo(
            "config.toml: "
            + (
                "absent"
                if not report.config_present
                else "parses"
                if report.config_parses
                else "BROKEN"
            )
        )
        if report.sign_in is not None:
            s = report.sign_in
            state = (
                "not needed"
                if not s.needed
                else "yes"
                if s.signed_in
                else "unknown"
                if s.signed_in is None
                else "NO"
            )
            # The provider and an env_key's name come from the owner's config.toml.
            line = f"sign-in:     {state} (provider {s.provider}: {s.how})"
            click.echo(visible_text(line, ControlMode.ESCAPES))
        click.echo(f"codex:       {summary_line(codex)}")
        click.echo(
            f"tested on:   codex {TESTED_RANGE.oldest} to {TESTED_RANGE.newest} "
            f"(checked {TESTED_RANGE.checked_on})"
        )
        for warning in warnings:
            click.echo(f"warning: {warning}")
        for problem in report.issues:
            click.echo(f"problem [{problem.code}]: {problem.message}")
            if problem.code == "codex_not_signed_in":
                click.echo(f"  next: {SIGN_IN_NEXT}")
        if codex.error_code:
            click.echo(f"problem [{codex.error_code}]: {codex.error}")
            if codex.missing:
                click.echo(f"  not working: {', '.join(features_lost(codex.missing))}")
            if codex.remedy:
                click.echo(f"  next: {codex.remedy.next_action}")
        click.echo("ok" if not codes else "not ok")
    if codes:
        sys.exit(spec_for(codes[0]).exit_code)


@home.command("users")
@json_option
@click.pass_obj
def home_users_cmd(cli: CliContext, as_json: bool) -> None:
    """Who uses this home: our app-servers, holders of its files, processes naming it."""
    users = find_home_users(cli.binding(), AppServerRegistry(cli.state_dir))
    if as_json:
        emit_json({"ok": True, "users": [u.to_dict() for u in users]})
        return
    if not users:
        click.echo("nobody is using this Codex home")
    for user in users:
        click.echo(f"pid {user.pid}  {user.command}  [{user.kind}] {user.detail}")


@home.command(
    "exclusive", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the home's other users to go.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.pass_obj
def home_exclusive_cmd(cli: CliContext, wait: float, command: tuple[str, ...]) -> None:
    """Run COMMAND (after --) with the home to itself: e.g. `codex login`, a migration.

    Holds this state dir's lock for the home (no loopx-chat app-server starts meanwhile), asks
    loopx-chat's own idle app-servers to close, never signals other programs, and refuses with
    home_in_use while anyone still uses the home. COMMAND's exit code is passed through.
    """
    code = run_exclusive(
        cli.binding(), cli.state_dir, list(command), wait=wait, environ=cli.environ
    )
    sys.exit(code)

"""`loopx-chat sessions list|show`: read owner-local session state without changing it."""

from __future__ import annotations

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    json_option,
    nothing_found,
)
from loopx_chat.state.session_records import validate_session_id


@click.group()
def sessions() -> None:
    """Inspect owner-local chat sessions."""


@sessions.command("list")
@json_option
@click.pass_obj
def list_sessions(cli: CliContext, as_json: bool) -> None:
    """List every session; unreadable ones are reported, never fatal."""
    listing = cli.store().list()
    if as_json:
        emit_json(
            {
                "ok": True,
                "sessions": [s.public_dict() for s in listing.sessions],
                "problems": [p.to_dict() for p in listing.problems],
            }
        )
        return
    if not listing.sessions and not listing.problems:
        click.echo(nothing_found("sessions"))
        return
    for s in listing.sessions:
        thread = s.upstream_thread_id or "-"
        click.echo(
            f"{s.session_id}  goal={s.goal_id}  status={s.status}  mode={s.session_mode}  "
            f"thread={thread}  turns={s.turn_count}  updated={s.updated_at}"
        )
    for p in listing.problems:
        click.echo(f"{p.session_id}  UNREADABLE [{p.error_code}]: {p.message}", err=True)


@sessions.command("show")
@click.argument("session_id")
@json_option
@click.pass_obj
def show_session(cli: CliContext, session_id: str, as_json: bool) -> None:
    """Show one session and its compact turns."""
    store = cli.store()
    record = store.load(validate_session_id(session_id))
    turns = store.list_turns(session_id)
    if as_json:
        emit_json(
            {
                "ok": True,
                "session": record.public_dict(),
                "turns": [t.to_dict() for t in turns],
            }
        )
        return
    for key, value in record.public_dict().items():
        click.echo(f"{key}: {value}")
    for t in turns:
        click.echo(
            f"turn {t.turn_id}: {t.status}"
            + (f" [{t.error_code}]" if t.error_code else "")
            + f" tokens={t.tokens.total_tokens}"
        )

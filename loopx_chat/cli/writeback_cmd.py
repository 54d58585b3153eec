"""`loopx-chat writeback preview|apply|revert|list`: controlled writeback onto the thread goal.

SOURCE_ID names the recorded decision and so its write class: `gate-…` (operator gate),
`handoff-…` (handoff packet), `reward-…` (human reward), `quota-…` (a recorded quota
decision) or a turn id of the goal (artifact pointer). The Codex thread goal represents only
gates and handoffs; the others are recorded as `skipped` (`unsupported_class`), never faked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    json_option,
    nothing_found,
)
from loopx_chat.cli.controller_scope import command_controller
from loopx_chat.cli.options import known_goal
from loopx_chat.controller.host_writeback import WritebackService
from loopx_chat.goals.gate_store import GateStore, validate_goal_id
from loopx_chat.state.jsonl import read_records

F = TypeVar("F", bound=Callable[..., Any])


def _show(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(
            {"ok": doc.get("status") in ("applied", "skipped", "previewed", "reverted"), **doc}
        )
        return
    click.echo(
        f"{doc.get('status')}"
        + (f" ({doc['reason_code']})" if doc.get("reason_code") else "")
        + (f" key={doc['idempotency_key']}" if doc.get("idempotency_key") else "")
    )
    if doc.get("blocker"):
        click.echo(f"blocker: {doc['blocker']}")
    for side in ("host_before", "host_after", "prior", "applied"):
        if side in doc:
            click.echo(f"{side}: {doc[side]}")


def _source_options(func: F) -> F:
    """`--goal` and `--session`: where the gate or handoff to write comes from and goes."""
    func = click.option(
        "--session",
        "session_id",
        default=None,
        help="Session whose thread to write (default: the goal's latest session).",
    )(func)
    return click.option("--goal", "goal_id", required=True, help="Goal the source belongs to.")(
        func
    )


@click.group()
def writeback() -> None:
    """Write compact loopx decisions back to the Codex thread goal.

    Gates and handoffs change the goal; rewards, quota decisions and turns (artifact
    pointers) are recorded as skipped (unsupported_class): the goal cannot represent them."""


@writeback.command("preview")
@click.argument("source_id")
@_source_options
@json_option
@click.pass_context
def preview(
    ctx: click.Context, source_id: str, goal_id: str, session_id: str | None, as_json: bool
) -> None:
    """Dry run: what applying SOURCE_ID would change. Writes nothing, starts nothing.

    SOURCE_ID: gate-…, handoff-…, reward-…, quota-… or a turn id of the goal."""
    cli: CliContext = ctx.obj
    with command_controller(ctx) as controller:
        service = WritebackService(controller, GateStore(cli.state_dir))
        doc = service.preview(validate_goal_id(goal_id), source_id, session_id)
    plan = doc.pop("plan", {})
    doc["idempotency_key"] = plan.get("writeback", {}).get("idempotency_key")
    doc["write_class"] = plan.get("writeback", {}).get("write_class")
    doc["payload"] = plan.get("writeback", {}).get("payload")  # compact, checked: what is sent
    _show(doc, as_json)


@writeback.command("apply")
@click.argument("source_id")
@_source_options
@json_option
@click.pass_context
def apply(
    ctx: click.Context, source_id: str, goal_id: str, session_id: str | None, as_json: bool
) -> None:
    """Apply SOURCE_ID to the host; idempotent, reversible, result appended to the goal's log."""
    cli: CliContext = ctx.obj
    with command_controller(ctx) as controller:
        doc = WritebackService(controller, GateStore(cli.state_dir)).apply(
            validate_goal_id(goal_id), source_id, session_id
        )
    _show(doc, as_json)
    if doc.get("status") in ("rejected", "failed"):
        raise SystemExit(1)


@writeback.command("revert")
@click.argument("idempotency_key")
@click.option("--goal", "goal_id", required=True, help="Goal the write belongs to.")
@json_option
@click.pass_context
def revert(ctx: click.Context, idempotency_key: str, goal_id: str, as_json: bool) -> None:
    """Restore the host goal exactly as it was before the write IDEMPOTENCY_KEY."""
    cli: CliContext = ctx.obj
    with command_controller(ctx) as controller:
        doc = WritebackService(controller, GateStore(cli.state_dir)).revert(
            validate_goal_id(goal_id), idempotency_key
        )
    _show(doc, as_json)
    if doc.get("status") == "failed":
        raise SystemExit(1)


@writeback.command("list")
@click.option("--goal", "goal_id", required=True, help="Goal whose writebacks to list.")
@json_option
@click.pass_context
def list_cmd(ctx: click.Context, goal_id: str, as_json: bool) -> None:
    """The goal's writeback results, oldest first."""
    cli: CliContext = ctx.obj
    entries = read_records(
        GateStore(cli.state_dir).goal_dir(known_goal(cli, goal_id)) / "writebacks.jsonl"
    )
    if as_json:
        emit_json({"ok": True, "writebacks": entries})
        return
    if not entries:
        click.echo(nothing_found("writebacks", goal_id))
    for e in entries:
        click.echo(
            f"{e.get('at')}  {e.get('status'):8}  {e.get('write_class')}  "
            f"{e.get('idempotency_key')}"
        )

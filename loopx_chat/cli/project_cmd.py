"""`loopx-chat project`: compact session facts (JSON in) projected into the first screen.

Read-only: it reads one JSON document and prints; it writes nothing."""

from __future__ import annotations

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    read_json_input,
)
from loopx_chat.errors import UsageError

GROUPS = ("sessions", "events", "outcomes", "gates", "artifacts", "decision_results")


@click.command("project")
@click.option(
    "--input", "source", required=True, help="JSON file of compact facts, or - for stdin."
)
@click.option("--goal", "goal_id", default=None, help="Goal id (default: the input's goal_id).")
@click.option("--compact", is_flag=True, help="Print the compact, public-safe form.")
@click.pass_obj
def project(cli: CliContext, source: str, goal_id: str | None, compact: bool) -> None:
    """Project compact session facts (JSON in) into the first screen (JSON out)."""
    from loopx_chat.session_runtime import (
        build_session_runtime_readonly_projection,
        compact_session_runtime_readonly_projection,
    )

    doc = read_json_input(source, "input")
    if not isinstance(doc, dict):
        raise UsageError(
            'input must be a JSON object like {"goal_id": ..., "sessions": [...], ...}',
            error_code="input_invalid",
        )
    groups = {name: doc.get(name) for name in GROUPS}
    projection = build_session_runtime_readonly_projection(
        goal_id=goal_id or doc.get("goal_id") or "goal", **groups
    )
    emit_json(compact_session_runtime_readonly_projection(projection) if compact else projection)

"""`loopx-chat metrics`: the six goal-control metrics over the control-event log.

Read-only; the rules are `goals/metrics.py`."""

from __future__ import annotations

import click

from loopx_chat.cli.context import (
    CliContext,
    emit_json,
    json_option,
)
from loopx_chat.cli.options import known_goal


@click.command("metrics")
@click.option("--goal", "goal_id", default=None, help="Only this goal (default: every goal).")
@json_option
@click.pass_obj
def metrics(cli: CliContext, goal_id: str | None, as_json: bool) -> None:
    """The six goal-control metrics, each with its numerator and denominator."""
    store = cli.gate_store()
    if goal_id:
        known_goal(cli, goal_id)
    from loopx_chat.goals.metrics import compute_metrics

    doc = {"ok": True, **compute_metrics(store.control.events(), goal_id)}
    if as_json:
        emit_json(doc)
        return
    click.echo(f"goal-control metrics{' for ' + goal_id if goal_id else ''}")
    for name, value in doc.items():
        if not isinstance(value, dict):
            continue
        if "numerator" in value:
            ratio = "n/a" if value["ratio"] is None else f"{value['ratio']:.2%}"
            extras = ", ".join(
                f"{k}={v}"
                for k, v in value.items()
                if k not in ("numerator", "denominator", "ratio")
            )
            click.echo(
                f"  {name}: {value['numerator']}/{value['denominator']} ({ratio})"
                + (f"  [{extras}]" if extras else "")
            )
        else:
            click.echo(f"  {name}: " + ", ".join(f"{k}={v}" for k, v in value.items()))

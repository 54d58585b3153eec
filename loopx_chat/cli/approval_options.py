"""`--approval` and `--plan`: what Codex may ask its owner, on `chat new|send` and `serve`.

Owns the options and where their values go: into the command's controller config
(`CliContext.controller_config`, read by `controller_scope.command_controller`) for chat
commands, marked as given so they win over the goal's goal_state, or handed to the callback
for `serve` (whose values are only the default under a goal's own). Only
`codex.turn_defaults` is loaded to show them. It never decides anything about a request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from loopx_chat.cli.options import POSITIVE_SECONDS
from loopx_chat.codex import turn_defaults
from loopx_chat.codex.turn_defaults import APPROVAL_POLICIES, DECISION_TIMEOUT_SEC

APPROVAL_HELP = (
    "When Codex asks you before it acts: never (the default: it never asks), on-request "
    "(only when it wants more than the sandbox allows), untrusted (before every command not "
    "known to be safe)."
)
PLAN_HELP = "Run turns in Codex's Plan mode, the only mode in which it may ask you a question."


def policy_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--approval`, `--plan` and `--decision-timeout` to a command; the callback gets
    `approval`, `plan` and `decision_timeout`."""
    func = click.option(
        "--decision-timeout",
        type=POSITIVE_SECONDS,
        default=DECISION_TIMEOUT_SEC,
        show_default=True,
        help="Seconds an approval or question waits for you; then Codex is told you have not "
        "answered yet (a question's answer says so; an approval is declined, with the note "
        "added to the turn) and the gate stays open.",
    )(func)
    func = click.option("--plan", is_flag=True, default=False, help=PLAN_HELP)(func)
    return click.option(
        "--approval",
        type=click.Choice(APPROVAL_POLICIES),
        default=turn_defaults.APPROVAL,
        show_default=True,
        help=APPROVAL_HELP,
    )(func)


def chat_policy_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """`policy_options` for a chat subcommand: a value given goes with the turn (into the
    command's controller config, and into the request when the service runs it)."""

    @functools.wraps(func)
    def wrapper(
        *args: Any, approval: str, plan: bool, decision_timeout: float, **kwargs: Any
    ) -> Any:
        from loopx_chat.cli.delegation import given_turn_options

        ctx = click.get_current_context()
        # The turn's own policy: sent with the turn to the service, or on this command's
        # controller config when it runs here.
        values = {"approval": approval, "plan": plan, "decision_timeout": decision_timeout}
        given = given_turn_options(ctx, values)
        if given:
            from loopx_chat.controller.chat_controller import DEFAULT_CONFIG

            config = ctx.obj.controller_config or DEFAULT_CONFIG
            # A flag given wins over the goal's goal_state; one left out is only the default
            # (`controller.turn_policy`).
            own = {"approval": "approval_policy", "plan": "plan"}
            ctx.obj = replace(
                ctx.obj,
                controller_config=replace(
                    config,
                    options=replace(config.options, approval_policy=approval, plan=plan),
                    decision_timeout=decision_timeout,
                    policy_given=frozenset(own[name] for name in given if name in own),
                ),
            )
        return func(*args, **kwargs)

    return policy_options(wrapper)

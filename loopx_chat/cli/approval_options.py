"""`--approval` and `--plan`: what Codex may ask its owner, on `chat new|send` and `serve`.

Owns the two options and where their values go: into the command's `chat_options` (read by
`controller_scope.command_controller`) for chat commands, or handed to the callback for
`serve`. It never decides anything about a request itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from loopx_chat.codex.thread import APPROVAL_POLICIES

APPROVAL_HELP = (
    "When Codex asks you before it acts: never (the default: it never asks), on-request "
    "(only when it wants more than the sandbox allows), untrusted (before every command not "
    "known to be safe)."
)
PLAN_HELP = "Run turns in Codex's Plan mode, the only mode in which it may ask you a question."


def policy_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--approval` and `--plan` to a command; the callback gets `approval` and `plan`."""
    func = click.option("--plan", is_flag=True, default=False, help=PLAN_HELP)(func)
    return click.option(
        "--approval",
        type=click.Choice(APPROVAL_POLICIES),
        default="never",
        show_default=True,
        help=APPROVAL_HELP,
    )(func)


def chat_policy_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """`policy_options` for a chat subcommand: the values go into `chat_options`."""

    @functools.wraps(func)
    def wrapper(*args: Any, approval: str, plan: bool, **kwargs: Any) -> Any:
        meta = click.get_current_context().meta
        meta.setdefault("chat_options", {}).update(approval=approval, plan=plan)
        return func(*args, **kwargs)

    return policy_options(wrapper)

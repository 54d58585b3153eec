"""The top-level command group: command names and one-line help up front, modules on use.

Owns `COMMANDS` (name -> module, attribute, one-line help) and the group that loads a
command's module only when that command runs, so `loopx-chat --version` or `--help` pays for
click alone and never imports the service, the LaunchAgent installer, the projection core,
psutil or the demo's mock server. It is also the one error boundary of the command line:
any failure, in a command or around it, becomes a message or one JSON document and an exit
code (`render_failure`), never a Python traceback. It must never import a command module eagerly.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

import click

# name -> (module, attribute, the command's one-line help: a test keeps them equal)
COMMANDS: Mapping[str, tuple[str, str, str]] = {
    "chat": (
        "chat_cmd",
        "chat",
        "Open, resume and drive Codex threads through `codex app-server`.",
    ),
    "codex": ("codex_cmd", "codex", "Read-only views of the Codex host."),
    "demo": (
        "demo_cmd",
        "demo",
        "Open a session, stream a reply, resume from a new process, refuse another home.",
    ),
    "dream": (
        "dream_cmd",
        "dream",
        "dreaming_proposal: advisory exploration ideas; nothing happens until promoted.",
    ),
    "gate": (
        "gate_cmd",
        "gate",
        "Owner gates: questions a person must decide before the agent continues.",
    ),
    "goal": (
        "goal_cmd",
        "goal",
        "goal_state: objective, non-goals, authority sources, current boundary.",
    ),
    "handoff": (
        "handoff_cmd",
        "handoff",
        "Handoff packets: the approved next action for the agent, with a stop condition.",
    ),
    "home": (
        "home_cmd",
        "home",
        "Show the Codex home binding (path, source, sqlite home) and whether it exists.",
    ),
    "launchagent": (
        "launchagent_cmd",
        "launchagent",
        "Manage the macOS LaunchAgent that keeps `loopx-chat serve` running.",
    ),
    "metrics": (
        "metrics_cmd",
        "metrics",
        "The six goal-control metrics, each with its numerator and denominator.",
    ),
    "mock": (
        "mock_cmd",
        "mock",
        "The loopback mock of the model API, scriptable from a file: try codex offline.",
    ),
    "open": (
        "open_cmd",
        "open_page",
        "Open the running service's page in your browser, logged in as its owner.",
    ),
    "project": (
        "project_cmd",
        "project",
        "Project compact session facts (JSON in) into the first screen (JSON out).",
    ),
    "quota": (
        "quota_cmd",
        "quota",
        "Should each goal spend its next automatic turn? A scheduler hint; it starts nothing.",
    ),
    "reward": (
        "reward_cmd",
        "reward",
        "human_reward: a person's judgment on a run, separate from any automated score.",
    ),
    "serve": (
        "serve_cmd",
        "serve",
        "Serve the chat API, /status.json and the first-screen page on loopback, to the owner "
        "only (everything but /healthz needs the secret in the state dir).",
    ),
    "sessions": ("sessions_cmd", "sessions", "Inspect owner-local chat sessions."),
    "status": (
        "status_cmd",
        "status",
        "For each goal: who it waits on, can the agent continue, what gate, what last ran.",
    ),
    "writeback": (
        "writeback_cmd",
        "writeback",
        "Write compact loopx decisions back to the Codex thread goal.",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they run (or when their help is asked for)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, attribute, _ = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"loopx_chat.cli.{module}"), attribute)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The one-line help comes from the table, so `--help` imports no command module.
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        # Before a command has parsed its options (a failure in a group's own callback), the
        # words on the command line are all there is to go by.
        in_args = "--json" in (*getattr(ctx, "_protected_args", ()), *ctx.args)
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            from loopx_chat.cli.context import JSON_REQUESTED, render_failure

            sys.exit(render_failure(exc, bool(ctx.meta.get(JSON_REQUESTED, in_args))))

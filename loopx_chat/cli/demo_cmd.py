"""`loopx-chat demo`: the offline walkthrough `make demo` runs.

Everything happens in a temporary folder: a Codex home pointed at the loopback mock of the
Responses API shipped in this package, an owner-local state dir, the real codex app-server.
Each step says in plain words what it proved. `--tour` is the hands-on variant
(`tour_run`): the same offline setup, left running for a person to type into.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import click

from loopx_chat.cli.context import CliContext
from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.errors import UsageError
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore


def _say(step: str, text: str, *, nl: bool = True) -> None:
    click.secho(f"\n== {step}", bold=True)
    click.echo(text, nl=nl)


def _cli(args: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix == ".json"):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@click.command()
@click.option(
    "--tour",
    is_flag=True,
    help="Instead: start the mock model in a throwaway folder and print the steps to try "
    "goals, runs, a gate, an approval and the page yourself (until Ctrl-C).",
)
@click.option("--keep", is_flag=True, help="With --tour: leave the throwaway folder.")
@click.pass_obj
def demo(cli: CliContext, tour: bool, keep: bool) -> None:
    """Open a session, stream a reply, resume from a new process, refuse another home."""
    if tour:
        from loopx_chat.cli.tour_run import run_tour

        run_tour(cli, keep)
        return
    if keep:
        raise UsageError("--keep goes with --tour", error_code="usage_error")
    with (
        tempfile.TemporaryDirectory(prefix="loopx-chat-demo-") as tmp,
        MockResponsesServer() as mock,
    ):
        root = Path(tmp)
        home_a, home_b, state = root / "codex-home-a", root / "codex-home-b", root / "state"
        write_offline_codex_config(home_a, mock.base_url)
        write_offline_codex_config(home_b, mock.base_url)
        env = {k: v for k, v in cli.environ.items() if k != "CODEX_HOME"}
        env_a = {**env, "LOOPX_CHAT_CODEX_HOME": str(home_a)}
        base = ["--state-dir", str(state)] + (
            ["--codex-bin", cli.codex_bin] if cli.codex_bin else []
        )

        _say(
            "1. Pin a Codex home",
            f"A temporary Codex home talks to a loopback mock model at {mock.base_url}.\n"
            "The controller resolves LOOPX_CHAT_CODEX_HOME once, at startup.",
        )
        controller = ChatController(
            store=SessionStore(state), environ=env_a, cwd=root, codex_bin=cli.codex_bin
        )
        with controller:
            record = controller.open_session("demo-goal", root)
            click.echo(
                f"Session {record.session_id} opened on thread {record.upstream_thread_id}; "
                f"its state records the home it belongs to."
            )
            _say("2. Stream a reply from the real codex app-server", "agent> ", nl=False)
            result = controller.submit_turn(
                record.session_id,
                "Hello from the loopx-chat demo.",
                on_delta=lambda d: click.echo(d, nl=False),
            )
            click.echo(
                f"\nTurn {result.turn.status} ({result.turn.tokens.total_tokens} tokens). "
                "State kept ids, status and token counts only, no text."
            )
        rollouts = sorted((home_a / "sessions").rglob("rollout-*.jsonl"))
        click.echo(f"Codex wrote its rollout under the pinned home: {len(rollouts)} file(s).")

        _say(
            "3. Resume the thread from a new process",
            "A second `loopx-chat chat send` process resumes the same thread by id.",
        )
        second = _cli(
            [*base, "chat", "send", record.session_id, "--json", "What did I say?"], env_a
        )
        doc = json.loads(second.stdout) if second.stdout.strip() else {}
        if second.returncode != 0:
            click.echo(second.stdout + second.stderr)
            raise SystemExit("demo: the resumed turn failed")
        click.echo(
            f"Second turn {doc['turn']['status']} on thread {doc['thread_id']}; the mock saw "
            f"{len([t for t in mock.requests[-1]['user_texts'] if not t.startswith('<')])} user "
            "messages in its context, so the first turn was there."
        )

        _say(
            "4. Refuse a session from another home",
            "Now a controller starts with a different LOOPX_CHAT_CODEX_HOME and tries to submit.",
        )
        before = _digest(state / "sessions" / record.session_id)
        refused = _cli(
            [*base, "chat", "send", record.session_id, "--json", "this must not run"],
            {**env, "LOOPX_CHAT_CODEX_HOME": str(home_b)},
        )
        err = json.loads(refused.stdout)
        after = _digest(state / "sessions" / record.session_id)
        click.echo(f"exit code {refused.returncode}, error_code {err['error_code']}:")
        click.echo(f"  {err['error']}")
        click.echo(
            f"Session state digest before {before}, after {after}: "
            f"{'unchanged' if before == after else 'CHANGED'}; home B has "
            f"{len(list((home_b / 'sessions').rglob('*.jsonl')))} rollouts (nothing was spawned "
            "into it)."
        )
        if refused.returncode == 0 or before != after:
            raise SystemExit("demo: the mismatch was not refused cleanly")
        _say("Done", "The binding held: one home per session, checked before anything runs.")

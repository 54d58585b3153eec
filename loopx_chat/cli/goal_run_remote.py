"""`goal run` when the local service is up: the run goes to the service, this shell follows it.

Owns asking the owner's service of this state dir and home (`cli.delegation.service_for`)
to Run the goal (`POST /api/goals/G/run`, through its `ServiceClient`), following the run
from owner-local state (one progress line per turn the ledger records, exactly as the
foreground run prints them), Ctrl-C as Pause (`POST /api/goals/G/pause`, exit 130), and
the same exit codes. The service runs the same checks; a refusal comes back with its code
and is shown as the CLI shows any error.
It never follows codex itself and never writes state: the service does both.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from loopx_chat.service.client import ServiceClient

POLL_SEC = 0.25


def run_in_service(
    service: ServiceClient,
    state_dir: Path,
    goal_id: str,
    session_id: str | None,
    budget: int | None,
    as_json: bool,
    approval: str | None = None,
    plan_mode: bool = False,
) -> None:
    from loopx_chat.goals.goal_runs import EXIT_INTERRUPTED, exit_code_for
    from loopx_chat.state.session_store import SessionStore

    body: dict[str, Any] = {}
    if budget is not None:
        body["token_budget"] = budget
    if session_id is not None:
        body["session_id"] = session_id
    if approval is not None:
        body["approval"] = approval
    if plan_mode:
        body["plan"] = True
    run = service.goal_run("POST", goal_id, body)
    say = (lambda line: None) if as_json else (lambda line: click.echo(line, err=True))
    say(
        f"[loopx-chat] the local service runs goal {goal_id} (run {run['run_id']}); "
        "Ctrl-C pauses it"
    )
    store = SessionStore(state_dir)
    shown = 0
    started = time.monotonic()
    interrupted = False
    while True:
        try:
            time.sleep(POLL_SEC)
            turns = [
                t
                for t in store.list_turns(run["session_id"])
                if t.run_id == run["run_id"] and t.completed_at
            ]
            turns.sort(key=lambda t: str(t.completed_at))
            used = 0
            for n, turn in enumerate(turns, 1):
                used += turn.tokens.total_tokens
                if n > shown:
                    say(
                        f"[loopx-chat] turn {n} {turn.status}  {used:,} of "
                        f"{run['token_budget']:,} tokens  {time.monotonic() - started:.1f}s"
                    )
            shown = max(shown, len(turns))
            run = service.goal_run("GET", goal_id)
            if run["state"] in ("ended", "closed"):
                break
        except KeyboardInterrupt:
            if interrupted:
                break
            interrupted = True
            say("[loopx-chat] pausing: the running turn finishes, then the run ends")
            service.pause_goal(goal_id)
    code = EXIT_INTERRUPTED if interrupted else exit_code_for(run.get("host_status"))
    turns = [t for t in store.list_turns(run["session_id"]) if t.run_id == run["run_id"]]
    if as_json:
        doc = {
            "ok": code == 0,
            "run": run,
            "turns": len(turns),
            "ledger_tokens": sum(t.tokens.total_tokens for t in turns),
            "exit_code": code,
            "ran_in": "service",
        }
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        say(
            f"[loopx-chat] run {run['run_id']} ended: Codex goal {run.get('host_status')} "
            f"(exit {code})"
        )
    sys.exit(code)

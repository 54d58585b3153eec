"""`goal run` when the local service is up: the run goes to the service, this shell follows it.

Owns asking the service of this state dir to Run the goal (`POST /api/goals/G/run`, with the
owner's secret from the state dir), following the run from owner-local state (one progress
line per turn the ledger records, exactly as the foreground run prints them), Ctrl-C as
Pause (`POST /api/goals/G/pause`, exit 130), and the same exit codes. The service runs the
same checks; a refusal comes back with its code and is shown as the CLI shows any error.
It never follows codex itself and never writes state: the service does both.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from loopx_chat.errors import CodexError, LoopxChatError, Remedy

POLL_SEC = 0.25


class _Service:
    def __init__(self, port: int, secret: str) -> None:
        self.port = port
        self.secret = secret

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import http.client  # only when a service runs the goal

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {
            "Host": f"127.0.0.1:{self.port}",
            "Authorization": f"Bearer {self.secret}",
        }
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except OSError as exc:
            raise CodexError(
                f"the local service on port {self.port} did not answer "
                f"({exc.strerror or type(exc).__name__})",
                error_code="service_not_running",
                remedy=Remedy(
                    summary="The service this state dir names did not answer.",
                    next_action="Start it again (`loopx-chat serve`), or run the goal here: "
                    "`loopx-chat goal run GOAL --foreground`.",
                ),
            ) from None
        finally:
            conn.close()
        doc = json.loads(raw or b"{}")
        if not isinstance(doc, dict):
            raise LoopxChatError("the service answered something else than JSON")
        if not doc.get("ok", response.status < 300):
            gate = doc.get("gate")
            raise LoopxChatError(
                str(doc.get("error")),
                error_code=str(doc.get("error_code")),
                remedy=Remedy(**gate) if isinstance(gate, dict) else None,
            )
        return doc


def service_for(state_dir: Path) -> _Service | None:
    """The running service of this state dir, or None."""
    from loopx_chat.state.service_runtime import read_runtime, read_secret

    runtime = read_runtime(state_dir)
    secret = read_secret(state_dir) if runtime is not None else None
    if runtime is None or not secret:
        return None
    return _Service(runtime.port, secret)


def run_in_service(
    service: _Service,
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
    run = service.call("POST", f"/api/goals/{goal_id}/run", body)["run"]
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
            run = service.call("GET", f"/api/goals/{goal_id}/run")["run"]
            if run["state"] in ("ended", "closed"):
                break
        except KeyboardInterrupt:
            if interrupted:
                break
            interrupted = True
            say("[loopx-chat] pausing: the running turn finishes, then the run ends")
            service.call("POST", f"/api/goals/{goal_id}/pause", {})
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

"""`goal run` when the local service is up: the run goes to the service, this shell follows it.

Owns asking the owner's service of this state dir and home (`cli.delegation.service_for`)
to Run the goal (`POST /api/goals/G/run`, through its `ServiceClient`), then following it
as `goal follow` does (`cli.goal_follow`: the same lines, words, `--json` document and exit
code as a foreground run), Ctrl-C as Pause (`POST /api/goals/G/pause`, exit 130). The
service runs the same checks; a refusal comes back with its code and is shown as the CLI
shows any error.
It never follows codex itself and never writes state: the service does both.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from loopx_chat.service.client import ServiceClient


def run_in_service(
    service: ServiceClient,
    state_dir: Path,
    goal_id: str,
    session_id: str | None,
    budget: int | None,
    as_json: bool,
    approval: str | None = None,
    plan_mode: bool = False,
    codex_home: Path | None = None,
    max_turns: int | None = None,
    resume: bool | None = None,
) -> None:
    from loopx_chat.cli.goal_follow import RunFollower

    body: dict[str, Any] = {}
    if budget is not None:
        body["token_budget"] = budget
    if session_id is not None:
        body["session_id"] = session_id
    if approval is not None:
        body["approval"] = approval
    if plan_mode:
        body["plan"] = True
    if max_turns is not None:
        body["max_turns"] = max_turns
    if resume is not None:
        body["resume_after_usage_limit"] = resume
    run = service.goal_run("POST", goal_id, body)
    follower = RunFollower(state_dir, codex_home, goal_id, as_json=as_json, run_id=run["run_id"])
    banner = f"the local service runs goal {goal_id} (run {run['run_id']}); Ctrl-C pauses it"
    sys.exit(follower.follow(on_interrupt=lambda: service.pause_goal(goal_id), banner=banner))

"""The host goal of a goal loopx-chat ran, as the first screen shows it, read now.

Owns reading the thread goal with `thread/goal/get` through an app-server that loads no
thread (so an `active` goal cannot start codex's loop from a look), for goals with a run on
record or a loop loopx-chat saw and did not start; other goals spawn nothing. It never
writes and never changes the host goal.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loopx_chat.codex.goal_loop import HostGoalState
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.errors import LoopxChatError
from loopx_chat.goals.badges import RunFacts
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.goal_runs import GoalRun, GoalRuns, host_goal_words
from loopx_chat.pids import pid_alive


def host_goal_view(
    controller: ChatController, goals: GateStore, goal_id: str
) -> dict[str, Any] | None:
    """The host goal of the goal's run (or of a loop we saw and did not start), read now
    with `thread/goal/get` through an app-server that loads no thread; None when loopx-chat
    has no run and saw no loop for the goal (then nothing is spawned)."""
    runs = GoalRuns(goals)
    run = runs.latest(goal_id)
    seen = runs.host_loop_seen(goal_id)
    if run is None and seen is None:
        return None
    foreign = seen is not None and (run is None or str(seen.get("at")) > run.authorized_at)
    session_id = str(seen["session_id"]) if seen and foreign else (run.session_id if run else "")
    view: dict[str, Any] = {
        "session_id": session_id,
        "run_id": run.run_id if run else None,
        "run_state": run.state if run else None,
    }
    try:
        with controller.thread_metadata(session_id) as call:
            goal = HostGoalState.from_wire(call("thread/goal/get", {}).get("goal"))
    except LoopxChatError as exc:
        return {**view, "error_code": exc.error_code, "words": f"unknown ({exc.error_code})"}
    if run is not None and run.live and not pid_alive(run.pid):
        run = replace(run, state="ended", ended_by="a run that is no longer running")
    turns = [t for t in controller.store.list_turns(session_id) if run and t.run_id == run.run_id]
    shown = goal.to_dict() if goal else None
    if shown is not None:
        shown["turns"] = len(turns)
        spent = run.host_run_tokens(shown["tokens_used"]) if run else None
        if run is not None and spent is not None:
            # What this run spent of its own budget (codex counts the goal's whole life).
            shown["run_tokens_used"] = spent
            shown["run_token_budget"] = run.token_budget
    paused = runs.host_loop_paused(goal_id)
    paused_by = (
        str(paused.get("actor"))
        if paused is not None
        and seen is not None
        and str(paused.get("at")) >= str(seen.get("at"))
        and (run is None or str(paused.get("at")) > run.authorized_at)
        else None
    )
    state = GoalLedger(goals).goal_state(goal_id)
    acceptance = list(state.acceptance) if state else []
    facts = run_facts(run, shown, paused_by, foreign=foreign)
    return {
        **view,
        "goal": shown,
        "words": host_goal_words(shown, run, acceptance, paused_by=paused_by, foreign=foreign),
        # What the page says of the run too (`goals/badges.py`): its badge and sentence.
        **({"facts": facts} if facts is not None else {}),
    }


def run_facts(
    run: GoalRun | None,
    goal: dict[str, Any] | None,
    paused_by: str | None,
    *,
    foreign: bool = False,
) -> RunFacts | None:
    """The run's facts for its badge, from the run record and the host goal read now. A run
    of ours is never said to be a loop loopx-chat did not start (`foreign`: a loop seen after
    our last run, or with no run of ours)."""
    status = goal.get("status") if goal else None
    if status == "active" and (run is None or foreign):
        return RunFacts("not_ours", "active")
    if paused_by is not None:
        return RunFacts("not_ours_paused", "paused", who=paused_by)
    if run is None:
        return None
    tokens = goal.get("run_tokens_used", run.tokens_used) if goal else run.tokens_used
    return RunFacts(
        run.state,
        run.host_status or (str(status) if status and not run.live else None),
        followed=run.live,
        turns=int(goal.get("turns", 0)) if goal else 0,
        tokens=int(tokens or 0),
        budget=run.token_budget,
        who=run.ended_by,
        reason=run.reason,
    )

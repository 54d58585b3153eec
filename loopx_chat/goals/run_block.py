"""What opening a gate did to a running goal, and the bounded waits for the run to say so.

Owns `RunBlock` (the answer a gate request reports: `run_blocked` true when the run that
follows the goal set the host goal `blocked` for this gate, false when a run follows it but
did not, null when no run follows it; `run_block` says which, in words) and, for a run that
another process follows (a foreground `goal run` in a terminal), the wait until that process
has acknowledged the gate by its `blocked` record in the goal's run log (`GoalRuns.note`). The
wait is bounded (`ACK_WAIT_SEC`); a run that never acknowledges is reported as such, never as
an error: the gate itself is recorded either way. Also the wait for a run asked to stop its
turn (`chat interrupt`) until its `ended` record is in (`await_end`), in any process.

It reads owner-local records only: it never talks to Codex and never writes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import Gate, GateStore
from loopx_chat.goals.goal_runs import GoalRun, GoalRuns
from loopx_chat.pids import pid_alive

# How long a gate request waits for a run in another process to acknowledge the gate. That
# process looks at the goal's gates every 50 ms (a changed gate log) and at most every 0.2 s.
ACK_WAIT_SEC = 5.0
ACK_POLL_SEC = 0.05

BLOCKED = "blocked"
NOT_ACKNOWLEDGED = "not acknowledged"
NO_RUN = "no running goal"
ADVISORY = "advisory gate"
RUN_ENDING = "run ending"


@dataclass(frozen=True)
class RunBlock:
    """What the gate did to the goal's run: `run_blocked` None when no run follows it."""

    run_blocked: bool | None
    run_block: str
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"run_blocked": self.run_blocked, "run_block": self.run_block, "run_id": self.run_id}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> RunBlock:
        """The fields of `to_dict` as another process (the service) answered them."""
        blocked, run_id = doc.get("run_blocked"), doc.get("run_id")
        return cls(
            blocked if isinstance(blocked, bool) else None,
            str(doc.get("run_block") or NO_RUN),
            run_id if isinstance(run_id, str) else None,
        )

    def words(self) -> str | None:
        """One line for the terminal, or None when no run was concerned."""
        if self.run_blocked:
            return f"the running goal is blocked until it is decided (run {self.run_id})"
        if self.run_block == NOT_ACKNOWLEDGED:
            return (
                f"the process running the goal (run {self.run_id}) did not acknowledge the gate "
                f"within {ACK_WAIT_SEC:g} s; the gate is recorded and blocks the next run"
            )
        if self.run_block == RUN_ENDING:
            return (
                f"the run (run {self.run_id}) is ending, so its goal is not set blocked; the "
                "gate blocks the next run"
            )
        return None


def acknowledged(run: GoalRun, gate_id: str) -> bool:
    """Whether the run recorded that it blocked the host goal for this gate."""
    return any(
        e.get("event") == "blocked"
        and (e.get("gate_id") == gate_id or gate_id in (e.get("gate_ids") or ()))
        for e in run.history
    )


def await_block(
    goals: GateStore,
    gate: Gate,
    *,
    timeout: float = ACK_WAIT_SEC,
    poll: float = ACK_POLL_SEC,
    alive: Callable[[int | None], bool] = pid_alive,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RunBlock:
    """For a gate just recorded: wait (up to `timeout`) until the run another live process
    follows for the goal acknowledged it. A run of this process is not waited for (the
    caller asked it directly)."""
    if not gate.blocking:
        return RunBlock(None, ADVISORY)
    runs = GoalRuns(goals)
    try:
        run = runs.latest(gate.goal_id)
    except StateError:
        return RunBlock(None, NO_RUN)
    if run is None or not run.live or run.pid == os.getpid() or not alive(run.pid):
        return RunBlock(None, NO_RUN)
    deadline = clock() + timeout
    while True:
        if acknowledged(run, gate.gate_id):
            return RunBlock(True, BLOCKED, run.run_id)
        if not run.live:
            return RunBlock(False, RUN_ENDING, run.run_id)
        if clock() >= deadline or not alive(run.pid):
            return RunBlock(False, NOT_ACKNOWLEDGED, run.run_id)
        sleep(poll)
        try:
            run = runs.run(gate.goal_id, run.run_id)
        except StateError:
            return RunBlock(False, NOT_ACKNOWLEDGED, run.run_id)


def await_end(
    goals: GateStore,
    goal_id: str,
    run_id: str,
    *,
    timeout: float,
    poll: float = ACK_POLL_SEC,
    alive: Callable[[int | None], bool] = pid_alive,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> GoalRun:
    """For a run asked to stop now: wait (up to `timeout`) until it recorded its end, or its
    process is gone; the run as recorded then (still `live` when it did not say)."""
    runs = GoalRuns(goals)
    deadline = clock() + timeout
    while True:
        run = runs.run(goal_id, run_id)
        if not run.live or not alive(run.pid) or clock() >= deadline:
            return run
        sleep(poll)

"""`goals.run_block`: what a gate request reports about the goal's run, and the bounded wait
for a run in another process to acknowledge the gate (its `blocked` record)."""

from __future__ import annotations

import os
from pathlib import Path

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_runs import GoalRuns, RunObjective
from loopx_chat.goals.run_block import ACK_WAIT_SEC, RunBlock, acknowledged, await_block

OTHER_PID = os.getpid() + 100000  # "another process": `alive` below says whether it lives


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept = 0.0
        self.on_sleep: list[object] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, sec: float) -> None:
        self.now += sec
        self.slept += sec
        for act in self.on_sleep:
            act()  # type: ignore[operator]
        self.on_sleep.clear()


def _run(goals: GateStore, pid: int = OTHER_PID) -> str:
    runs = GoalRuns(goals)
    run = runs.authorize(
        "g",
        session_id="s",
        thread_id="t",
        actor="owner",
        surface="cli",
        token_budget=100,
        objective=RunObjective("count", "goal_state", "r"),
    )
    path = goals.goal_dir("g") / "runs.jsonl"
    path.write_text(path.read_text().replace(f'"pid":{os.getpid()},', f'"pid":{pid},'))
    runs.note("g", run.run_id, "started", host_status="active")
    return run.run_id


def _wait(goals: GateStore, gate: object, clock: Clock, alive: bool = True) -> RunBlock:
    return await_block(
        goals,
        gate,
        alive=lambda pid: alive,
        clock=clock,
        sleep=clock.sleep,  # type: ignore[arg-type]
    )


def test_a_run_elsewhere_that_acknowledges_is_blocked(tmp_path: Path) -> None:
    goals = GateStore(tmp_path)
    run_id = _run(goals)
    gate = goals.request_gate("g", "Ship?")
    clock = Clock()
    clock.on_sleep.append(
        lambda: GoalRuns(goals).note("g", run_id, "blocked", gate_id=gate.gate_id)
    )
    block = _wait(goals, gate, clock)
    assert block == RunBlock(True, "blocked", run_id)
    assert 0 < clock.slept < 1


def test_a_second_gate_is_acknowledged_by_its_own_record(tmp_path: Path) -> None:
    goals = GateStore(tmp_path)
    run_id = _run(goals)
    first = goals.request_gate("g", "Ship?")
    second = goals.request_gate("g", "And?")
    runs = GoalRuns(goals)
    runs.note("g", run_id, "blocked", gate_id=first.gate_id, gate_ids=[first.gate_id])
    runs.note("g", run_id, "blocked", gate_id=second.gate_id, gate_ids=[second.gate_id])
    run = runs.run("g", run_id)
    assert acknowledged(run, first.gate_id) and acknowledged(run, second.gate_id)
    assert run.blocked_by == first.gate_id  # the first gate stays the blocker on the card
    assert _wait(goals, second, Clock()).run_blocked is True


def test_a_run_that_never_acknowledges_is_given_the_bounded_wait(tmp_path: Path) -> None:
    goals = GateStore(tmp_path)
    run_id = _run(goals)
    gate = goals.request_gate("g", "Ship?")
    clock = Clock()
    block = _wait(goals, gate, clock)
    assert block == RunBlock(False, "not acknowledged", run_id)
    assert ACK_WAIT_SEC <= clock.slept < ACK_WAIT_SEC + 0.2
    assert block.words() is not None and "did not acknowledge the gate within 5 s" in str(
        block.words()
    )


def test_no_wait_without_a_live_run_elsewhere_or_for_an_advisory_gate(tmp_path: Path) -> None:
    goals = GateStore(tmp_path)
    gate = goals.request_gate("g", "Ship?")
    assert _wait(goals, gate, Clock()) == RunBlock(None, "no running goal")  # no run at all
    _run(goals)
    clock = Clock()
    assert _wait(goals, gate, clock, alive=False) == RunBlock(None, "no running goal")
    advisory = goals.request_gate("g", "FYI", blocking=False)
    assert _wait(goals, advisory, clock) == RunBlock(None, "advisory gate")
    assert clock.slept == 0
    mine = GateStore(tmp_path / "mine")
    _run(mine, pid=os.getpid())  # this process's run: the registry answered, not the log
    assert _wait(mine, mine.request_gate("g", "Ship?"), clock) == RunBlock(None, "no running goal")


def test_a_run_that_ends_while_waited_for_is_said(tmp_path: Path) -> None:
    goals = GateStore(tmp_path)
    run_id = _run(goals)
    gate = goals.request_gate("g", "Ship?")
    clock = Clock()
    clock.on_sleep.append(lambda: GoalRuns(goals).note("g", run_id, "ended", by="Codex"))
    assert _wait(goals, gate, clock) == RunBlock(False, "run ending", run_id)


def test_the_answer_round_trips_through_the_service_document() -> None:
    block = RunBlock(True, "blocked", "run-1")
    assert RunBlock.from_doc(block.to_dict()) == block
    assert RunBlock.from_doc({}) == RunBlock(None, "no running goal")
    assert RunBlock(None, "no running goal").words() is None

"""The quota decision is the first screen's answer: properties over generated goal histories,
the throttle that really clears, goal stop/resume, and status recency."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from loopx_chat.cli import main
from loopx_chat.goals.gate_store import Gate, Handoff
from loopx_chat.goals.goal_facts import FAILURE_THRESHOLD, GoalFacts, facts_from_records
from loopx_chat.goals.status_row import goal_status
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord

GOAL = "g"
HOME = "/home-of-test"


def at(i: int) -> str:
    return f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000000Z"


@dataclass
class History:
    """A goal's records, built step by step the way the stores would hold them."""

    clock: int = 0
    sessions: list[SessionRecord] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    handoffs: list[Handoff] = field(default_factory=list)
    stopped: dict[str, Any] | None = None
    budget: int | None = None
    running: bool = False

    def tick(self) -> str:
        self.clock += 1
        return at(self.clock)

    def session(self) -> SessionRecord:
        if not self.sessions:
            now = self.tick()
            self.sessions.append(
                SessionRecord(session_id="s1", goal_id=GOAL, created_at=now, updated_at=now)
            )
        return self.sessions[-1]

    def turn(self, status: str, code: str | None = None, tokens: int = 100) -> None:
        s = self.session()
        start, end = self.tick(), self.tick()
        self.turns.append(
            TurnRecord(
                turn_id=f"t{len(self.turns) + 1}",
                session_id=s.session_id,
                status=status,
                created_at=start,
                updated_at=end,
                completed_at=end,
                error_code=code,
                tokens=TokenCounts(total_tokens=tokens),
            )
        )

    def gate(self) -> None:
        now = self.tick()
        self.gates.append(
            Gate(f"gate-{len(self.gates)}", GOAL, "ok?", "operator", True, "pending", now, now)
        )

    def resolve(self, approve: bool) -> None:
        for i, g in enumerate(self.gates):
            if g.status == "pending":
                status, decision = ("approved", "approve") if approve else ("rejected", "reject")
                self.gates[i] = replace(g, status=status, decision=decision, updated_at=self.tick())
                return

    def handoff(self) -> None:
        self.handoffs.append(
            Handoff(
                f"handoff-{len(self.handoffs)}", GOAL, "do the next step", "done", (), self.tick()
            )
        )

    def set_running(self, running: bool) -> None:
        self.running = running
        s = self.session()
        self.sessions[-1] = replace(s, active_turn_id="t-run" if running else None)

    def facts(self) -> GoalFacts:
        return facts_from_records(
            GOAL,
            sessions=self.sessions,
            turns=self.turns,
            gates=self.gates,
            handoffs=self.handoffs,
            codex_home=HOME,
            stopped=self.stopped,
            token_budget=self.budget,
        )


OPS = st.sampled_from(
    [
        "gate", "approve", "reject", "handoff", "complete", "fail", "timeout", "interrupt",
        "stop", "resume", "budget", "unbudget", "run", "finish_run", "poll", "poll", "poll",
    ]
)  # fmt: skip


def apply(h: History, op: str) -> None:
    if op == "gate":
        h.gate()
    elif op in ("approve", "reject"):
        h.resolve(op == "approve")
    elif op == "handoff":
        h.handoff()
    elif op == "complete":
        h.turn("completed")
    elif op == "fail":
        h.turn("failed", "turn_failed")
    elif op == "timeout":
        h.turn("interrupted", "idle_timeout")
    elif op == "interrupt":
        h.turn("interrupted")  # a person's interrupt: no error code
    elif op == "stop":
        h.stopped = {"event": "stopped", "created_at": h.tick()}
    elif op == "resume":
        h.stopped = None
    elif op == "budget":
        h.budget = 250
    elif op == "unbudget":
        h.budget = None
    elif op == "run":
        h.set_running(True)
    elif op == "finish_run":
        h.set_running(False)


def check_agreement(facts: GoalFacts, row: dict[str, Any]) -> None:
    q, fs = row["quota"], row["projection"]["first_screen"]
    decision, reason = q["decision"], q["reason_code"]
    # eligible only when the first screen says the agent can continue AND there is a todo.
    if decision == "eligible":
        assert fs["agent_can_continue"] is True and facts.pending_handoffs
        assert fs["user_action_required"] is False
    # A decision that needs a person is the first screen's gate, and the reverse.
    person = decision in ("paused", "operator_gate", "throttled") or reason == "codex_home_mismatch"
    assert fs["user_action_required"] is person, (decision, fs)
    # The spoken answer is the decision.
    assert row["answers"]["agent_can_continue"].startswith("yes") is (decision == "eligible")
    assert (decision == "paused") is row["stopped"]
    if decision in ("paused", "throttled"):
        assert q["clears_when"] in row["answers"]["agent_can_continue"]


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(OPS, max_size=40))
def test_quota_and_status_never_disagree(ops: list[str]) -> None:
    h = History()
    spent = False  # the scheduler spent an eligible turn and no new todo came since
    for op in ops:
        apply(h, op)
        spent = spent and op != "handoff"
        facts = h.facts()
        row = goal_status(facts)
        check_agreement(facts, row)
        # The goal's facts are built from fixed, compact keys, whatever the records hold:
        # the projection never flags raw material in them. Raw material reaches a goal only
        # through its files (a hand edit): `raw_audit`, tested on its own and by `goal run`.
        assert row["projection"]["boundary"]["raw_material_detected"] is False
        decision = row["quota"]["decision"]
        if not facts.pending_handoffs:
            assert decision != "eligible"
        if spent:
            assert decision != "eligible", "a second turn for the same todo"
        if op == "poll" and decision == "eligible":
            h.turn("completed")  # the scheduler spends the turn the decision allowed
            spent = True


def test_a_goal_with_nothing_to_do_is_never_eligible() -> None:
    """The reproduced defects, one by one: each was `eligible` while status said no."""
    cases = {
        "one failed turn, no handoff": ["fail"],
        "nothing to do": [],
        "an approved gate with nothing next": ["gate", "approve"],
        "a person's interrupt": ["interrupt"],
        "a completed turn consumed the handoff": ["handoff", "complete"],
    }
    for name, ops in cases.items():
        h = History()
        for op in ops:
            apply(h, op)
        row = goal_status(h.facts())
        assert row["quota"]["decision"] == "waiting", name
        assert row["answers"]["agent_can_continue"].startswith("no"), name


def test_failure_throttle_is_cleared_by_the_handoff_it_names() -> None:
    h = History()
    h.handoff()
    for _ in range(FAILURE_THRESHOLD):
        h.turn("failed", "turn_failed")
    row = goal_status(h.facts())
    assert row["quota"]["decision"] == "throttled"
    assert "handoff record" in row["quota"]["clears_when"]
    assert row["projection"]["first_screen"]["agent_can_continue"] is False
    assert row["answers"]["agent_can_continue"].startswith("no: throttled")
    h.handoff()  # what the throttle says clears it
    row = goal_status(h.facts())
    assert row["quota"]["decision"] == "eligible"
    assert row["answers"]["agent_can_continue"].startswith("yes")


def test_budget_throttle_clears_when_the_budget_is_raised() -> None:
    h = History()
    h.handoff()
    h.turn("completed", tokens=300)
    h.handoff()
    h.budget = 250
    assert goal_status(h.facts())["quota"]["reason_code"] == "token_budget_spent"
    h.budget = 1000
    assert goal_status(h.facts())["quota"]["decision"] == "eligible"


def test_status_recency_latest_fact_wins() -> None:
    h = History()
    h.turn("failed", "turn_failed")
    row = goal_status(h.facts())
    assert row["answers"]["latest_run"].startswith("blocked")
    h.turn("completed")
    row = goal_status(h.facts())
    assert row["answers"]["latest_run"].startswith("validated: turn t2 completed")
    assert "latest_blocker" not in row["projection"]["first_screen"]
    assert row["projection"]["work_lane_contract"]["lane"] != "blocker"
    h.turn("failed", "turn_failed")  # a newer failure is the current blocker again
    assert goal_status(h.facts())["answers"]["latest_run"].startswith("blocked: turn t3")


def test_a_rejected_gate_before_a_completed_turn_is_history() -> None:
    h = History()
    h.gate()
    h.resolve(approve=False)
    assert goal_status(h.facts())["answers"]["latest_run"].startswith("blocked: gate")
    h.turn("completed")
    assert goal_status(h.facts())["answers"]["latest_run"].startswith("validated")


def cli(root: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(root), *args, "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(root / "home")},
    )
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_goal_stop_and_resume_through_the_cli(tmp_path: Path) -> None:
    cli(tmp_path, "goal", "set", "g", "--objective", "ship", "--acceptance", "tests pass",
        "--stop-condition", "a schema change is needed")  # fmt: skip
    cli(tmp_path, "handoff", "record", "--goal", "g", "--next-action", "write the tests",
        "--stop-condition", "green")  # fmt: skip
    assert cli(tmp_path, "quota", "--goal", "g")["decisions"][0]["decision"] == "eligible"
    cli(tmp_path, "goal", "stop", "g", "--reason", "holiday")
    decision = cli(tmp_path, "quota", "--goal", "g")["decisions"][0]
    assert (decision["decision"], decision["reason_code"]) == ("paused", "goal_stopped")
    row = cli(tmp_path, "status", "--goal", "g")["attention_queue"][0]
    assert row["stopped"] is True and row["quota"]["decision"] == "paused"
    assert "goal resume" in row["answers"]["agent_can_continue"]
    assert row["goal_state"]["acceptance"] == ["tests pass"]
    assert row["goal_state"]["stop_condition"] == "a schema change is needed"
    human = CliRunner().invoke(
        main, ["--state-dir", str(tmp_path), "status", "--goal", "g"],
        env={"LOOPX_CHAT_CODEX_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert "acceptance:              tests pass" in human.output
    assert "STOPPED" in human.output and "paused" in human.output
    cli(tmp_path, "goal", "resume", "g")
    assert cli(tmp_path, "quota", "--goal", "g")["decisions"][0]["decision"] == "eligible"
    err = cli(tmp_path, "goal", "stop", "nobody", code=1)
    assert err["error_code"] == "goal_not_found"
    assert not (tmp_path / "goals" / "nobody").exists()

"""goal_state, quota_decision, human_reward and dreaming_proposal: records that survive
restarts with their history, raw-material refusal, and the quota rules one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.errors import LoopxChatError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.quota import QuotaFacts, decide_quota
from tests.helpers.goals import goal_with_turns


def records(root: Path) -> GoalLedger:
    return GoalLedger(GateStore(root))


def cli(root: Path, *args: str, input: str | None = None) -> dict:  # type: ignore[type-arg]
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(root), *args, "--json"],
        input=input,
        env={"LOOPX_CHAT_CODEX_HOME": str(root / "home")},
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_goal_state_history_survives_restart(tmp_path: Path) -> None:
    records(tmp_path).set_goal_state(
        "g",
        {
            "objective": "Ship v1",
            "acceptance": ["the tests pass"],
            "boundary": "repo only",
            "non_goals": ["billing"],
        },
    )
    records(tmp_path).set_goal_state("g", {"objective": "Ship v2"}, actor="operator")
    again = records(tmp_path)  # a new process reads the same records
    state = again.goal_state("g")
    assert state is not None
    assert (state.objective, state.boundary, state.non_goals, state.actor) == (
        "Ship v2",
        "repo only",
        ("billing",),
        "operator",
    )
    history = again.goal_state_history("g")
    assert [h["objective"] for h in history] == ["Ship v1", "Ship v2"]
    assert history[1]["previous"]["objective"] == "Ship v1"
    assert all(h["record_id"] and h["created_at"] and h["actor"] for h in history)
    shown = cli(tmp_path, "goal", "show", "g", "--history")
    assert len(shown["history"]) == 2


@pytest.mark.parametrize(
    "raw_key", ["raw_transcript", "api_key", "log_path", "stdout_tail", "messages"]
)
def test_raw_material_keys_are_refused_and_nothing_written(tmp_path: Path, raw_key: str) -> None:
    doc = json.dumps({"objective": "x", raw_key: "CANARY-value"})
    result = CliRunner().invoke(
        main, ["--state-dir", str(tmp_path), "goal", "set", "g", "--from-json", "-"], input=doc
    )
    assert result.exit_code == 1 and "raw_material_refused" in result.stderr
    assert "CANARY" not in result.output
    assert not (tmp_path / "goals" / "g" / "goal_state.jsonl").exists()


def test_text_must_be_public_safe(tmp_path: Path) -> None:
    with pytest.raises(LoopxChatError) as info:
        records(tmp_path).set_goal_state(
            "g", {"objective": "read /Users/me/secrets.txt", "acceptance": ["done"]}
        )
    assert info.value.error_code == "unsafe_text"
    assert "(local_path)" in info.value.message and "/Users" not in info.value.message
    with pytest.raises(LoopxChatError) as info:
        records(tmp_path).record_proposal(
            "g", title="t", rationale="key sk-abcdefghijklmnopqrstu", next_action="n"
        )
    assert "(secret)" in info.value.message and "sk-" not in info.value.message
    assert not (tmp_path / "goals" / "g" / "goal_state.jsonl").exists()
    assert not (tmp_path / "goals" / "g" / "proposals.jsonl").exists()


def test_rewards_are_judgments_kept_with_history(tmp_path: Path) -> None:
    goal_with_turns(tmp_path, "g", "turn-1", "turn-2")
    cli(
        tmp_path,
        "reward",
        "record",
        "--goal",
        "g",
        "--turn",
        "turn-1",
        "--label",
        "good",
        "--reason",
        "clean fix",
    )
    cli(
        tmp_path,
        "reward",
        "record",
        "--goal",
        "g",
        "--turn",
        "turn-2",
        "--label",
        "bad",
        "--reason",
        "broke the build",
        "--actor",
        "operator",
    )
    listed = cli(tmp_path, "reward", "list", "--goal", "g")["rewards"]
    assert [(r["run_ref"], r["label"], r["actor"]) for r in listed] == [
        ("turn-1", "good", "owner"),
        ("turn-2", "bad", "operator"),
    ]
    assert all(r["kind"] == "human_judgment" and "score" not in r for r in listed)
    status = cli(tmp_path, "status", "--goal", "g")["attention_queue"][0]
    assert status["human_rewards"] == {"good": 1, "bad": 1, "mixed": 0}


def test_proposal_is_never_a_todo_until_promoted(tmp_path: Path) -> None:
    cli(tmp_path, "goal", "set", "g", "--objective", "fast status", "--acceptance", "under 10 ms")
    proposal = cli(
        tmp_path,
        "dream",
        "record",
        "--goal",
        "g",
        "--title",
        "Cache status",
        "--rationale",
        "it is slow",
        "--next-action",
        "add a status cache",
    )["proposal"]
    goal = cli(tmp_path, "status", "--goal", "g")["attention_queue"][0]
    fs = goal["projection"]["first_screen"]
    assert fs.get("first_agent_todo") is None and fs["agent_can_continue"] is False
    assert goal["advisory_proposals"] == 1
    assert "add a status cache" not in json.dumps(goal)
    promoted = cli(
        tmp_path,
        "dream",
        "promote",
        proposal["proposal_id"],
        "--goal",
        "g",
        "--stop-condition",
        "status under 10 ms",
    )
    assert promoted["proposal"]["status"] == "promoted"
    handoff_id = promoted["handoff"]["handoff_id"]
    goal = cli(tmp_path, "status", "--goal", "g")["attention_queue"][0]
    assert goal["projection"]["first_screen"]["first_agent_todo"] == "add a status cache"
    assert goal["advisory_proposals"] == 0
    listed = cli(tmp_path, "dream", "list", "--goal", "g")["proposals"][0]
    assert listed["handoff_id"] == handoff_id
    assert [h["event"] for h in listed["history"]] == ["recorded", "promoted"]
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(tmp_path), "dream", "dismiss", proposal["proposal_id"], "--goal", "g"],
    )
    assert result.exit_code == 1 and "proposal_already_closed" in result.stderr


def test_dismissed_proposal_stays_advisory_history(tmp_path: Path) -> None:
    r = records(tmp_path)
    p = r.record_proposal("g", title="t", rationale="r", next_action="n")
    dismissed = r.dismiss("g", p["proposal_id"])
    assert dismissed["status"] == "dismissed"
    assert records(tmp_path).proposal("g", p["proposal_id"])["history"][1]["previous"] == {
        "status": "advisory"
    }


def facts(**kw: object) -> QuotaFacts:
    base: dict[str, object] = dict(
        stopped=False,
        open_blocking_gate=False,
        home_mismatch=False,
        throttle=None,
        raw_material_detected=False,
        turn_running=False,
        agent_can_continue=True,
        pending_handoffs=("handoff-1",),
        transition_key="k1",
    )
    base.update(kw)
    return QuotaFacts(**base)  # type: ignore[arg-type]


THROTTLE = {"kind": "consecutive_failures", "count": 3, "threshold": 3, "clears_when": "x"}


@pytest.mark.parametrize(
    ("kw", "decision", "reason"),
    [
        ({"stopped": True, "open_blocking_gate": True}, "paused", "goal_stopped"),
        (
            {"open_blocking_gate": True, "raw_material_detected": True},
            "operator_gate",
            "open_blocking_gate",
        ),
        ({"home_mismatch": True, "throttle": THROTTLE}, "blocked", "codex_home_mismatch"),
        ({"throttle": THROTTLE, "raw_material_detected": True}, "throttled",
         "consecutive_failed_turns"),
        (
            {"throttle": {"kind": "token_budget", "used": 5, "budget": 5, "clears_when": "y"}},
            "throttled",
            "token_budget_spent",
        ),
        ({"raw_material_detected": True}, "blocked", "raw_material_detected"),
        ({"turn_running": True}, "waiting", "turn_running"),
        ({"pending_handoffs": ()}, "waiting", "no_agent_todo"),
        ({"agent_can_continue": False}, "waiting", "no_agent_todo"),
        ({}, "eligible", "eligible"),
    ],
)  # fmt: skip
def test_quota_outcomes(kw: dict[str, object], decision: str, reason: str) -> None:
    out = decide_quota(facts(**kw))
    assert (out["decision"], out["reason_code"]) == (decision, reason)
    assert out["scheduler_hint_only"] is True and out["starts_turns"] is False
    assert out["bills"] is False and "never starts a turn" in out["note"]
    assert (out["clears_when"] is None) == (decision == "eligible")
    if decision == "throttled":
        assert out["window"]["kind"] in ("consecutive_failures", "token_budget")


def test_quota_cli_records_decisions_and_agrees_with_status(tmp_path: Path) -> None:
    cli(tmp_path, "goal", "set", "g", "--objective", "watch the build", "--acceptance", "green")
    first = cli(tmp_path, "quota", "--goal", "g")["decisions"][0]
    assert (first["decision"], first["reason_code"]) == ("waiting", "no_agent_todo")
    cli(
        tmp_path, "handoff", "record", "--goal", "g", "--next-action", "fix the build",
        "--stop-condition", "green",
    )  # fmt: skip
    second = cli(tmp_path, "quota", "--goal", "g")["decisions"][0]
    assert second["decision"] == "eligible" and second["todo_refs"]
    cli(tmp_path, "gate", "request", "--goal", "g", "--question", "Proceed?")
    third = cli(tmp_path, "quota", "--goal", "g")["decisions"][0]
    assert third["decision"] == "operator_gate"
    lines = (tmp_path / "goals" / "g" / "quota.jsonl").read_text().splitlines()
    assert len(lines) == 3
    goal = cli(tmp_path, "status", "--goal", "g")["attention_queue"][0]
    assert goal["goal_state"]["objective"] == "watch the build"
    assert goal["goal_state"]["acceptance"] == ["green"]
    assert goal["quota"]["decision"] == "operator_gate"
    assert goal["answers"]["agent_can_continue"].startswith("no: blocked by an open owner gate")


@pytest.mark.parametrize(
    "doc",
    [
        {"objective": "Ship", "non_goals": [1], "acceptance": ["a"]},
        {"objective": "Ship", "non_goals": None, "acceptance": ["a"]},
        {"objective": "Ship", "non_goals": "abc", "acceptance": ["a"]},
        {"objective": "Ship", "boundary": 5, "acceptance": ["a"]},
        {"objective": "Ship", "token_budget": True, "acceptance": ["a"]},
        {"objective": "Ship", "acceptance": "abc"},
        {"objective": "Ship", "acceptance": []},
        {"objective": "Ship"},
    ],
)
def test_goal_state_json_of_the_wrong_types_is_refused_cleanly(
    tmp_path: Path,
    doc: dict,  # type: ignore[type-arg]
) -> None:
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(tmp_path), "goal", "set", "g", "--from-json", "-", "--json"],
        input=json.dumps(doc),
        env={"LOOPX_CHAT_CODEX_HOME": str(tmp_path / "home")},
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error_code"] in (
        "input_invalid",
        "usage_error",
        "acceptance_required",
    )
    assert not (tmp_path / "goals" / "g" / "goal_state.jsonl").exists()

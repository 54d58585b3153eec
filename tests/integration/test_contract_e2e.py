"""The public contract on real state: a session on the real codex + mock whose prompt and
reply are canaries, an owner gate, a handoff, a failed turn. At each step `status --contract
--json` and `GET /api/goals/G/contract` give the same document, valid against the schema the
package ships, agreeing with the status row, and carrying no transcript text, source id,
credential or local path."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from jsonschema import Draft202012Validator

from loopx_chat.cli import main
from loopx_chat.session_runtime.contract import CONTRACT_SCHEMA_FILE
from tests.helpers.service import Service

GOAL = "goal-contract"
VALIDATOR = Draft202012Validator(
    json.loads(
        resources.files("loopx_chat.session_runtime").joinpath(CONTRACT_SCHEMA_FILE).read_text()
    )
)


def _cli(svc: Service, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(svc.state), "--direct", *args, "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(svc.home)},
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _contract(svc: Service, canaries: list[str]) -> dict[str, Any]:
    (contract,) = _cli(svc, "status", "--contract", "--goal", GOAL)["contracts"]
    assert [e.message for e in VALIDATOR.iter_errors(contract)] == []
    reply = svc.request("GET", f"/api/goals/{GOAL}/contract")
    assert reply.status == 200 and reply.json() == contract
    (row,) = _cli(svc, "status", "--goal", GOAL)["attention_queue"]
    assert contract["goal_projection"]["waiting_on"] == row["waiting_on"]
    assert contract["goal_projection"]["next_action"] == row["recommended_action"]
    text = json.dumps(contract)
    for private in (*canaries, str(svc.state.parent), str(svc.home)):
        assert private not in text, private
    return contract


def test_the_contract_follows_the_goal_and_never_leaks(service: Service, tmp_path: Path) -> None:
    canary = "CANARY-contract-prompt-5d1e"
    record = service.controller.open_session(GOAL, tmp_path)
    done = service.controller.submit_turn(record.session_id, f"{canary} mock:text=CANARY-reply")
    assert done.turn.status == "completed"
    ids = [record.session_id, done.turn.turn_id, str(record.upstream_thread_id)]
    leaks = [canary, "CANARY-reply", *ids]

    first = _contract(service, leaks)
    assert first["session_facts"]["session_count"] == 1
    assert first["session_facts"]["outcome_status"] == "validated"
    assert first["session_facts"]["latest_event_at"] is not None
    assert first["goal_projection"]["latest_validation"].startswith("turn ")
    assert first["goal_projection"]["waiting_on"] == "monitor_signal"

    gate = _cli(service, "gate", "request", "--goal", GOAL, "--question", "Merge now?")["gate"]
    held = _contract(service, leaks)
    assert held["session_facts"]["approval_state"] == "pending"
    assert held["goal_projection"]["first_user_todo"] == "Merge now?"
    assert held["goal_projection"]["agent_can_continue"] is False

    _cli(service, "gate", "resolve", gate["gate_id"], "--goal", GOAL, "--decision", "approve")
    _cli(
        service,
        "handoff",
        "record",
        "--goal",
        GOAL,
        "--next-action",
        "merge it",
        "--stop-condition",
        "merged",
    )
    going = _contract(service, leaks)
    assert going["session_facts"]["approval_state"] == "approved"
    assert going["goal_projection"]["waiting_on"] == "codex"
    assert going["goal_projection"]["first_agent_todo"] == "merge it"

    failed = service.controller.submit_turn(record.session_id, "mock:error=500")
    assert failed.turn.status == "failed"
    blocked = _contract(service, [*leaks, failed.turn.turn_id])
    assert blocked["session_facts"]["outcome_status"] == "blocked"
    assert blocked["goal_projection"]["latest_blocker"].startswith("turn ")


def test_an_unknown_goal_is_refused_by_name(service: Service) -> None:
    reply = service.request("GET", "/api/goals/no-such-goal/contract")
    assert reply.status == 404 and reply.json()["error_code"] == "goal_not_found"
    reply = service.request("GET", "/api/goals/..%2F..%2Fetc/contract")
    assert reply.status == 400, reply.body
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(service.state), "status", "--contract", "--goal", "nope", "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(service.home)},
    )
    assert result.exit_code != 0 and "goal_not_found" in result.output
    assert "Traceback" not in result.output

"""Nothing vanishes: a goal made by `chat new --goal` (the real codex on the mock) whose
session.json is then truncated stays in `status`, `status --json`, `/status.json` and the
page of a real `serve`, as a problem the owner can act on (what to do, in words, no path),
and holds the agent (a fail-closed owner gate). Its public contract says the same."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

from loopx_chat.state.service_runtime import read_secret
from tests.helpers.owner_cli import OwnerCli
from tests.helpers.serve_process import start_service

GOAL = "goal-torn"
WHAT_TO_DO = "restore it from a backup or move its folder out of sessions/ in the state dir"


def _get(port: int, state: Path, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(
        "GET",
        path,
        headers={"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {read_secret(state)}"},
    )
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def _torn_goal(cli: OwnerCli) -> str:
    """A goal made by `chat new --goal`, then its session.json cut in half; its session id."""
    code, opened = cli.json("chat", "new", "--goal", GOAL, "mock:text=ready")
    assert code == 0, opened
    session_id = str(opened["session_id"])
    path = cli.state / "sessions" / session_id / "session.json"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return session_id


def _row(doc: dict[str, Any]) -> dict[str, Any]:
    rows = [g for g in doc["attention_queue"] if g["goal_id"] == GOAL]
    assert len(rows) == 1, doc  # the goal is there, once
    return rows[0]


def _assert_problem_row(row: dict[str, Any], session_id: str) -> None:
    (problem,) = row["problems"]
    assert problem["session_id"] == session_id
    assert problem["error_code"] == "state_corrupt"
    assert WHAT_TO_DO in problem["what_to_do"]
    assert row["severity"] == "high"
    first = row["projection"]["first_screen"]
    assert first["user_action_required"] is True and first["agent_can_continue"] is False


def test_a_truncated_session_keeps_its_goal_in_every_view(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    cli = OwnerCli(tmp_path, bound_home, base_env, codex_bin)
    session_id = _torn_goal(cli)
    private = (str(tmp_path), str(bound_home))

    # `sessions list` said UNREADABLE before; status now says it on the goal.
    text = cli("status")
    assert text.returncode == 0, text.stderr
    assert f"goal {GOAL}" in text.stdout
    assert f"PROBLEM:                 session {session_id} cannot be read" in text.stdout
    assert WHAT_TO_DO in text.stdout
    assert "Traceback" not in text.stderr

    code, doc = cli.json("status")
    assert code == 0
    _assert_problem_row(_row(doc), session_id)
    assert not any(p in json.dumps(_row(doc)) for p in private)

    code, contracts = cli.json("status", "--contract", "--goal", GOAL)
    assert code == 0, contracts
    (contract,) = contracts["contracts"]
    assert contract["goal_id"] == GOAL
    assert contract["session_facts"]["approval_state"] == "pending"
    assert contract["goal_projection"]["agent_can_continue"] is False
    assert contract["goal_projection"]["waiting_on"] == "user_or_controller"

    service = start_service(cli.state, bound_home, base_env, codex_bin, tmp_path / "serve.log")
    try:
        status, body = _get(service.port, cli.state, "/status.json")
        assert status == 200
        _assert_problem_row(_row(json.loads(body)), session_id)
        status, page = _get(service.port, cli.state, "/")
        assert status == 200
        html = page.decode()
        status, served_contract = _get(service.port, cli.state, f"/api/goals/{GOAL}/contract")
        assert status == 200 and json.loads(served_contract) == contract
    finally:
        service.stop()
    assert not any(p.encode() in body for p in private)
    card = html[html.index(f'data-goal="{GOAL}"') :]
    assert 'data-actor="owner"' in card[:200]
    problem = card[card.index('class="gate problem"') :]
    # The long id is shortened on the page, the full id on hover.
    assert f'title="{session_id}"' in problem and "cannot be read (state_corrupt)" in problem
    assert f"What to do: its session.json is damaged: {WHAT_TO_DO}" in card
    assert not any(p in html for p in private)

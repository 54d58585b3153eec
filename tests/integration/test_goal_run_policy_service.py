"""A goal run in the service under the run's own approval policy: the service's thread is
loaded again with it, codex's approval on a continuation turn is decided through the API,
and the run's policy is on record. A bad policy or Plan mode is refused, nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.goal_runs import goal_loop_turns, run_events
from tests.helpers.service import Service
from tests.helpers.waiting import wait_for


def _setup(tmp_path: Path, svc: Service) -> str:
    GoalLedger(GateStore(svc.state)).set_goal_state(
        "g", {"objective": "make the file", "acceptance": ["it exists"]}
    )
    work = tmp_path / "work"
    work.mkdir()
    session = svc.controller.open_session("g", work)
    svc.controller.submit_turn(session.session_id, "mock:text=ready")
    return session.session_id


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_run_asks_under_its_own_policy_and_the_api_decides(
    tmp_path: Path, service: Service, mock: MockResponsesServer
) -> None:
    sid = _setup(tmp_path, service)  # loaded by the service under its default, `never`
    warm = service.controller._warm.get(sid)
    assert warm is not None and warm.thread.options.approval_policy == "never"
    target = tmp_path / "work" / "f"
    # The service runs read-only: an escalated command is the one an approval lets write.
    call = {
        "cmd": f"touch {target}",
        "sandbox_permissions": "require_escalated",
        "justification": "the goal needs the file",
    }
    mock.script(
        f"mock:call=exec_command {json.dumps(call)}",
        default="mock:slow=0.05 mock:text=working on it",
    )
    started = service.request(
        "POST", "/api/goals/g/run", {"token_budget": 30000, "approval": "untrusted"}
    )
    assert started.status == 202, started.body
    authorized = run_events(service.state, "g")[0]
    assert (authorized["approval_policy"], authorized["plan"]) == ("untrusted", False)
    desk = service.controller.host_requests
    wait_for(lambda: bool(desk.live_gates()))
    live = desk.live_gates()[0]
    wait_for(lambda: any(e["event"] == "blocked" for e in run_events(service.state, "g")))
    assert not target.exists()
    decided = service.request(
        "POST", f"/api/goals/g/gates/{live.gate_id}/decision", {"decision": "approve"}
    )
    assert decided.status == 200, decided.body

    def ended() -> bool:
        run = service.request("GET", "/api/goals/g/run").json()["run"]
        return bool(run["state"] == "ended")

    wait_for(ended, timeout=90)
    assert target.exists()
    events = [e["event"] for e in run_events(service.state, "g")]
    assert events == ["run_authorized", "started", "blocked", "unblocked", "ended"]
    assert run_events(service.state, "g")[-1]["host_status"] == "budgetLimited"
    gate = GateStore(service.state).gate("g", live.gate_id)
    assert (gate.status, gate.decided_by) == ("approved", "owner-api")
    unblocked = str(run_events(service.state, "g")[3]["at"])
    later = [t for t in goal_loop_turns(service.state, sid) if t.created_at > unblocked]
    assert later  # codex continued after the approval
    for path in service.state.rglob("*"):  # the justification is shown live, never stored
        if path.is_file():
            assert b"the goal needs the file" not in path.read_bytes(), path


def test_a_bad_policy_and_plan_mode_are_refused_with_nothing_written(
    tmp_path: Path, service: Service, mock: MockResponsesServer
) -> None:
    _setup(tmp_path, service)
    before = _tree(service.state)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"token_budget": 5000, "approval": "always"}, "approval_policy_unknown"),
        ({"token_budget": 5000, "plan": True}, "plan_not_in_run"),
        ({"token_budget": 5000, "plan": "yes"}, "input_invalid"),
    ]
    for body, code in cases:
        reply = service.request("POST", "/api/goals/g/run", body)
        assert reply.status == 400, reply.body
        assert reply.json()["error_code"] == code
    assert _tree(service.state) == before

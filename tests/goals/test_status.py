"""Owner gates and handoffs (append-only), facts from state, and `status` / `project`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.errors import LoopxChatError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_facts import facts_from_records
from loopx_chat.goals.status_row import goal_status
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord

HOME = "/Users/me/.codex"


def session(sid: str = "s1", **kw: object) -> SessionRecord:
    base = {
        "session_id": sid,
        "goal_id": "g",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "codex_home": HOME,
        "work_dir": "/Users/me/secret-project",
    }
    base.update(kw)
    return SessionRecord(**base)  # type: ignore[arg-type]


def turn(tid: str, status: str, at: str, code: str | None = None) -> TurnRecord:
    return TurnRecord(
        turn_id=tid,
        session_id="s1",
        status=status,
        created_at=at,
        updated_at=at,
        completed_at=at,
        error_code=code,
        tokens=TokenCounts(10, 2, 12),
    )


def status_for(**kw: object) -> dict:  # type: ignore[type-arg]
    defaults: dict[str, object] = {
        "sessions": [session()],
        "turns": [],
        "gates": [],
        "handoffs": [],
    }
    defaults.update(kw)
    facts = facts_from_records("g", codex_home=HOME, **defaults)  # type: ignore[arg-type]
    return goal_status(facts)


def test_gates_persist_with_an_audit_trail(tmp_path: Path) -> None:
    store = GateStore(tmp_path)
    opened = store.request_gate("g", "Approve the import?", actor="owner")
    again = GateStore(tmp_path)  # a restarted controller sees the same records
    assert [g.status for g in again.gates("g")] == ["pending"]
    resolved = again.resolve_gate("g", opened.gate_id, "reject", "not yet")
    assert (resolved.status, resolved.decision, resolved.reason) == (
        "rejected",
        "reject",
        "not yet",
    )
    assert [e["event"] for e in resolved.history] == ["requested", "resolved"]
    with pytest.raises(LoopxChatError) as info:
        again.resolve_gate("g", opened.gate_id, "approve", None)
    assert info.value.error_code == "gate_already_resolved"
    lines = (tmp_path / "goals" / "g" / "gates.jsonl").read_text().splitlines()
    assert len(lines) == 2  # append-only: nothing rewritten


@pytest.mark.parametrize(
    "text",
    [
        "token sk-abcdefghijklmnop",
        "see /Users/me/notes.txt",
        "-----BEGIN RSA PRIVATE KEY-----",
        "   ",
    ],
)
def test_unsafe_or_empty_gate_text_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(LoopxChatError) as info:
        GateStore(tmp_path).request_gate("g", text)
    assert info.value.error_code in ("unsafe_text", "usage_error")
    assert not (tmp_path / "goals" / "g" / "gates.jsonl").exists()


def test_corrupt_line_fails_and_partial_tail_is_ignored(tmp_path: Path) -> None:
    store = GateStore(tmp_path)
    store.request_gate("g", "Q1?")
    path = tmp_path / "goals" / "g" / "gates.jsonl"
    path.write_bytes(path.read_bytes() + b'{"schema_version": "loopx_chat_gate_ev')
    assert len(store.gates("g")) == 1  # a crash mid-append is not a record yet
    corrupt = b"not json\n" + path.read_bytes()
    path.write_bytes(corrupt)
    with pytest.raises(LoopxChatError) as info:
        store.gates("g")
    assert info.value.error_code == "state_corrupt" and "line 1" in info.value.message
    assert path.read_bytes() == corrupt


def test_open_gate_blocks_the_agent() -> None:
    from loopx_chat.goals.gate_store import Gate

    gate = Gate("gate-1", "g", "Ship it?", "owner", True, "pending", "t1", "t1")
    doc = status_for(gates=[gate])
    fs = doc["projection"]["first_screen"]
    assert fs["user_action_required"] is True and fs["agent_can_continue"] is False
    assert doc["waiting_on"] == "user_or_controller"
    assert doc["answers"]["gate_or_evidence_required"] == "gate (pending): Ship it?"
    assert "owner" in doc["answers"]["waiting_on"]


def test_failed_last_turn_shows_as_blocker() -> None:
    doc = status_for(
        turns=[
            turn("t1", "completed", "2026-01-01T01:00:00Z"),
            turn("t2", "failed", "2026-01-01T02:00:00Z", "turn_failed"),
        ]
    )
    fs = doc["projection"]["first_screen"]
    assert fs["latest_blocker"] == "turn t2 failed: turn_failed"
    assert doc["waiting_on"] == "external_evidence"
    assert doc["answers"]["latest_run"].startswith("blocked: turn t2 failed")


def test_completed_turn_is_the_latest_validation() -> None:
    doc = status_for(turns=[turn("t1", "completed", "2026-01-01T01:00:00Z")])
    assert doc["projection"]["first_screen"]["latest_validation"] == "turn t1 completed (12 tokens)"
    assert doc["waiting_on"] == "monitor_signal"


def test_session_from_another_home_is_gated_without_paths() -> None:
    doc = status_for(sessions=[session(codex_home="/Users/me/other-home")])
    fs = doc["projection"]["first_screen"]
    assert fs["user_action_required"] is True
    assert "another Codex home" in fs["first_user_todo"]
    text = json.dumps(doc)
    assert "/Users/me" not in text  # neither home nor work dir leaks


def test_handoff_is_pending_until_a_turn_completes_after_it() -> None:
    from loopx_chat.goals.gate_store import Handoff

    packet = Handoff("handoff-1", "g", "wire the adapter", "tests pass", (), "2026-01-01T01:30:00Z")
    before = status_for(handoffs=[packet], turns=[turn("t1", "completed", "2026-01-01T01:00:00Z")])
    assert before["waiting_on"] == "codex"
    assert before["projection"]["first_screen"]["first_agent_todo"] == "wire the adapter"
    after = status_for(handoffs=[packet], turns=[turn("t2", "completed", "2026-01-01T02:00:00Z")])
    assert after["waiting_on"] == "monitor_signal"


def test_project_cli_errors_are_clear() -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["project", "--input", "-"], input="{nope")
    assert bad.exit_code == 1 and "input_invalid" in bad.stderr
    arr = runner.invoke(main, ["project", "--input", "-"], input="[1,2]")
    assert arr.exit_code == 1 and "JSON object" in arr.stderr


def test_project_cli_never_copies_raw_values() -> None:
    doc = {
        "goal_id": "g",
        "sessions": [{"session_id": "s", "next_action": "go", "raw_transcript": "CANARY-T"}],
        "events": [
            {"event_id": "e", "kind": "blocker", "status": "blocked", "message": "CANARY-M"}
        ],
    }
    for extra in ([], ["--compact"]):
        result = CliRunner().invoke(
            main, ["project", "--input", "-", *extra], input=json.dumps(doc)
        )
        assert result.exit_code == 0, result.output
        assert "CANARY" not in result.stdout
        assert json.loads(result.stdout)["boundary"]["raw_material_detected"] is True

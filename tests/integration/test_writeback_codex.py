"""Controlled writeback applied to a live Codex thread (real codex + mock): gate and handoff
onto the thread goal, idempotency, exact revert, a closed host, and a raw payload refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.host_writeback import WritebackService
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.real_codex import make_controller
from tests.helpers.waiting import wait_for


def host_goal(c: ChatController, sid: str) -> dict[str, Any] | None:
    with c.thread_metadata(sid) as call:
        goal = call("thread/goal/get", {}).get("goal")
    return {"objective": goal["objective"], "status": goal["status"]} if goal else None


def held_call(c: ChatController, sid: str, method: str, params: dict[str, Any]) -> Any:
    """A call through the app-server that holds the session's thread (loaded if need be):
    codex takes a goal of origin `user` only from the thread's writer."""
    with c.held_thread(sid) as warm:
        params = {"threadId": warm.thread.thread_id, **params}
        return warm.thread.proc.request(method, params, 30)


def host_turns(c: ChatController, sid: str) -> int:
    """How many turns codex itself has on the thread (read from disk, nothing loaded)."""
    with c.thread_metadata(sid) as call:
        return len(call("thread/read", {"includeTurns": True})["thread"]["turns"])


def test_gate_and_handoff_written_back_and_reverted(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    goals = GateStore(state)
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        sid = c.open_session("g-wb", tmp_path).session_id
        c.submit_turn(sid, "first turn")
        user = {"objective": "user goal", "status": "paused", "origin": "user"}
        held_call(c, sid, "thread/goal/set", user)
        service = WritebackService(c, goals)
        gate = goals.request_gate("g-wb", "Ship it?")

        preview = service.preview("g-wb", gate.gate_id)
        assert preview["status"] == "previewed"
        assert preview["host_after"] == {"objective": "user goal", "status": "blocked"}
        assert host_goal(c, sid) == {"objective": "user goal", "status": "paused"}  # dry run

        applied = service.apply("g-wb", gate.gate_id)
        assert applied["status"] == "applied"
        assert host_goal(c, sid) == {"objective": "user goal", "status": "blocked"}
        # Written by an app-server that loads no thread; the one holding it sees it too.
        held = held_call(c, sid, "thread/goal/get", {})["goal"]
        assert (held["objective"], held["status"]) == ("user goal", "blocked")
        assert service.apply("g-wb", gate.gate_id)["status"] == "skipped"  # idempotent

        packet = goals.record_handoff("g-wb", "merge the fix", "merged", ())
        handed = service.apply("g-wb", packet.handoff_id)
        assert handed["status"] == "applied"
        assert host_goal(c, sid) == {"objective": "merge the fix", "status": "paused"}

        reverted = service.revert("g-wb", handed["idempotency_key"])
        assert reverted["status"] == "reverted"
        assert host_goal(c, sid) == {"objective": "user goal", "status": "blocked"}

        goals.resolve_gate("g-wb", gate.gate_id, "approve", None)
        resolved = service.apply("g-wb", gate.gate_id)
        assert resolved["status"] == "applied"
        assert host_goal(c, sid) == {"objective": "user goal", "status": "paused"}  # prior back
        assert goals.gate("g-wb", gate.gate_id).status == "approved"  # the decision stands
    log = (state / "goals" / "g-wb" / "writebacks.jsonl").read_text()
    assert "Ship it?" not in log


def test_revert_clears_a_goal_that_did_not_exist(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    goals = GateStore(state)
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        sid = c.open_session("g2", tmp_path).session_id
        c.submit_turn(sid, "hello")
        service = WritebackService(c, goals)
        gate = goals.request_gate("g2", "Go?")
        applied = service.apply("g2", gate.gate_id)
        assert host_goal(c, sid) == {
            "objective": "loopx-chat goal g2: owner gate pending",
            "status": "blocked",
        }
        service.revert("g2", applied["idempotency_key"])
        assert host_goal(c, sid) is None


def test_closed_host_fails_and_raw_payload_is_rejected_unsent(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = tmp_path / "state"
    goals = GateStore(state)
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        sid = c.open_session("g3", tmp_path).session_id
        c.submit_turn(sid, "hello")
    gate = goals.request_gate("g3", "Go?")
    # The host is unreachable: no codex binary for this controller.
    with make_controller(state, bound_home, base_env, str(tmp_path / "no-codex")) as dead:
        failed = WritebackService(dead, goals).apply("g3", gate.gate_id)
    assert (failed["status"], failed["reason_code"]) == ("failed", "host_tool_unavailable")
    assert goals.gate("g3", gate.gate_id).status == "pending"  # the decision is unchanged

    with make_controller(state, bound_home, base_env, codex_bin) as fresh:
        raw = {
            "decision_id": gate.gate_id,
            "decision_label": "requested",
            "raw_transcript": "CANARY-raw-body",
        }
        recorded = WritebackService.source_for  # the gate's source, with a raw payload
        monkeypatch.setattr(
            WritebackService,
            "source_for",
            lambda self, goal_id, ref: replace(recorded(self, goal_id, ref), payload=raw),
        )
        rejected = WritebackService(fresh, goals).apply("g3", gate.gate_id)
        assert fresh.warm_pids() == {}  # nothing was sent: no app-server even started
    assert rejected["status"] == "rejected" and rejected["blocker"]
    assert "CANARY" not in str(rejected)
    log = (state / "goals" / "g3" / "writebacks.jsonl").read_text()
    assert "CANARY" not in log and '"rejected"' in log and '"failed"' in log


def test_writeback_cli(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    import json

    from click.testing import CliRunner

    from loopx_chat.cli import main

    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        c.submit_turn(c.open_session("g4", tmp_path).session_id, "hello")
    packet = GateStore(state).record_handoff("g4", "write the docs", "docs merged", ())
    base = ["--state-dir", str(state), "--codex-bin", codex_bin, "writeback"]
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    run = lambda *a: CliRunner().invoke(main, [*base, *a, "--json"], env=env)  # noqa: E731
    preview = run("preview", packet.handoff_id, "--goal", "g4")
    assert preview.exit_code == 0, preview.output
    assert json.loads(preview.stdout)["host_after"]["objective"] == "write the docs"
    applied = json.loads(run("apply", packet.handoff_id, "--goal", "g4").stdout)
    assert applied["status"] == "applied"
    listed = json.loads(run("list", "--goal", "g4").stdout)["writebacks"]
    assert [w["status"] for w in listed] == ["applied"]
    reverted = run("revert", applied["idempotency_key"], "--goal", "g4")
    assert reverted.exit_code == 0 and json.loads(reverted.stdout)["status"] == "reverted"
    again = run("revert", applied["idempotency_key"], "--goal", "g4")
    assert (
        again.exit_code == 1 and json.loads(again.stdout)["error_code"] == "writeback_not_applied"
    )


def test_a_third_party_change_is_a_conflict_and_nothing_changes(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    from loopx_chat.errors import LoopxChatError

    state = tmp_path / "state"
    goals = GateStore(state)
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        sid = c.open_session("g-cf", tmp_path).session_id
        c.submit_turn(sid, "hello")
        user = {"objective": "user goal", "status": "paused", "origin": "user"}
        held_call(c, sid, "thread/goal/set", user)
        service = WritebackService(c, goals)
        packet = goals.record_handoff("g-cf", "merge the fix", "merged", ())
        applied = service.apply("g-cf", packet.handoff_id)
        assert host_goal(c, sid) == {"objective": "merge the fix", "status": "paused"}
        # Someone else edits the goal after our write: revert must not clobber it.
        third = {"objective": "their goal", "status": "paused", "origin": "user"}
        held_call(c, sid, "thread/goal/set", third)
        log_before = (state / "goals" / "g-cf" / "writebacks.jsonl").read_bytes()
        with pytest.raises(LoopxChatError) as info:
            service.revert("g-cf", applied["idempotency_key"])
        assert info.value.error_code == "writeback_conflict"
        assert "their goal" in info.value.message and "merge the fix" in info.value.message
        assert host_goal(c, sid) == {"objective": "their goal", "status": "paused"}
        gate = goals.request_gate("g-cf", "Ship it?")
        with pytest.raises(LoopxChatError) as info:
            service.apply("g-cf", gate.gate_id)
        assert info.value.error_code == "writeback_conflict"
        assert host_goal(c, sid) == {"objective": "their goal", "status": "paused"}
        assert (state / "goals" / "g-cf" / "writebacks.jsonl").read_bytes() == log_before


def test_a_resolution_whose_request_was_never_written_leaves_the_user_goal(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    from loopx_chat.errors import LoopxChatError

    state = tmp_path / "state"
    goals = GateStore(state)
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        sid = c.open_session("g-nw", tmp_path).session_id
        other = c.open_session("g-other", tmp_path).session_id
        c.submit_turn(sid, "hello")
        user = {"objective": "user goal", "status": "paused", "origin": "user"}
        held_call(c, sid, "thread/goal/set", user)
        service = WritebackService(c, goals)
        gate = goals.request_gate("g-nw", "Go?")
        goals.resolve_gate("g-nw", gate.gate_id, "approve", None)
        done = service.apply("g-nw", gate.gate_id)
        assert (done["status"], done["reason_code"]) == ("skipped", "request_not_written")
        assert host_goal(c, sid) == {"objective": "user goal", "status": "paused"}
        with pytest.raises(LoopxChatError) as info:  # another goal's thread
            service.preview("g-nw", gate.gate_id, session_id=other)
        assert info.value.error_code == "session_goal_mismatch"
        keys = {service.preview("g-nw", gate.gate_id, session_id=s)["plan"]["writeback"][
            "idempotency_key"] for s in (sid,)}  # fmt: skip
        assert all(sid in k for k in keys)


def test_preview_apply_and_revert_start_no_turn_even_on_an_active_goal(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
) -> None:
    """The user's goal is `active`: codex continues such a goal on its own as soon as the
    thread is loaded. Writeback reads and sets it without loading the thread, so the model
    sees no request and the thread gains no turn through preview, apply and revert."""
    state = tmp_path / "state"
    goals = GateStore(state)
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        sid = c.open_session("g-nt", tmp_path).session_id
        c.submit_turn(sid, "hello")
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        with c.thread_metadata(sid) as call:
            user = {"objective": "user goal", "status": "active", "origin": "user"}
            call("thread/goal/set", user)
        requests, turns = len(mock.requests), host_turns(c, sid)
        assert (requests, turns) == (1, 1)
        service = WritebackService(c, goals)
        gate = goals.request_gate("g-nt", "Ship it?")

        preview = service.preview("g-nt", gate.gate_id)
        assert preview["host_before"]["status"] == "active"
        assert (len(mock.requests), host_turns(c, sid)) == (requests, turns)

        applied = service.apply("g-nt", gate.gate_id)
        assert applied["status"] == "applied"
        assert host_goal(c, sid) == {"objective": "user goal", "status": "blocked"}
        assert (len(mock.requests), host_turns(c, sid)) == (requests, turns)

        assert service.revert("g-nt", applied["idempotency_key"])["status"] == "reverted"
        assert host_goal(c, sid) == {"objective": "user goal", "status": "active"}
        assert (len(mock.requests), host_turns(c, sid)) == (requests, turns)
        assert c.warm_pids() == {}  # no thread was ever loaded

        # The oracle can fail: loading the thread (what writeback did before) makes codex
        # continue the active goal by itself, with model requests nobody asked for.
        c.resume_session(sid)
        wait_for(lambda: len(mock.requests) > requests)


def test_the_cli_names_reward_quota_and_artifact_classes_and_records_them_skipped(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
) -> None:
    import json

    from click.testing import CliRunner

    from loopx_chat.cli import main
    from loopx_chat.goals.goal_ledger import GoalLedger

    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        sid = c.open_session("g5", tmp_path).session_id
        turn = c.submit_turn(sid, "hello").turn
    reward = GoalLedger(GateStore(state)).record_reward(
        "g5", run_ref=turn.turn_id, label="good", reason="tidy", goal_turns={turn.turn_id}
    )
    base = ["--state-dir", str(state), "--codex-bin", codex_bin]
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    run = lambda *a: CliRunner().invoke(main, [*base, *a, "--json"], env=env)  # noqa: E731
    quota = json.loads(run("quota", "--goal", "g5").stdout)["decisions"][0]
    assert quota["decision"] == "waiting"  # nothing to do: the contract's quiet skip
    sources = {
        reward["reward_id"]: ("human_reward_overlay", "label", "good"),
        quota["decision_id"]: ("quota_decision_hint", "hint", "monitor_quiet_skip"),
        turn.turn_id: ("artifact_pointer", "outcome_class", "completed"),
    }
    for ref, (write_class, key, value) in sources.items():
        preview = run("writeback", "preview", ref, "--goal", "g5")
        assert preview.exit_code == 0, preview.output
        doc = json.loads(preview.stdout)
        assert doc["status"] == "previewed" and "unsupported_class" in doc["host_after"]
        assert (doc["write_class"], doc["payload"][key]) == (write_class, value)
        applied = run("writeback", "apply", ref, "--goal", "g5")
        assert applied.exit_code == 0, applied.output
        result = json.loads(applied.stdout)
        assert (result["status"], result["reason_code"]) == ("skipped", "unsupported_class")
        assert result["write_class"] == write_class
    listed = json.loads(run("writeback", "list", "--goal", "g5").stdout)["writebacks"]
    assert [(w["write_class"], w["status"]) for w in listed] == [
        (cls, "skipped") for cls, _, _ in sources.values()
    ]
    unknown = run("writeback", "apply", "nope-1", "--goal", "g5")
    assert unknown.exit_code == 1
    assert json.loads(unknown.stdout)["error_code"] == "writeback_no_source"
    assert len(mock.requests) == 1  # only the one real turn reached the model
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        assert host_goal(c, sid) is None  # the thread goal was never touched

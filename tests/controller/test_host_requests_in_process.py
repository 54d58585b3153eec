"""The owner's decision on what Codex asks, end to end in-process: a recorded approval of the
pinned codex (tests/fixtures/codex-transcripts) reaches the host-request desk through the
connection's holder, the owner decides, and the desk's answer goes back through
`HostConnection.reply`, once. The same paths run on the real codex in
tests/integration/test_host_gates_service.py and test_approval_policy.py; these show them
without a process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loopx_chat.codex.thread import CodexThread
from loopx_chat.controller.host_requests import Choice, HostRequestDesk, reply_for
from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import GateStore
from tests.helpers.fakes.replay import Answer
from tests.helpers.fakes.scripted_host import Script, ScriptedCodex, asking_thread


@pytest.fixture
def desk(tmp_path: Path) -> HostRequestDesk:
    return HostRequestDesk(GateStore(tmp_path / "state"), decision_timeout=600)


def _thread(tmp_path: Path, codex: ScriptedCodex, desk: HostRequestDesk) -> CodexThread:
    thread: CodexThread = asking_thread(tmp_path, codex, desk.take)
    desk.bind(str(thread.thread_id), "s", "g")
    return thread


@pytest.mark.parametrize("decision", ["approve", "decline"])
def test_the_owners_decision_is_codexs_answer_once_and_the_turn_goes_on(
    tmp_path: Path, desk: HostRequestDesk, decision: str
) -> None:
    codex = ScriptedCodex(Script(answers={"turn/start": Answer("approval", "turn/start")}))
    thread = _thread(tmp_path, codex, desk)
    turn_id, _ = thread.start_turn("mock:shell=touch approval-probe")
    (live,) = desk.live_gates()
    host = codex.hosts[0]
    assert host.decisions == []  # held: codex waits on the owner, nothing answered it
    assert not any(m.get("method") == "turn/completed" for m in host.sent)

    gate = desk.decide("g", live.gate_id, Choice(decision), actor="owner-cli")

    # codex went on once answered (the scripted host plays on as the answer arrives; checked
    # before waiting on the turn, which waits as long as codex waits on the owner)
    assert any(m.get("method") == "turn/completed" for m in host.sent)
    assert thread.wait_turn(turn_id).status == "completed"
    (answered,) = host.decisions
    assert answered["id"] == live.request.request_id
    assert answered["result"] == reply_for(live.kind, live.request.params, Choice(decision))
    assert gate.status == ("approved" if decision == "approve" else "rejected")
    assert (gate.host or {}).get("state") == "answered"
    with pytest.raises(StateError) as again:
        desk.decide("g", live.gate_id, Choice("approve"), actor="owner-cli")
    assert again.value.error_code == "gate_already_resolved"
    assert len(host.decisions) == 1  # a second decision never reaches codex
    assert desk.live_gates() == []
    thread.close()


def test_a_decision_after_codex_is_gone_is_recorded_and_never_sent(
    tmp_path: Path, desk: HostRequestDesk
) -> None:
    codex = ScriptedCodex(Script(answers={"turn/start": Answer("approval", "turn/start")}))
    thread = _thread(tmp_path, codex, desk)
    thread.start_turn("mock:shell=touch approval-probe")
    (live,) = desk.live_gates()
    codex.hosts[0].close()  # the app-server ended while the owner was away

    gate = desk.decide("g", live.gate_id, Choice("approve"), actor="owner-cli")

    assert codex.hosts[0].decisions == []
    assert gate.status == "approved" and (gate.host or {}).get("state") != "answered"
    thread.close()


def test_when_the_window_passes_a_run_here_takes_the_gate_before_codex_hears_the_answer(
    tmp_path: Path,
) -> None:
    # Under load a run took the gate (and set its goal `blocked`) after the window's decline
    # had reached codex, which then started a continuation turn on a goal still `active`.
    desk = HostRequestDesk(GateStore(tmp_path / "state"), decision_timeout=0.2)
    codex = ScriptedCodex(Script(answers={"turn/start": Answer("approval", "turn/start")}))
    thread = _thread(tmp_path, codex, desk)
    host = codex.hosts[0]
    seen: list[tuple[str, str, int]] = []

    def run_takes_it(goal_id: str, gate_id: str) -> None:
        time.sleep(0.3)  # a run slow to take its inbox: codex must still be waiting after
        seen.append((goal_id, gate_id, len(host.decisions)))

    desk.before_window = run_takes_it
    turn_id, _ = thread.start_turn("mock:shell=touch approval-probe")
    (live,) = desk.live_gates()
    assert thread.wait_turn(turn_id).status == "completed"  # ends once the window answered
    assert seen == [("g", live.gate_id, 0)]
    (answered,) = host.decisions
    assert answered["id"] == live.request.request_id
    thread.close()

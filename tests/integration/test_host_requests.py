"""What codex asks reaches its owner: approvals and questions from the real pinned codex
become live host gates, decided through the desk, against the loopback mock."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.thread import ThreadOptions, Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.controller.host_requests import Choice, Live
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.status import collect_status
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore


@pytest.fixture
def make(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> Iterator[Callable[..., ChatController]]:
    made: list[ChatController] = []

    def build(
        decision_timeout: float = 60.0, timeouts: Timeouts | None = None, **options: Any
    ) -> ChatController:
        options.setdefault("approval_policy", "untrusted")
        controller = ChatController(
            store=SessionStore(tmp_path / "state"),
            environ={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
            cwd=tmp_path,
            codex_bin=codex_bin,
            config=ControllerConfig(
                options=ThreadOptions(sandbox="workspace-write", **options),
                decision_timeout=decision_timeout,
                timeouts=timeouts or Timeouts(),
            ),
        )
        made.append(controller)
        return controller

    yield build
    for controller in made:
        controller.close()


def _work(tmp_path: Path, name: str = "work") -> Path:
    work = tmp_path / name
    work.mkdir()
    return work


def _turn(c: ChatController, session_id: str, text: str) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = c.submit_turn(session_id, text)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def _asked(c: ChatController, timeout: float = 30.0) -> Live:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = c.host_requests.live_gates()
        if live:
            return live[0]
        time.sleep(0.02)
    raise AssertionError("codex asked nothing")


def _done(thread: threading.Thread, box: dict[str, Any]) -> Any:
    thread.join(60)
    assert not thread.is_alive()
    if "error" in box:
        raise box["error"]
    return box["result"]


@pytest.mark.parametrize(
    ("choice", "exists", "status"),
    [
        (Choice("approve"), True, "approved"),
        (Choice("decline"), False, "rejected"),
        (Choice("cancel"), False, "rejected"),
    ],
    ids=["approve", "decline", "cancel"],
)
def test_the_owners_decision_reaches_the_live_command(
    tmp_path: Path,
    make: Callable[..., ChatController],
    mock: MockResponsesServer,
    choice: Choice,
    exists: bool,
    status: str,
) -> None:
    work = _work(tmp_path)
    c = make()
    session = c.open_session("g", work)
    thread, box = _turn(c, session.session_id, f"mock:shell=touch {work}/f")
    live = _asked(c)
    assert live.kind == "command" and f"{work}/f" in live.details["command"]
    gate = GateStore(tmp_path / "state").gate("g", live.gate_id)
    assert gate.status == "pending" and gate.blocking
    assert gate.question == "Codex asks to run `touch` (1 argument)"
    assert gate.host is not None and gate.host["program"] == "touch" and gate.host["argc"] == 1
    decided = c.host_requests.decide("g", live.gate_id, choice, actor="owner-api")
    result = _done(thread, box)
    assert (work / "f").exists() is exists
    assert decided.status == status and decided.decided_by == "owner-api"
    assert decided.host is not None and decided.host["state"] == "answered"
    assert decided.host["decided_after_ms"] >= 0
    assert result.turn.status == ("interrupted" if choice.decision == "cancel" else "completed")


def test_approve_for_the_session_is_not_asked_again_in_that_thread(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    work = _work(tmp_path)
    c = make()
    session = c.open_session("g", work)
    thread, box = _turn(c, session.session_id, f"mock:shell=touch {work}/f")
    live = _asked(c)
    c.host_requests.decide(
        "g", live.gate_id, Choice("approve", for_session=True), actor="owner-api"
    )
    _done(thread, box)
    (work / "f").unlink()
    result = c.submit_turn(session.session_id, f"mock:shell=touch {work}/f")
    assert result.turn.status == "completed"
    assert (work / "f").exists()  # ran without asking
    assert len(GateStore(tmp_path / "state").gates("g")) == 1


def test_a_canary_in_the_command_and_its_cwd_is_stored_nowhere(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    canary = "CANARY7f3a"
    work = _work(tmp_path)
    sub = work / f"cwd-{canary}"
    sub.mkdir()
    c = make()
    session = c.open_session("g", work)
    call = {"cmd": f"touch {sub}/{canary}-arg --x={canary}", "workdir": str(sub)}
    thread, box = _turn(c, session.session_id, f"mock:call=exec_command {json.dumps(call)}")
    live = _asked(c)
    assert canary in live.details["command"] and canary in live.details["cwd"]
    c.host_requests.decide("g", live.gate_id, Choice("decline"), actor="owner-api")
    _done(thread, box)
    c.close()
    state = tmp_path / "state"
    doc = collect_status(SessionStore(state), GateStore(state), "home")
    assert canary not in json.dumps(doc)
    for path in state.rglob("*"):
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), path


def _question(secret: bool = False) -> str:
    question: dict[str, Any] = {
        "id": "db",
        "header": "Database",
        "question": "Which database should I use?",
        "options": [
            {"label": "SQLite", "description": "small"},
            {"label": "Postgres", "description": "big"},
        ],
    }
    if secret:
        question["isSecret"] = True
    return "mock:call=request_user_input " + json.dumps({"questions": [question]})


def test_a_question_in_plan_mode_is_answered_and_the_model_sees_the_answer(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    c = make(approval_policy="never", plan=True)
    session = c.open_session("g", _work(tmp_path))
    thread, box = _turn(c, session.session_id, _question())
    live = _asked(c)
    assert live.kind == "question"
    assert live.details["questions"][0]["question"] == "Which database should I use?"
    gate = GateStore(tmp_path / "state").gate("g", live.gate_id)
    assert gate.question == "Codex asks: Database (SQLite / Postgres)"
    assert "Which database" not in json.dumps(gate.to_dict())
    c.host_requests.decide(
        "g", live.gate_id, Choice("answer", answer="Postgres, with pgvector"), actor="owner-page"
    )
    _done(thread, box)
    outputs = mock.requests[-1]["tool_outputs"]
    assert any("Postgres, with pgvector" in o for o in outputs), outputs


def test_a_secret_answer_reaches_the_model_and_is_written_nowhere(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    secret = "hunter2-SECRET-9d1"
    c = make(approval_policy="never", plan=True)
    session = c.open_session("g", _work(tmp_path))
    thread, box = _turn(c, session.session_id, _question(secret=True))
    live = _asked(c)
    assert live.details["questions"][0]["secret"] is True
    gate = c.host_requests.decide(
        "g", live.gate_id, Choice("answer", answer=secret), actor="owner-page"
    )
    assert gate.host is not None and gate.host["secret"] is True and "answer" not in gate.host
    _done(thread, box)
    assert any(secret in o for o in mock.requests[-1]["tool_outputs"])
    c.close()
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_the_window_passes_then_a_late_decision_is_carried_into_the_next_turn(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    work = _work(tmp_path)
    c = make(decision_timeout=1.0)
    session = c.open_session("g", work)
    started = time.monotonic()
    result = c.submit_turn(session.session_id, f"mock:shell=touch {work}/f")
    assert time.monotonic() - started >= 1.0
    assert result.turn.status == "completed" and not (work / "f").exists()
    goals = GateStore(tmp_path / "state")
    (gate,) = goals.gates("g")
    assert gate.status == "pending" and gate.host is not None
    assert gate.host["state"] == "window_passed"
    decided = c.host_requests.decide("g", gate.gate_id, Choice("approve"), actor="owner-cli")
    assert decided.status == "approved" and decided.host is not None
    assert decided.host["state"] == "window_passed"  # it could not reach codex
    c.submit_turn(session.session_id, "mock:text=next")
    line = "[loopx-chat] The owner approved running `touch` (1 argument); run it again."
    assert any(line in t for t in mock.requests[-1]["user_texts"])
    c.submit_turn(session.session_id, "mock:text=again")
    assert not any(line in t for t in mock.requests[-1]["user_texts"][-1:])  # carried once


def test_time_waiting_on_the_owner_counts_for_neither_timeout(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    work = _work(tmp_path)
    c = make(timeouts=Timeouts(idle=1.0, hard=2.0))
    session = c.open_session("g", work)
    thread, box = _turn(c, session.session_id, f"mock:shell=touch {work}/f")
    live = _asked(c)
    time.sleep(3.0)  # past both the idle and the whole-turn limit
    assert thread.is_alive()
    c.host_requests.decide("g", live.gate_id, Choice("approve"), actor="owner-api")
    result = _done(thread, box)
    assert result.turn.status == "completed" and result.turn.error_code is None
    assert (work / "f").exists()


def test_an_escalation_shows_its_justification_live_and_stores_it_nowhere(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    why = "JUSTIFY-4c1d: the build needs the network"
    work = _work(tmp_path)
    c = make(approval_policy="on-request")
    session = c.open_session("g", work)
    call = {
        "cmd": f"touch {work}/f",
        "sandbox_permissions": "require_escalated",
        "justification": why,
    }
    thread, box = _turn(c, session.session_id, f"mock:call=exec_command {json.dumps(call)}")
    live = _asked(c)
    assert live.details["reason"] == why
    c.host_requests.decide("g", live.gate_id, Choice("decline"), actor="owner-api")
    _done(thread, box)
    c.close()
    assert not (work / "f").exists()
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert b"JUSTIFY-4c1d" not in path.read_bytes(), path

"""What codex asks reaches its owner: approvals and questions from the real pinned codex
become live host gates, decided through the desk, against the loopback mock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.mock_responses import MockResponsesServer
from loopx_chat.codex.thread import ThreadOptions
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.controller.host_requests import Choice, Live
from loopx_chat.goals.goal_store import GoalStore
from loopx_chat.state.session_store import SessionStore


@pytest.fixture
def make(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> Iterator[Callable[..., ChatController]]:
    made: list[ChatController] = []

    def build(decision_timeout: float = 60.0, **options: Any) -> ChatController:
        options.setdefault("approval_policy", "untrusted")
        controller = ChatController(
            store=SessionStore(tmp_path / "state"),
            environ={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
            cwd=tmp_path,
            codex_bin=codex_bin,
            config=ControllerConfig(
                options=ThreadOptions(sandbox="workspace-write", **options),
                decision_timeout=decision_timeout,
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
    gate = GoalStore(tmp_path / "state").gate("g", live.gate_id)
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

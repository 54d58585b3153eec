"""What codex asks beyond one approval, from the real pinned codex against the loopback mock:
a request of several questions answered per question id (through the desk, `gate resolve
--answer ID=TEXT`, the page in Chromium, and a foreground chat's terminal), the window
telling the model the owner has not answered, and an MCP server's `elicitation/create`
(from a real stdio MCP server of the test) become host gates answered to codex."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.thread import ThreadOptions, Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.controller.host_requests import NOT_ANSWERED, Choice, Live
from loopx_chat.errors import UsageError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore
from tests.helpers.push_apis import PushReceiver, push_env
from tests.helpers.terminal import read_until
from tests.helpers.waiting import joined, run_in_thread, wait_value

ASKER = Path(__file__).resolve().parents[1] / "helpers" / "mcp_asking_server.py"


@pytest.fixture
def make(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> Iterator[Callable[..., ChatController]]:
    made: list[ChatController] = []

    def build(decision_timeout: float = 60.0, **options: Any) -> ChatController:
        controller = ChatController(
            store=SessionStore(tmp_path / "state"),
            environ={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
            cwd=tmp_path,
            codex_bin=codex_bin,
            config=ControllerConfig(
                options=ThreadOptions(sandbox="workspace-write", **options),
                decision_timeout=decision_timeout,
                timeouts=Timeouts(),
            ),
        )
        made.append(controller)
        return controller

    yield build
    for controller in made:
        controller.close()


def _turn(c: ChatController, session_id: str, text: str) -> tuple[threading.Thread, Any]:
    return run_in_thread(lambda: c.submit_turn(session_id, text))


def _asked(c: ChatController, skip: set[str] | None = None, timeout: float = 30.0) -> Live:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = [g for g in c.host_requests.live_gates() if g.gate_id not in (skip or set())]
        if live:
            return live[0]
        time.sleep(0.02)
    raise AssertionError("codex asked nothing")


def _two_questions(secret: bool = False) -> str:
    token: dict[str, Any] = {
        "id": "token",
        "header": "Token",
        "question": "Which token should I use?",
        "options": [{"label": "the old one", "description": "kept"}],
    }
    if secret:
        token["isSecret"] = True
    questions = [
        {
            "id": "db",
            "header": "Database",
            "question": "Which database should I use?",
            "options": [
                {"label": "SQLite", "description": "small"},
                {"label": "Postgres", "description": "big"},
            ],
        },
        token,
    ]
    return "mock:call=request_user_input " + json.dumps({"questions": questions})


def _answers_seen(mock: MockResponsesServer) -> dict[str, list[str]]:
    """The `answers` the model got for its request_user_input call (the last tool output)."""
    output = json.loads(mock.requests[-1]["tool_outputs"][-1])
    return {qid: entry["answers"] for qid, entry in output["answers"].items()}


def _scan(root: Path, canary: str) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), path


def test_two_questions_are_answered_each_on_its_own_id_and_a_secret_one_is_kept_nowhere(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    canary = "CANARY-token-6e0f"
    work = tmp_path / "work"
    work.mkdir()
    c = make(approval_policy="never", plan=True)
    session = c.open_session("g", work)
    thread, box = _turn(c, session.session_id, _two_questions(secret=True))
    live = _asked(c)
    assert [q["id"] for q in live.details["questions"]] == ["db", "token"]
    goals = GateStore(tmp_path / "state")
    gate = goals.gate("g", live.gate_id)
    assert gate.question == "Codex asks: Database (SQLite / Postgres) and 1 more question"
    assert gate.host is not None
    assert [(q["id"], q["secret"]) for q in gate.host["questions"]] == [
        ("db", False),
        ("token", True),
    ]
    log = (tmp_path / "state" / "goals" / "g" / "gates.jsonl").read_bytes()
    with pytest.raises(UsageError) as bare:
        c.host_requests.decide("g", live.gate_id, Choice("answer", answer="x"), actor="owner-api")
    assert bare.value.error_code == "answer_needs_question_id"
    with pytest.raises(UsageError) as unknown:
        c.host_requests.decide(
            "g", live.gate_id, Choice("answer", answers=(("dbx", "x"),)), actor="owner-api"
        )
    assert unknown.value.error_code == "unknown_question_id"
    assert (tmp_path / "state" / "goals" / "g" / "gates.jsonl").read_bytes() == log
    decided = c.host_requests.decide(
        "g",
        live.gate_id,
        Choice("answer", answers=(("db", "Postgres, with pgvector"), ("token", canary))),
        actor="owner-page",
    )
    joined(thread, box)
    assert _answers_seen(mock) == {"db": ["Postgres, with pgvector"], "token": [canary]}
    assert decided.host is not None and decided.host["answers"] == {"db": "Postgres, with pgvector"}
    c.close()
    _scan(tmp_path / "state", canary)


def test_gate_resolve_answers_each_question_by_id_to_a_foreground_turn(
    tmp_path: Path,
    make: Callable[..., ChatController],
    mock: MockResponsesServer,
    base_env: dict[str, str],
    bound_home: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    c = make(approval_policy="never", plan=True)
    session = c.open_session("g", work)
    thread, box = _turn(c, session.session_id, _two_questions())
    live = _asked(c)
    state = tmp_path / "state"
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}

    def resolve(*answers: str) -> subprocess.CompletedProcess[str]:
        words = [a for answer in answers for a in ("--answer", answer)]
        return subprocess.run(
            [
                *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
                *("gate", "resolve", live.gate_id, "--goal", "g", "--decision", "approve"),
                "--json",
                *words,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    before = (state / "goals" / "g" / "gates.jsonl").read_bytes()
    bare = resolve("SQLite")
    assert bare.returncode != 0 and "Traceback" not in bare.stderr
    assert json.loads(bare.stdout or bare.stderr)["error_code"] == "answer_needs_question_id"
    assert (state / "goals" / "g" / "gates.jsonl").read_bytes() == before
    done = resolve("db=SQLite", "token=the old one")
    assert done.returncode == 0, done.stderr
    joined(thread, box)  # the foreground turn's desk picked the recorded answers up
    assert _answers_seen(mock) == {"db": ["SQLite"], "token": ["the old one"]}


def test_when_the_window_passes_each_question_is_told_the_owner_has_not_answered(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    c = make(decision_timeout=1.0, approval_policy="never", plan=True)
    session = c.open_session("g", work)
    c.submit_turn(session.session_id, _two_questions())
    assert _answers_seen(mock) == {"db": [NOT_ANSWERED], "token": [NOT_ANSWERED]}
    (gate,) = GateStore(tmp_path / "state").gates("g")
    assert gate.status == "pending" and gate.host is not None
    assert gate.host["state"] == "window_passed"


def test_when_the_window_passes_an_approval_is_declined_and_the_model_is_told_why(
    tmp_path: Path, make: Callable[..., ChatController], mock: MockResponsesServer
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    c = make(decision_timeout=1.0, approval_policy="untrusted")
    session = c.open_session("g", work)
    result = c.submit_turn(session.session_id, f"mock:shell=touch {work}/f")
    assert result.turn.status == "completed" and not (work / "f").exists()
    seen = mock.requests[-1]
    assert any("rejected by user" in o for o in seen["tool_outputs"])
    assert f"[loopx-chat] {NOT_ANSWERED}" in seen["user_texts"]  # the steer of the turn
    (gate,) = GateStore(tmp_path / "state").gates("g")
    assert gate.status == "pending" and gate.host is not None
    assert gate.host["state"] == "window_passed"


def _with_asker(home: Path) -> None:
    config = home / "config.toml"
    config.write_text(
        config.read_text()
        + f"\n[mcp_servers.asker]\ncommand = {json.dumps(sys.executable)}\n"
        + f"args = [{json.dumps(str(ASKER))}]\n"
    )


def _elicited(mock: MockResponsesServer) -> Any:
    """What the MCP server got back from codex, as its tool told the model."""
    output = mock.requests[-1]["tool_outputs"][-1]
    texts = [p["text"] for p in json.loads(output) if "elicited: " in p.get("text", "")]
    return json.loads(texts[0].split("elicited: ", 1)[1])


def test_an_mcp_servers_question_is_a_host_gate_answered_with_its_fields(
    tmp_path: Path,
    make: Callable[..., ChatController],
    mock: MockResponsesServer,
    bound_home: Path,
) -> None:
    canary = "CANARY-elicit-41aa"
    _with_asker(bound_home)
    work = tmp_path / "work"
    work.mkdir()
    c = make(approval_policy="on-request")
    session = c.open_session("g", work)
    call = {"message": f"What is your name? {canary}"}
    thread, box = _turn(c, session.session_id, f"mock:call=mcp__asker/ask {json.dumps(call)}")
    # First codex asks whether the MCP tool may run (an elicitation of its own) ...
    allow = _asked(c)
    assert allow.kind == "elicitation" and allow.details["tool_approval"] is True
    goals = GateStore(tmp_path / "state")
    gate = goals.gate("g", allow.gate_id)
    assert gate.question == "Codex asks to run the tool `ask` of the MCP server `asker`"
    assert any(canary in p["value"] for p in allow.details["tool_params"])
    c.host_requests.decide("g", allow.gate_id, Choice("approve"), actor="owner-page")
    # ... then the server's own question, with its two fields.
    ask = _asked(c, skip={allow.gate_id})
    assert ask.kind == "elicitation" and canary in ask.details["message"]
    assert sorted(f["id"] for f in ask.details["fields"]) == ["colour", "name"]  # codex sorts
    gate = goals.gate("g", ask.gate_id)
    assert gate.question == "The MCP server `asker` asks for input (2 fields)"
    assert gate.host is not None and gate.host["server"] == "asker" and gate.host["fields"] == 2
    with pytest.raises(UsageError) as missing:
        c.host_requests.decide(
            "g", ask.gate_id, Choice("answer", answers=(("colour", "green"),)), actor="owner-page"
        )
    assert missing.value.error_code == "answer_missing"
    c.host_requests.decide(
        "g",
        ask.gate_id,
        Choice("answer", answers=(("name", canary), ("colour", "green"))),
        actor="owner-page",
    )
    joined(thread, box)
    assert _elicited(mock) == {"action": "accept", "content": {"name": canary, "colour": "green"}}
    c.close()
    _scan(tmp_path / "state", canary)


@pytest.mark.parametrize("word", ["decline", "cancel"])
def test_an_mcp_servers_question_declined_or_cancelled_reaches_the_server_so(
    tmp_path: Path,
    make: Callable[..., ChatController],
    mock: MockResponsesServer,
    bound_home: Path,
    word: str,
) -> None:
    _with_asker(bound_home)
    work = tmp_path / "work"
    work.mkdir()
    c = make(approval_policy="on-request")
    session = c.open_session("g", work)
    thread, box = _turn(c, session.session_id, 'mock:call=mcp__asker/ask {"message": "Name?"}')
    allow = _asked(c)
    c.host_requests.decide("g", allow.gate_id, Choice("approve"), actor="owner-api")
    ask = _asked(c, skip={allow.gate_id})
    decided = c.host_requests.decide("g", ask.gate_id, Choice(word), actor="owner-api")
    result = joined(thread, box)
    assert _elicited(mock) == {"action": word}
    assert decided.status == "rejected" and result.turn.status == "completed"


RECORDER = r"""
import json, os, sys
with open(os.environ["STANDIN_LOG"], "a", encoding="utf-8") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
"""
CHROMIUM = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]


def _api(service: Any) -> Callable[..., tuple[int, bytes]]:
    """A bearer client of a `serve` process of the tests: (status, raw body)."""
    import http.client

    from loopx_chat.state.service_runtime import read_secret

    def call(method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=60)
        headers = {
            "Host": f"127.0.0.1:{service.port}",
            "Authorization": f"Bearer {read_secret(service.state)}",
            "Content-Type": "application/json",
        }
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        raw = response.read()
        conn.close()
        return response.status, raw

    return call


def _playwright() -> tuple[Any, str]:
    from tests.helpers.serve_process import chromium

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is needed (`make test` installs it)")
    return sync_playwright, chromium()


def _open_session(call: Callable[..., tuple[int, bytes]], work: Path, text: str) -> str:
    status, raw = call(
        "POST", "/api/chat/sessions", {"goal_id": "g", "work_dir": str(work), "create_goal": True}
    )
    assert status == 201, raw
    session_id = str(json.loads(raw)["session"]["session_id"])
    status, raw = call("POST", f"/api/chat/sessions/{session_id}/turns", {"text": text})
    assert status in (201, 202), raw
    return session_id


def test_the_page_shows_each_question_with_its_own_field_and_a_secret_answer_stays_unwritten(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
    start_service: Callable[..., Any],
) -> None:
    from loopx_chat.state.service_runtime import read_secret
    from tests.helpers.device import browser_sign_in

    sync_playwright, exe = _playwright()
    canary = "CANARY-page-secret-93b7"
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "recorder.py").write_text(RECORDER)
    standin = bindir / "notify-send"
    standin.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{bindir / "recorder.py"}" "$@"\n')
    standin.chmod(0o755)
    notices = tmp_path / "notices.log"
    env = {
        **base_env,
        "PATH": f"{bindir}:{base_env.get('PATH', '')}",
        "STANDIN_LOG": str(notices),
    }
    apis = {api: PushReceiver(api) for api in ("pushover", "telegram", "slack")}
    env |= push_env(apis)
    push = ("--push", "pushover", "--push", "telegram", "--push", "slack")
    service = start_service(
        state,
        bound_home,
        env,
        codex_bin,
        "--plan",
        "--notify",
        "desktop",
        *push,
        "--telegram-chat",
        "4242",
    )
    call = _api(service)
    _open_session(call, work, _two_questions(secret=True))
    goals = GateStore(state)
    gate = wait_value(lambda: [g for g in goals.gates("g") if g.host], what="the host gate")[0]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM)
        try:
            page = browser.new_context().new_page()
            browser_sign_in(page, service.port, read_secret(state) or "")
            card = page.locator(".gate.host")
            card.wait_for()
            db = card.locator('.q[data-qid="db"]')
            token = card.locator('.q[data-qid="token"]')
            assert "Which database should I use?" in db.inner_text()
            assert token.locator('input.answer[type="password"]').count() == 1
            assert db.locator('input.answer[type="text"]').count() == 1
            db.locator("button", has_text="Postgres").click()  # fills its own field only
            assert db.locator("input.answer").input_value() == "Postgres"
            token.locator("input.answer").fill(canary)
            # Another process's change redraws the cards: what was typed stays typed.
            goals.request_gate("other", "Ship the other thing?", actor="owner")
            page.locator('section.card[data-goal="other"]').wait_for()
            assert db.locator("input.answer").input_value() == "Postgres"
            assert token.locator("input.answer").input_value() == canary
            card.locator("button", has_text="Send answers").click()
            wait_value(lambda: goals.gate("g", gate.gate_id).status == "approved", what="decision")
        finally:
            browser.close()
    wait_value(
        lambda: any(canary in o for r in mock.requests for o in r["tool_outputs"]),
        what="the model to see the answer",
    )
    output = next(o for r in mock.requests for o in r["tool_outputs"] if canary in o)
    assert json.loads(output)["answers"] == {
        "db": {"answers": ["Postgres"]},
        "token": {"answers": [canary]},
    }
    _, status_doc = call("GET", "/status.json")
    assert canary.encode() not in status_doc
    service.stop()
    _scan(state, canary)  # gates, events, notices.jsonl, status files
    assert canary.encode() not in service.log.read_bytes()
    assert notices.exists() and canary.encode() not in notices.read_bytes()
    # Each push channel was told, and told the goal, the kind and the link only.
    for receiver in apis.values():
        receiver.close()
        assert receiver.seen and not receiver.refused, receiver.refused
        for seen in receiver.seen:
            assert canary.encode() not in seen.raw and b"database" not in seen.raw


def test_each_question_is_asked_in_turn_and_answered_on_its_own_id(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    message = _two_questions()
    work = tmp_path / "work"
    work.mkdir()
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(tmp_path / "state")),
            *("--codex-bin", codex_bin, "--direct", "chat", "new", "--goal", "g"),
            *("--cwd", str(work), "--plan", message),
        ],
        env={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    seen = bytearray()
    try:
        at = read_until(main, b"Which database should I use?", seen)
        at = read_until(main, b"your answer", seen, at)
        os.write(main, b"2\n")  # the second option
        at = read_until(main, b"Which token should I use?", seen, at)
        read_until(main, b"your answer", seen, at)
        os.write(main, b"main-db\n")
        assert proc.wait(60) == 0, bytes(seen)[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    output = json.loads(mock.requests[-1]["tool_outputs"][-1])
    assert output == {
        "answers": {"db": {"answers": ["Postgres"]}, "token": {"answers": ["main-db"]}}
    }


def test_when_the_window_passes_an_mcp_tool_approval_is_declined_and_the_model_is_told(
    tmp_path: Path,
    make: Callable[..., ChatController],
    mock: MockResponsesServer,
    bound_home: Path,
) -> None:
    _with_asker(bound_home)
    work = tmp_path / "work"
    work.mkdir()
    c = make(decision_timeout=1.0, approval_policy="on-request")
    session = c.open_session("g", work)
    result = c.submit_turn(session.session_id, 'mock:call=mcp__asker/ask {"message": "Name?"}')
    assert result.turn.status == "completed"
    seen = mock.requests[-1]
    assert f"[loopx-chat] {NOT_ANSWERED}" in seen["user_texts"]
    assert not any("elicited" in o for o in seen["tool_outputs"])  # the tool never ran
    (gate,) = GateStore(tmp_path / "state").gates("g")
    assert gate.host is not None and gate.host["kind"] == "elicitation"
    assert gate.status == "pending" and gate.host["state"] == "window_passed"


def test_the_page_shows_an_mcp_servers_fields_and_sends_what_the_owner_filled_in(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
    start_service: Callable[..., Any],
) -> None:
    from loopx_chat.state.service_runtime import read_secret
    from tests.helpers.device import browser_sign_in

    sync_playwright, exe = _playwright()
    canary = "CANARY-mcp-page-2c5d"
    _with_asker(bound_home)
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    service = start_service(
        state, bound_home, base_env, codex_bin, "--approval", "on-request", "--notify", "none"
    )

    call = _api(service)
    _open_session(call, work, 'mock:call=mcp__asker/ask {"message": "Who <b>are</b> you?"}')
    goals = GateStore(state)

    def pending() -> list[Any]:
        return [g for g in goals.gates("g") if g.host and g.status == "pending"]

    allow = wait_value(pending, what="codex's tool approval")[0]
    assert allow.question == "Codex asks to run the tool `ask` of the MCP server `asker`"
    status, doc = call(
        "POST", f"/api/goals/g/gates/{allow.gate_id}/decision", {"decision": "approve"}
    )
    assert status == 200, doc
    ask = wait_value(pending, what="the server's question")[0]
    # A bare answer to a request of two fields is refused over HTTP, nothing recorded.
    before = (state / "goals" / "g" / "gates.jsonl").read_bytes()
    status, raw = call(
        "POST", f"/api/goals/g/gates/{ask.gate_id}/decision", {"decision": "answer", "answer": "x"}
    )
    assert status == 400 and json.loads(raw)["error_code"] == "answer_needs_question_id"
    assert (state / "goals" / "g" / "gates.jsonl").read_bytes() == before
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM)
        try:
            page = browser.new_context().new_page()
            browser_sign_in(page, service.port, read_secret(state) or "")
            card = page.locator(f'.gate.host[data-gate="{ask.gate_id}"]')
            card.wait_for()
            assert "Who <b>are</b> you?" in card.inner_text()
            card.locator('input.answer[data-qid="name"]').fill(canary)
            card.locator('select.answer[data-qid="colour"]').select_option("green")
            card.locator("button", has_text="Accept").click()
            wait_value(lambda: goals.gate("g", ask.gate_id).status == "approved", what="decision")
        finally:
            browser.close()
    wait_value(
        lambda: any(canary in o for r in mock.requests for o in r["tool_outputs"]),
        what="the model to see the answer",
    )
    got = next(o for r in mock.requests for o in r["tool_outputs"] if canary in o)
    texts = [p["text"] for p in json.loads(got) if "elicited: " in p.get("text", "")]
    assert json.loads(texts[0].split("elicited: ", 1)[1]) == {
        "action": "accept",
        "content": {"name": canary, "colour": "green"},
    }
    service.stop()
    _scan(state, canary)
    assert canary.encode() not in service.log.read_bytes()

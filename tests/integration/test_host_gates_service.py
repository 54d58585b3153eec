"""A real `serve --approval untrusted` with the real codex: the approval reaches the page and
a signed webhook, `gate resolve` answers it through the service, nothing of the command is
stored, and a service killed with a request pending leaves `expired: host restarted`."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import read_secret
from tests.helpers.waiting import wait_value as _until
from tests.helpers.webhooks import Verifier, state_webhook_secret

CANARY = "CANARY5b2e"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Receiver:
    """A real loopback webhook receiver; `hang`: it holds every POST that long first."""

    def __init__(self, secret_of: Any, hang: float = 0.0) -> None:
        self.posts: list[dict[str, Any]] = []
        self.verifier = Verifier(secret_of)
        self.raw: list[bytes] = []
        self.hang = hang
        self.arrived = 0
        self.server_stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.arrived += 1
                if outer.hang:
                    outer.server_stop.wait(outer.hang)
                doc = outer.verifier.verify(body, dict(self.headers))
                if doc is not None:
                    outer.posts.append(doc)
                outer.raw.append(body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server_stop.set()
        self.server.shutdown()


class Service:
    def __init__(
        self, state: Path, env: dict[str, str], codex_bin: str, url: str, *extra: str
    ) -> None:
        self.state = state
        self.port = _free_port()
        self.stderr = state.parent / f"serve-{self.port}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loopx_chat",
                "--state-dir",
                str(state),
                "--codex-bin",
                codex_bin,
                "serve",
                "--port",
                str(self.port),
                "--approval",
                "untrusted",
                "--sandbox",
                "workspace-write",
                "--notify",
                "webhook",
                "--notify-url",
                url,
                *extra,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr.open("wb"),
        )

        def up() -> bool:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return True
            except OSError:
                return False

        _until(up, what="serve to listen")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {
            "Host": f"127.0.0.1:{self.port}",
            "Authorization": f"Bearer {read_secret(self.state)}",
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        raw = response.read()
        conn.close()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(raw) if "json" in kind else raw.decode()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(15)


def _env(base_env: dict[str, str], home: Path) -> dict[str, str]:
    return {**base_env, "LOOPX_CHAT_CODEX_HOME": str(home)}


def _gate_resolve(state: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "gate", "resolve", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _pending_host_gate(state: Path) -> Any:
    gates = [g for g in GateStore(state).gates("g") if g.host and g.status == "pending"]
    live = [g for g in gates if (g.host or {}).get("state") == "live"]
    return live[0] if live else None


def test_the_approval_reaches_page_and_webhook_and_is_answered_through_the_service(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    state = tmp_path / "state"
    work = tmp_path / "work"
    sub = work / f"in-{CANARY}"
    sub.mkdir(parents=True)
    env = _env(base_env, bound_home)
    receiver = Receiver(lambda: state_webhook_secret(state))
    service = Service(state, env, codex_bin, receiver.url)
    try:
        status, doc = service.call(
            "POST",
            "/api/chat/sessions",
            {"goal_id": "g", "work_dir": str(work), "create_goal": True},
        )
        assert status == 201, doc
        session_id = doc["session"]["session_id"]
        call = {"cmd": f"touch {sub}/f {sub}/{CANARY}", "workdir": str(sub)}
        status, doc = service.call(
            "POST",
            f"/api/chat/sessions/{session_id}/turns",
            {"text": f"mock:call=exec_command {json.dumps(call)}"},
        )
        assert status in (201, 202), doc
        gate = _until(lambda: _pending_host_gate(state), what="the host gate")
        assert gate.question == "Codex asks to run `touch` (2 arguments)"

        # The page shows the live command and folder, escaped; status.json does not. The gate
        # is on record a moment before the service holds its request (and has its details):
        # the card shows them from the redraw that follows.
        def card_with_command() -> str | None:
            html = str(service.call("GET", "/api/page")[1]["cards_html"])
            return html if f"touch {sub}/f {sub}/{CANARY}" in html else None

        page = _until(card_with_command, what="the card with the live command")
        assert "Approve for this session" in page
        _, status_doc = service.call("GET", "/status.json")
        assert CANARY not in json.dumps(status_doc)
        notice = _until(
            lambda: [p for p in receiver.posts if p["kind"] == "host_gate"], what="the webhook"
        )
        assert notice[0]["goal_id"] == "g"
        notified = _until(
            lambda: [
                e
                for e in map(
                    json.loads, (state / "events" / "control.jsonl").read_text().splitlines()
                )
                if e["kind"] == "blocker_notified"
            ],
            what="the notice in the metrics log",
        )
        assert notified[0]["blocker_ref"] == gate.gate_id and notified[0]["channel"] == "webhook"
        done = _gate_resolve(state, env, gate.gate_id, "--goal", "g", "--decision", "approve")
        assert done.returncode == 0, done.stderr
        _until(lambda: (sub / "f").exists(), what="the approved command to run")
        decided = GateStore(state).gate("g", gate.gate_id)
        assert decided.status == "approved" and decided.decided_by == "owner-cli"
        assert decided.host is not None and decided.host["state"] == "answered"
    finally:
        service.stop()
        receiver.close()
    for path in state.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    assert CANARY.encode() not in service.stderr.read_bytes()
    assert all(CANARY.encode() not in raw for raw in receiver.raw)


def test_a_service_killed_with_a_request_pending_leaves_it_expired_and_asks_nothing_again(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    env = _env(base_env, bound_home)
    receiver = Receiver(lambda: state_webhook_secret(state))
    service = Service(state, env, codex_bin, receiver.url)
    try:
        _, doc = service.call(
            "POST",
            "/api/chat/sessions",
            {"goal_id": "g", "work_dir": str(work), "create_goal": True},
        )
        session_id = doc["session"]["session_id"]
        service.call(
            "POST", f"/api/chat/sessions/{session_id}/turns", {"text": f"mock:shell=touch {work}/f"}
        )
        gate = _until(lambda: _pending_host_gate(state), what="the host gate")
    finally:
        service.stop(signal.SIGKILL)
    time.sleep(0.5)  # codex exits once its stdin closes
    asked = len(mock.requests)
    service = Service(state, env, codex_bin, receiver.url)
    try:
        expired = _until(
            lambda: (
                (g := GateStore(state).gate("g", gate.gate_id)).host.get("state") == "expired" and g
            ),
            what="the gate to expire",
        )
        assert expired.host["expired"] == "host restarted" and expired.status == "pending"
        time.sleep(1.0)
        assert len(mock.requests) == asked  # nothing was asked of the model again
        assert len([g for g in GateStore(state).gates("g") if g.host]) == 1
        assert not (work / "f").exists()
        # A later approval is recorded for the session's next turn.
        done = _gate_resolve(state, env, gate.gate_id, "--goal", "g", "--decision", "approve")
        assert done.returncode == 0, done.stderr
        status, doc = service.call(
            "POST", f"/api/chat/sessions/{session_id}/turns", {"text": "mock:text=next"}
        )
        assert status in (201, 202), doc
        line = "The owner approved running `touch` (1 argument); run it again."
        _until(
            lambda: any(line in t for r in mock.requests[asked:] for t in r["user_texts"]),
            what="the carried line",
        )
    finally:
        service.stop()
        receiver.close()


CHROMIUM = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]


def _browser_tools() -> tuple[Any, str]:
    import shutil

    import pytest

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if exe is None or sync_playwright is None:
        message = "chromium and playwright are needed (`make test` installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright, exe


def test_the_owner_approves_in_chromium_and_answers_a_secret_question(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    from tests.helpers.device import browser_sign_in

    sync_playwright, exe = _browser_tools()
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    env = _env(base_env, bound_home)
    # The webhook hangs for longer than the whole test: turns and the page go on regardless.
    receiver = Receiver(lambda: state_webhook_secret(state), hang=120)
    service = Service(state, env, codex_bin, receiver.url, "--plan")
    secret_answer = "s3cret-answer-77e1"
    question = {
        "id": "token",
        "header": "Token",
        "question": "Which token <b>should</b> I use?",
        "isSecret": True,
        "options": [{"label": "the old one", "description": "kept"}],
    }
    try:
        _, doc = service.call(
            "POST",
            "/api/chat/sessions",
            {"goal_id": "g", "work_dir": str(work), "create_goal": True},
        )
        session_id = doc["session"]["session_id"]
        service.call(
            "POST", f"/api/chat/sessions/{session_id}/turns", {"text": f"mock:shell=touch {work}/f"}
        )
        _until(lambda: _pending_host_gate(state), what="the host gate")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM)
            try:
                page = browser.new_context().new_page()
                browser_sign_in(page, service.port, read_secret(state) or "")
                gate = page.locator(".gate.host")
                gate.wait_for()
                assert f"touch {work}/f" in gate.locator("pre.live.command").inner_text()
                _until(lambda: receiver.arrived, what="the webhook to be called (it hangs)")
                gate.locator("button", has_text="Approve once").click()
                _until(lambda: (work / "f").exists(), 10, what="the approved command to run")
                _until(
                    lambda: GateStore(state).gates("g")[0].decided_by == "owner-device:browser-1",
                    what="the page's decision on record",
                )
                # Next, once that turn is over: a secret question, in a password field.
                _until(
                    lambda: (
                        not service.call("GET", f"/api/chat/sessions/{session_id}")[1]["session"][
                            "active_turn_id"
                        ]
                    ),
                    what="the first turn to end",
                )
                text = "mock:call=request_user_input " + json.dumps({"questions": [question]})
                status, doc = service.call(
                    "POST", f"/api/chat/sessions/{session_id}/turns", {"text": text}
                )
                assert status in (201, 202), doc
                _until(lambda: _pending_host_gate(state), what="the question")
                field = page.locator('.gate.host input.answer[type="password"]')
                field.wait_for()
                assert "Which token <b>should</b> I use?" in page.inner_text("main")
                field.fill(secret_answer)
                page.locator(".gate.host button", has_text="Send answer").click()
                _until(
                    lambda: any(
                        secret_answer in o for r in mock.requests for o in r["tool_outputs"]
                    ),
                    what="the model to get the answer",
                )
                assert receiver.posts == []  # the webhook still hangs on its first notice
            finally:
                browser.close()
    finally:
        service.stop()
        receiver.close()
    for path in state.rglob("*"):
        if path.is_file():
            assert secret_answer.encode() not in path.read_bytes(), path
    assert secret_answer.encode() not in service.stderr.read_bytes()

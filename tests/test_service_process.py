"""`loopx-chat serve` as a real process: SIGTERM mid-turn, and the first screen in Chromium."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from loopx_chat.goals import GoalStore
from loopx_chat.store import SessionStore

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(
    state: Path, home: Path, env: dict[str, str], codex_bin: str
) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    proc = subprocess.Popen(
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
            str(port),
        ],
        env={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve did not start listening")


def _post(port: int, path: str, body: dict) -> dict:  # type: ignore[type-arg]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(
        "POST",
        path,
        body=json.dumps(body),
        headers={"Content-Type": "application/json", "Host": f"127.0.0.1:{port}"},
    )
    resp = conn.getresponse()
    doc = json.loads(resp.read())
    conn.close()
    assert resp.status < 300, doc
    return doc


def test_sigterm_mid_turn_shuts_down_cleanly(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    proc, port = _start(state, bound_home, base_env, codex_bin)
    try:
        sid = _post(port, "/api/chat/sessions", {"goal_id": "g"})["session"]["session_id"]
        turn = _post(port, f"/api/chat/sessions/{sid}/turns", {"text": "mock:hang"})["turn"]
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "an app-server should be running"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err and b"stopped" in err
    store = SessionStore(state)
    recorded = store.load_turn(sid, turn["id"])
    assert recorded.status == "interrupted"
    assert store.load(sid).active_turn_id is None
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        message = "Debian chromium is missing; `make test` installs it where apt is available"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return exe


def test_first_screen_in_headless_chromium(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    exe = _chromium()
    state = tmp_path / "state"
    GoalStore(state).request_gate("goal-page", "Approve the <release> & ship?", actor="owner")
    proc, port = _start(state, bound_home, base_env, codex_bin)
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chrome-profile'}",
        "--window-size=1200,800",
    ]
    url = f"http://127.0.0.1:{port}/"
    try:
        dom = subprocess.run(
            [exe, *flags, "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "first-screen.png"
        shot.unlink(missing_ok=True)
        subprocess.run(
            [exe, *flags, f"--screenshot={shot}", url],
            capture_output=True,
            timeout=120,
            check=False,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    html = dom.stdout
    assert 'data-goal="goal-page"' in html, dom.stderr[-2000:]
    assert "Who or what is it waiting on?" in html
    assert "the owner: an owner gate needs a decision" in html
    assert "no: blocked by an open owner gate" in html
    assert "gate (pending): Approve the &lt;release&gt; &amp; ship?" in html
    assert "no run recorded yet" in html
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""`loopx-chat serve` as a real process: SIGTERM mid-turn, and the first screen in Chromium."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from loopx_chat.codex.rollouts.host_facts import index_path
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.service.malloc_arenas import SERVICE_ARENAS, is_glibc
from loopx_chat.state.service_runtime import read_secret
from loopx_chat.state.session_store import SessionStore
from tests.helpers.device import browser_sign_in
from tests.helpers.malloc_arenas import arena_count
from tests.helpers.serve_process import RunningService, chromium, start_serve
from tests.helpers.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def _post(port: int, path: str, body: dict, state: Path) -> dict:  # type: ignore[type-arg]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(
        "POST",
        path,
        body=json.dumps(body),
        headers={
            "Content-Type": "application/json",
            "Host": f"127.0.0.1:{port}",
            "Authorization": f"Bearer {read_secret(state)}",
        },
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
    proc, port = start_serve(state, bound_home, base_env, codex_bin)
    try:
        opened = _post(port, "/api/chat/sessions", {"goal_id": "g", "create_goal": True}, state)
        sid = opened["session"]["session_id"]
        turn = _post(port, f"/api/chat/sessions/{sid}/turns", {"text": "mock:hang"}, state)["turn"]
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


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not is_glibc(), reason="glibc's arenas only"
)
def test_serve_caps_its_malloc_arenas(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    env = {k: v for k, v in base_env.items() if k != "MALLOC_ARENA_MAX"}
    proc, port = start_serve(state, bound_home, env, codex_bin)
    try:
        # A session and a turn: the request, worker and reader threads each allocate.
        opened = _post(port, "/api/chat/sessions", {"goal_id": "g", "create_goal": True}, state)
        sid = opened["session"]["session_id"]
        _post(port, f"/api/chat/sessions/{sid}/turns", {"text": "hi"}, state)
        wait_for(lambda: SessionStore(state).load(sid).active_turn_id is None, timeout=60)
        # Uncapped, this service held 8 arenas besides the main heap by now (issue 37).
        assert arena_count(proc.pid) <= SERVICE_ARENAS
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_serve_brings_the_rollout_index_up_to_date_before_any_request(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    thread_id = "01a22654-8805-7283-882f-6664d5224a44"
    folder = bound_home / "sessions" / "2026" / "11" / "29"
    folder.mkdir(parents=True)
    meta = {
        "timestamp": "2026-11-29T09:00:00.000Z",
        "type": "session_meta",
        "payload": {"id": thread_id, "cwd": "/somewhere"},
    }
    rollout = folder / f"rollout-2026-11-29T09-00-00-{thread_id}.jsonl"
    rollout.write_text(json.dumps(meta, separators=(",", ":")) + "\n")
    index = index_path(state, bound_home.resolve())
    # A blocking gate: a status computed at start-up would record it as displayed.
    GateStore(state).request_gate("g", question="Proceed?", actor="operator", blocking=True)
    proc, _port = start_serve(state, bound_home, base_env, codex_bin)
    try:
        deadline = time.monotonic() + 20
        while not index.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert index.exists(), "the warm-up scan never wrote the index"
        assert list(json.loads(index.read_text())["files"]) == [
            str(rollout.relative_to(bound_home))
        ]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    # Warming the index is not a status read: nothing was recorded as displayed.
    kinds = [e["kind"] for e in GateStore(state).control.events()]
    assert "blocker_displayed" not in kinds and "stale_detected" not in kinds


def test_first_screen_in_headless_chromium(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    exe = chromium()
    state = tmp_path / "state"
    GateStore(state).request_gate("goal-page", "Approve the <release> & ship?", actor="owner")
    proc, port = start_serve(state, bound_home, base_env, codex_bin)
    from playwright.sync_api import sync_playwright

    args = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "first-screen.png"
    shot.unlink(missing_ok=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=args)
            try:
                page = browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
                # The one-time sign-in URL `loopx-chat open` hands the browser: the page's
                # script redeems it, keeps its own key and loads the cards by signed calls.
                browser_sign_in(page, port, str(read_secret(state)))
                page.wait_for_selector("section.card")
                html = page.content()
                page.screenshot(path=str(shot))
            finally:
                browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert 'data-goal="goal-page"' in html
    assert "Who or what is it waiting on?" in html
    assert "the owner: an owner gate needs a decision" in html
    assert "no: blocked by an open owner gate" in html
    assert "gate (pending): Approve the &lt;release&gt; &amp; ship?" in html
    assert "no run recorded yet" in html
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_serve_on_a_busy_port_is_one_clean_error(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "loopx_chat",
                "--state-dir",
                str(tmp_path / "state"),
                "serve",
                "--port",
                str(port),
            ],
            env={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.startswith("error [listen_failed]: cannot listen on 127.0.0.1:")
    assert "Traceback" not in done.stderr
    # What holds the port (this test's process) and the flag that picks another.
    assert f"(pid {os.getpid()})." in done.stderr.splitlines()[1]
    assert f"next: Pick another port: `loopx-chat serve --port {port + 1}`" in done.stderr


def test_serve_logs_the_codex_check_once_at_start_with_no_path(
    tmp_path: Path,
    codex_bin: str,
    codex_version: str,
    bound_home: Path,
    base_env: dict[str, str],
    start_service: Callable[..., RunningService],
) -> None:
    service = start_service(tmp_path / "state", bound_home, base_env, codex_bin)

    def checked() -> list[str]:
        text = service.log.read_text(errors="replace")
        return [x for x in text.splitlines() if f"codex {codex_version}:" in x]

    wait_for(lambda: bool(checked()))
    (line,) = checked()
    assert "inside the tested range" in line and "methods loopx-chat uses" in line
    assert line.endswith("home: ok")
    assert str(tmp_path) not in line and str(bound_home) not in line
    service.stop()
    assert len(checked()) == 1

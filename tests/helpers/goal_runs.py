"""Helpers of the goal-run suites: the continuation turns a session recorded, a goal's run
events, and Chromium with playwright for the card (missing: a skip locally, a failure in CI)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loopx_chat.state.session_store import SessionStore


def goal_loop_turns(state: Path, session_id: str) -> list[Any]:
    """The session's continuation turns (codex's own loop), oldest first."""
    turns = SessionStore(state).list_turns(session_id)
    return sorted((t for t in turns if t.origin == "goal_loop"), key=lambda t: t.created_at)


def run_events(state: Path, goal: str) -> list[dict[str, Any]]:
    path = state / "goals" / goal / "runs.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def browser_or_fail() -> tuple[str, Any]:
    """Debian chromium and playwright's driver; missing fails under CI, else skips."""
    import os

    import pytest

    from tests.helpers.serve_process import chromium

    exe = chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        message = "the playwright package is missing; `make test` installs the dev extra"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return exe, sync_playwright


@contextmanager
def owner_page(base: list[str], env: dict[str, str], cwd: Path, state: Path) -> Iterator[Any]:
    """A real `serve` (`base`: the `loopx-chat` argv up to the command) on a free port, and
    a Chromium page signed in to it with a one-time code; both stopped at the end."""
    import signal
    import socket
    import subprocess

    from loopx_chat.state.service_runtime import read_secret
    from tests.helpers.device import browser_sign_in
    from tests.helpers.serve_process import free_port
    from tests.helpers.waiting import wait_for

    def listening(port: int) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    exe, sync_playwright = browser_or_fail()
    port = free_port()
    proc = subprocess.Popen(
        [*base, "serve", "--port", str(port)],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: read_secret(state) is not None and listening(port), 30)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=exe, args=["--no-sandbox", "--disable-gpu"]
            )
            try:
                page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
                browser_sign_in(page, port, str(read_secret(state)))
                yield page
            finally:
                browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def paused_by_owner_interrupt(run_id: str, goal_id: str = "g") -> dict[str, Any]:
    """`chat interrupt`'s `goal_run` for a run it stopped and paused."""
    return {
        "goal_id": goal_id,
        "run_id": run_id,
        "state": "ended",
        "host_status": "paused",
        "ended_by": "owner (chat interrupt)",
        "reason": "turn_interrupted_by_owner",
    }


def marker_writes(monkeypatch: Any) -> list[str]:
    """The turns `ChatController` asks to stop by the session's interrupt marker from now on
    (each still written): empty when an interrupt went another way."""
    from loopx_chat.controller.chat_controller import ChatController

    written: list[str] = []
    ask_marker = ChatController._ask_marker

    def spied(self: ChatController, session_id: str, turn_id: str) -> None:
        written.append(turn_id)
        ask_marker(self, session_id, turn_id)

    monkeypatch.setattr(ChatController, "_ask_marker", spied)
    return written

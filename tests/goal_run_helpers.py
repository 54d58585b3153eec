"""Test helpers for goal runs: a wait, a free port, and the goal_loop turns of a session."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopx_chat.state.session_store import SessionStore


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def goal_loop_turns(state: Path, session_id: str) -> list[Any]:
    """The session's continuation turns (codex's own loop), oldest first."""
    turns = SessionStore(state).list_turns(session_id)
    return sorted((t for t in turns if t.origin == "goal_loop"), key=lambda t: t.created_at)


def run_events(state: Path, goal: str) -> list[dict[str, Any]]:
    import json

    path = state / "goals" / goal / "runs.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def browser_or_fail() -> tuple[str, Any]:
    """Debian chromium and playwright's driver; missing fails under CI, else skips."""
    import os
    import shutil

    import pytest

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if exe is None or sync_playwright is None:
        message = "chromium or playwright is missing; `make test` installs both"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return exe, sync_playwright

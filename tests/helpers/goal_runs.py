"""Helpers of the goal-run suites: the continuation turns a session recorded, a goal's run
events, and Chromium with playwright for the card (missing: a skip locally, a failure in CI)."""

from __future__ import annotations

import json
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

"""The owner's first screen in real Chromium, against a real `loopx-chat serve` process.

Goals in each state are written to owner-local state first; the page must order them by who
must act, decide a gate in place (no reload) with the decision recorded exactly as `gate
resolve` records it, show another process's new gate live, refuse a cross-site form post,
record a blocker as displayed only once the browser rendered it, and say when it lost the
connection. A screenshot goes to `build/first-screen.png` for review.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.state.service_runtime import read_secret
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.device import browser_sign_in, sign_in
from tests.helpers.serve_process import chromium, start_serve

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        message = "the playwright package is missing; `make test` installs the dev extra"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright


def _session(store: SessionStore, goal: str, home: Path, turns: list[str]) -> None:
    record = SessionRecord(
        session_id=f"session-{goal}",
        goal_id=goal,
        created_at="2026-11-30T09:00:00Z",
        updated_at="2026-11-30T09:00:00Z",
        codex_home=str(home),
        work_dir="/tmp",
    )
    store.create(record)
    for n, status in enumerate(turns):
        at = f"2026-11-30T09:0{n + 1}:00Z"
        store.save_turn(
            TurnRecord(
                turn_id=f"turn-{goal}-{n}",
                session_id=record.session_id,
                status=status,
                created_at=at,
                updated_at=at,
                completed_at=at,
                error_code="turn_failed" if status == "failed" else None,
                tokens=TokenCounts(10, 2, 12),
            )
        )


def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:  # type: ignore[type-arg]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, body=body, headers={"Host": f"127.0.0.1:{port}", **headers})
    resp = conn.getresponse()
    doc = json.loads(resp.read() or b"{}")
    conn.close()
    return resp.status, doc


def test_first_screen_is_live_ordered_and_decides_gates_in_chromium(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    exe = chromium()
    sync_playwright = _playwright()
    state = tmp_path / "state"
    goals = GateStore(state)
    store = SessionStore(state)
    first = goals.request_gate("goal-release", "Approve the <release> & ship?", actor="owner")
    second = goals.request_gate("goal-budget", "Spend more on the migration?", actor="owner")
    goals.request_gate("goal-budget", "Also tell the team?", actor="owner", blocking=False)
    _session(store, "goal-flaky", bound_home, ["completed", "failed"])
    _session(store, "goal-ready", bound_home, ["completed"])
    goals.record_handoff("goal-ready", "write the migration tests", "tests pass", ())
    _session(store, "goal-quiet", bound_home, ["completed"])
    # A goal whose files have been quiet for 40 days steps aside: counted, never a card.
    GoalLedger(goals).set_goal_state("goal-shelved", {"objective": "Old", "acceptance": ["x"]})
    old = time.time_ns() - 40 * 86400 * 10**9
    for path in (state / "goals" / "goal-shelved").glob("*.jsonl"):
        os.utime(path, ns=(old, old))
    proc, port = start_serve(state, bound_home, base_env, codex_bin)
    url = f"http://127.0.0.1:{port}/"
    secret = str(read_secret(state))
    bearer = {"Authorization": f"Bearer {secret}"}
    try:
        # A script reading the feed is not the owner seeing a blocker.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/status.json", headers={"Host": f"127.0.0.1:{port}", **bearer})
        assert conn.getresponse().status == 200
        conn.close()
        assert first.gate_id not in goals.control.reported()["blockers"]

        # A cross-site form post (no JSON, foreign Origin) and a signed request replayed are
        # both refused; the gate stays pending.
        decision = f"/api/goals/goal-release/gates/{first.gate_id}/decision"
        status, doc = _post(
            port,
            decision,
            b"decision=approve",
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": "http://evil.example",
            },
        )
        assert (status, doc["error_code"]) == (401, "unauthorized")
        # A device's signed request is taken once: the same bytes again are refused, and a
        # signature made for one path does not open another.
        device = sign_in(port, secret, "replayer")
        signed = device.headers("GET", "/status.json")

        def get(path: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}", **signed})
            code = conn.getresponse().status
            conn.close()
            return code

        assert get("/api/chat/sessions") == 401
        assert get("/status.json") == 200
        assert get("/status.json") == 401

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            try:
                # Without signing in the browser gets the empty shell saying how to get in.
                stranger = browser.new_context().new_page()
                stranger.goto(url)
                stranger.wait_for_function(
                    "() => document.getElementById('live').textContent.includes('not signed')"
                )
                assert "loopx-chat open" in stranger.inner_text("body")
                assert stranger.locator("section.card").count() == 0

                # A one-time code signs the browser in and leaves the address bar.
                owner = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = owner.new_page()
                browser_sign_in(page, port, secret, "desk")
                assert page.url == url  # the code is gone from the address bar
                assert owner.cookies() == []  # nothing that every port would receive
                page.wait_for_selector("section.card")
                # What the browser keeps is a key its own scripts can use but never read out.
                kept = page.evaluate(
                    """() => new Promise(done => {
                      const open = indexedDB.open("loopx-chat", 1);
                      open.onsuccess = () => {
                        const get = open.result.transaction("credential")
                          .objectStore("credential").get("device");
                        get.onsuccess = () => crypto.subtle.exportKey("raw", get.result.key)
                          .then(() => done("exported"), () => done(
                            String(get.result.key.extractable)));
                      };
                    })"""
                )
                assert kept == "false"
                page.reload()  # and it works without a code afterwards
                page.wait_for_selector("section.card")
                # The header, written by the script from `GET /api/page`, counts the archive.
                page.wait_for_function(
                    "() => document.getElementById('about').textContent.includes('goal(s)')"
                )
                assert page.inner_text("#about").startswith(
                    "5 goal(s) · 1 finished goal(s) archived · Codex home from "
                )
                assert page.locator('section.card[data-goal="goal-shelved"]').count() == 0

                # A hostile page in the owner's own browser posts a form to the service: the
                # cookie stays home (SameSite) and the gate stays pending.
                evil = owner.new_page()
                evil.set_content(
                    f'<form method="post" action="{url.rstrip("/")}{decision}">'
                    '<input name="decision" value="approve"></form>'
                )
                evil.evaluate("() => document.forms[0].submit()")
                evil.wait_for_load_state()
                assert goals.gate("goal-release", first.gate_id).status == "pending"
                # Left open: the browser's close takes it. Closing the page on its own once
                # hung Chromium on a loaded machine (the whole suite waited on it).
                cards = page.eval_on_selector_all(
                    "section.card",
                    "els => els.map(e => [e.dataset.goal, e.querySelector('.badge').textContent])",
                )
                assert cards == [
                    ["goal-release", "Waiting on you"],
                    ["goal-budget", "Waiting on you"],
                    ["goal-flaky", "Blocked"],
                    ["goal-ready", "Ready to go on"],
                    ["goal-quiet", "Nothing to do"],
                ]
                text = page.inner_text("main")
                for leak in ("eligible: eligible", "open_blocking_gate", "human_decision"):
                    assert leak not in text
                assert "Also tell the team?" in text  # the advisory gate has its place
                assert "loopx-chat gate resolve" in text  # the CLI equivalent
                assert page.inner_text("#live").startswith("updated ")
                # The browser rendered the blockers: now, and only now, they count as seen.
                _wait(lambda: first.gate_id in goals.control.reported()["blockers"])

                # Approve in place: no reload, the card moves on, the record is the CLI's.
                page.evaluate("() => { window.__same_document = true; }")
                card = page.locator('section.card[data-goal="goal-release"]')
                card.locator(".reason").fill("numbers checked")
                card.locator("button.approve").click()
                page.wait_for_function(
                    "() => document.querySelector('section.card[data-goal=\"goal-release\"]')"
                    ".dataset.actor !== 'owner'",
                    timeout=2000,
                )
                assert page.evaluate("() => window.__same_document") is True
                resolved = goals.gate("goal-release", first.gate_id)
                assert (resolved.status, resolved.reason) == ("approved", "numbers checked")
                assert resolved.decided_by == "owner-device:desk"
                after = page.inner_text('section.card[data-goal="goal-release"] .next')
                assert "nothing is queued for the agent" in after and "handoff record" in after

                # Another process asks a new question: it shows up live, first in line.
                newer = goals.request_gate("goal-quiet", "Archive the old data?", actor="owner")
                page.wait_for_function(
                    "() => document.querySelector('section.card[data-goal=\"goal-quiet\"]')"
                    ".dataset.actor === 'owner'",
                    timeout=5000,
                )
                assert page.evaluate("() => window.__same_document") is True
                BUILD.mkdir(exist_ok=True)
                shot = BUILD / "first-screen.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                _wait(lambda: newer.gate_id in goals.control.reported()["blockers"])

                # Without JavaScript nothing can sign in: the shell says how, and holds no data.
                plain = browser.new_context(java_script_enabled=False).new_page()
                plain.goto(url)
                assert plain.locator("section.card").count() == 0
                assert "loopx-chat open" in plain.inner_text("main")

                # The service goes away: the page says so instead of showing stale cards.
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=30)
                page.wait_for_function(
                    "() => document.getElementById('live').textContent.includes('connection lost')",
                    timeout=10000,
                )
            finally:
                browser.close()
        assert goals.gate("goal-budget", second.gate_id).status == "pending"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)


def _wait(condition: Any, timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)

"""Decide from anywhere: the owner's phone through the owner's own reverse proxy with TLS.

A real `serve --public-url https://phone-test.example:PORT` on loopback, Debian's Caddy with
its internal CA in front of it, the real codex on the mock model, and Chromium emulating a
phone (390×844, touch) with the host mapped to 127.0.0.1. `pair` prints a QR code: what it
printed in the terminal is drawn back into an image and decoded by `zbarimg` (and so is the
PNG it writes with `--png`); that is the pairing URL, which works once and never twice. The
phone sees Codex's request first, with its command and folder, on one screen without
horizontal scrolling; ntfy's tap action and the page's own link lead to that card, and the
link alone (fetched with no credential) decides nothing; two taps approve, the command runs,
the decision names the device; `devices revoke` signs the phone out at once. A device paired
without `--full` is refused starting a turn; a wrong Host or Origin through the proxy is
refused. A screenshot goes to `build/phone-first-screen.png`.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.service.device_auth import server_proof, sign, signing_string
from loopx_chat.state.service_runtime import read_secret
from tests.helpers.ntfy import NtfyReceiver
from tests.helpers.proxy import OTHER_HOST, PUBLIC_HOST, Proxy, start_caddy
from tests.helpers.qr import decode, terminal_to_pgm
from tests.helpers.serve_process import chromium, free_port, start_service
from tests.helpers.waiting import wait_value

pytestmark = pytest.mark.codex

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
    "ignore_https_errors": True,  # Caddy's internal CA is not in Chromium's store
}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--host-resolver-rules=MAP {PUBLIC_HOST} 127.0.0.1",
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


def _cli(state: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


class ProxiedDevice:
    """A device signed in through the proxy, signing as the page's script does."""

    def __init__(self, proxy: Proxy, code: str) -> None:
        self.proxy = proxy
        status, doc = proxy.request("POST", "/api/auth/login", body={"code": code})
        assert status == 200, doc
        self.device_id = doc["device_id"]
        self.name = doc["name"]
        self.key = base64.urlsafe_b64decode(doc["key"] + "=" * (-len(doc["key"]) % 4))
        challenge = secrets.token_urlsafe(24)
        _, proof = proxy.request(
            "POST", "/api/auth/prove", body={"device_id": self.device_id, "challenge": challenge}
        )
        assert proof["proof"] == server_proof(self.key, challenge, proof["run_id"])
        self.run_id = proof["run_id"]

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raw = b"" if body is None else json.dumps(body).encode()
        stamp, nonce = str(int(time.time() * 1000)), secrets.token_urlsafe(16)
        text = signing_string(method, path, stamp, nonce, raw, self.run_id)
        headers = {
            "X-Loopx-Device": self.device_id,
            "X-Loopx-Time": stamp,
            "X-Loopx-Nonce": nonce,
            "X-Loopx-Signature": sign(self.key, text),
            "Origin": self.proxy.origin,
        }
        return self.proxy.request(method, path, headers=headers, body=body)


def _code_of(url: str) -> str:
    return url.split("#code=", 1)[1]


def _host_gate(state: Path) -> Any:
    gates = [g for g in GateStore(state).gates("g") if g.host and g.status == "pending"]
    return next((g for g in gates if (g.host or {}).get("state") == "live"), None)


def test_the_phone_pairs_through_the_proxy_approves_codex_and_is_revoked(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    exe = chromium()
    sync_playwright = _playwright()
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    public_port = free_port()
    public = f"https://{PUBLIC_HOST}:{public_port}"
    ntfy = NtfyReceiver()
    service = start_service(
        state,
        bound_home,
        base_env,
        codex_bin,
        tmp_path / "serve.log",
        *("--public-url", public, "--approval", "untrusted", "--sandbox", "workspace-write"),
        *("--notify", "none", "--ntfy-url", ntfy.url),
    )
    proxy = start_caddy(tmp_path / "caddy", service.port, public_port)
    owner = {"Authorization": f"Bearer {read_secret(state)}"}
    try:
        # -- pairing: the QR code the terminal shows is the URL, on the public origin --------
        png = tmp_path / "pair.png"
        done = _cli(state, env, "pair", "--name", "phone", "--png", str(png))
        assert done.returncode == 0, done.stderr
        url = done.stdout.strip().splitlines()[-1]
        assert url.startswith(f"{public}/login#code=")
        assert decode(terminal_to_pgm(done.stdout, tmp_path / "terminal-qr.pgm")) == url
        assert decode(png) == url and png.stat().st_mode & 0o777 == 0o600
        assert _code_of(url) not in service.log.read_text(errors="replace")

        # -- wrong Host or Origin through the same proxy: refused by the service -------------
        status, doc = proxy.request("GET", "/api/page", host=OTHER_HOST, headers=owner)
        assert (status, doc["error_code"]) == (403, "forbidden_host")
        for origin in ("https://evil.example", f"http://{PUBLIC_HOST}:{public_port}"):
            status, doc = proxy.request(
                "POST", "/api/auth/codes", headers={**owner, "Origin": origin}, body={}
            )
            assert (status, doc["error_code"]) == (403, "forbidden_request"), origin
        status, doc = proxy.request(
            "POST", "/api/auth/codes", headers={**owner, "Origin": public}, body={}
        )
        assert status == 200 and doc["public_url"] == public

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            phone = browser.new_context(**PHONE)
            page = phone.new_page()
            page.goto(url)
            page.wait_for_function("() => location.pathname === '/' && !location.hash")
            page.wait_for_function(
                "() => document.getElementById('about').textContent.includes('this browser: phone')"
            )
            assert page.evaluate("window.isSecureContext")
            # The same code again, in another browser: refused.
            other = browser.new_context(**PHONE).new_page()
            other.goto(url)
            other.wait_for_function(
                "() => document.getElementById('live').textContent.startsWith('not signed in')"
            )
            devices = json.loads(_cli(state, env, "devices", "--json").stdout)["devices"]
            assert [d["name"] for d in devices] == ["phone"] and devices[0]["full"] is False

            # Another goal that sorts first by name, with a long unbroken advisory question:
            # the waiting request must still come first, and nothing may scroll sideways.
            status, doc = proxy.request(
                "POST",
                "/api/chat/sessions",
                headers=owner,
                body={"goal_id": "aaa-watching", "work_dir": str(work), "create_goal": True},
            )
            assert status == 201, doc
            status, doc = proxy.request(
                "POST",
                "/api/goals/aaa-watching/gates",
                headers=owner,
                body={"question": "x" * 300, "blocking": False},
            )
            assert status == 201, doc
            # -- Codex asks to run a command ---------------------------------------------
            status, doc = proxy.request(
                "POST",
                "/api/chat/sessions",
                headers=owner,
                body={"goal_id": "g", "work_dir": str(work), "create_goal": True},
            )
            assert status == 201, doc
            session_id = doc["session"]["session_id"]
            target = work / "approved-on-phone"
            call = {"cmd": f"touch {target}", "workdir": str(work)}
            status, doc = proxy.request(
                "POST",
                f"/api/chat/sessions/{session_id}/turns",
                headers=owner,
                body={"text": f"mock:call=exec_command {json.dumps(call)}"},
            )
            assert status in (201, 202), doc
            gate = wait_value(lambda: _host_gate(state), what="Codex's request as a gate")
            link = f"{public}/#gate=g/{quote(gate.gate_id, safe='')}"

            # -- the push notice: goal, kind and the gate's link only --------------------
            pushed = wait_value(
                lambda: [m for m in ntfy.messages if m["click"] == link], what="the ntfy push"
            )
            assert not ntfy.refused
            assert pushed[0]["message"] == "Goal g: Codex asks for your approval or answer."
            assert "touch" not in json.dumps(pushed[0]) and str(work) not in json.dumps(pushed)
            assert "Authorization" not in pushed[0]["headers"]

            # -- the link alone decides nothing: fetched with no credential --------------
            for path in ("/", f"/api/goals/g/gates/{gate.gate_id}/decision"):
                status, _ = proxy.request("GET", path)
                assert status in (200, 401, 405), (path, status)
            assert GateStore(state).gate("g", gate.gate_id).status == "pending"

            # -- the phone: the request first, command and folder, no sideways scroll -----
            page.goto(link)
            card = page.locator("section.card").first
            card.locator(f'[data-gate="{gate.gate_id}"]').wait_for()
            assert card.get_attribute("data-goal") == "g"
            assert page.locator("section.card").count() == 2
            assert card.get_attribute("data-actor") == "owner"
            assert "focus" in (card.get_attribute("class") or "")
            assert f"touch {target}" in card.locator(".live.command").inner_text()
            assert str(work) in card.locator(".live.cwd").inner_text()
            box = card.locator(f'[data-gate="{gate.gate_id}"] button[data-decision="approve"]')
            approve = box.first
            top = approve.bounding_box()
            assert top is not None and top["y"] + top["height"] <= 844
            assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
            BUILD.mkdir(exist_ok=True)
            page.screenshot(path=str(BUILD / "phone-first-screen.png"))
            # Paired without --full: nothing on the page starts work.
            assert not card.locator('button[data-run="run"]').is_visible()

            # -- one tap arms, the second decides --------------------------------------
            approve.tap()
            page.wait_for_selector("button.armed")
            time.sleep(0.5)
            assert GateStore(state).gate("g", gate.gate_id).status == "pending"
            page.locator("button.armed").tap()
            wait_value(lambda: target.exists(), what="the approved command to run")
            decided = GateStore(state).gate("g", gate.gate_id)
            assert decided.status == "approved"
            assert decided.decided_by == "owner-device:phone"
            resolved = [
                json.loads(line)
                for line in (state / "goals" / "g" / "gates.jsonl").read_text().splitlines()
                if '"resolved"' in line
            ]
            assert [(r["actor"], r["surface"]) for r in resolved] == [
                ("owner-device:phone", "page")
            ]

            # -- a device paired without --full is refused starting a turn ----------------
            viewer = _cli(state, env, "pair", "--name", "tablet")
            tablet = ProxiedDevice(proxy, _code_of(viewer.stdout.strip().splitlines()[-1]))
            status, doc = tablet.call(
                "POST", f"/api/chat/sessions/{session_id}/turns", {"text": "mock:text=hi"}
            )
            assert (status, doc["error_code"]) == (403, "device_not_full")
            status, doc = tablet.call("POST", "/api/goals/g/run", {})
            assert (status, doc["error_code"]) == (403, "device_not_full")
            status, doc = tablet.call("GET", "/api/page")
            assert status == 200 and doc["device"] == "tablet"

            # -- revoked: the phone's stream ends and it is signed out at once ----------
            revoked = _cli(state, env, "devices", "revoke", "phone")
            assert revoked.returncode == 0, revoked.stderr
            page.wait_for_function(
                "() => document.getElementById('live').textContent.includes('revoked')",
                timeout=10_000,
            )
            assert page.locator("section.card").count() == 0
            browser.close()
    finally:
        proxy.stop()
        service.stop()
        ntfy.close()

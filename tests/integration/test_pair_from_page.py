""" "Pair a phone" on the desk's page, in real Chromium against a real `loopx-chat serve`.

The browser `loopx-chat open` signs in at the machine (full) asks the service for a pairing
code; the page shows its QR code (drawn by the service with the CLI's encoder), the URL, the
name and the expiry. The QR code, screenshotted and decoded by `zbarimg`, is the URL shown,
and that URL pairs a new device once (decide only, not a desk) and never twice. The code is
in no log, no status.json and no cached page data. A paired phone, a desk browser paired
without rights to start work, and a program are refused minting one (`pairing_not_allowed`);
a foreign Origin is refused before that (`forbidden_request`).
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.state.devices import load as load_devices
from loopx_chat.state.service_runtime import read_secret
from tests.helpers.device import Device, browser_sign_in, post, redeem, sign_in
from tests.helpers.goal_runs import browser_or_fail
from tests.helpers.qr import decode
from tests.helpers.serve_process import start_service

pytestmark = pytest.mark.codex


def _signed(
    device: Device, method: str, path: str, doc: Any = None, origin: str | None = None
) -> tuple[int, dict[str, Any]]:
    body = b"" if doc is None else json.dumps(doc).encode()
    headers = {"Host": f"127.0.0.1:{device.port}", **device.headers(method, path, body)}
    if doc is not None:
        headers["Content-Type"] = "application/json"
    headers["Origin"] = origin or f"http://127.0.0.1:{device.port}"
    conn = http.client.HTTPConnection("127.0.0.1", device.port, timeout=60)
    conn.request(method, path, body=body or None, headers=headers)
    response = conn.getresponse()
    reply = json.loads(response.read())
    conn.close()
    return response.status, reply


def test_the_desk_page_pairs_a_phone_and_nobody_else_can(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    exe, sync_playwright = browser_or_fail()
    state = tmp_path / "state"
    service = start_service(state, bound_home, base_env, codex_bin, tmp_path / "serve.log")
    port = service.port
    secret = str(read_secret(state))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=exe, args=["--no-sandbox", "--disable-gpu"]
            )
            try:
                page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
                browser_sign_in(page, port, secret, "desk")  # as `loopx-chat open` does
                page.wait_for_selector("#pairing:not([hidden])")
                page.click("#pair-open")
                page.fill("#pair-name", "phone")
                page.click("#pair-make")
                page.wait_for_selector("#pair-qr svg")
                url = page.inner_text("#pair-url")
                assert url.startswith(f"http://127.0.0.1:{port}/login#code=")
                words = page.inner_text("#pair-words")
                assert "works once, for phone (decide, hold and pause only), until" in words
                shot = tmp_path / "page-qr.png"
                page.locator("#pair-qr svg").screenshot(path=str(shot))
                assert decode(shot) == url
                # The code lives in that box only: not in the page's data nor its storage.
                kept = page.evaluate(
                    """() => new Promise(done => {
                      const open = indexedDB.open("loopx-chat", 1);
                      open.onsuccess = () => {
                        const all = open.result.transaction("credential")
                          .objectStore("credential").getAllKeys();
                        all.onsuccess = () => done(JSON.stringify(all.result) +
                          JSON.stringify(localStorage) + JSON.stringify(sessionStorage));
                      };
                    })"""
                )
                code = url.split("#code=", 1)[1]
                assert code not in kept
                # Hidden: the box forgets it.
                page.click("#pair-hide")
                assert page.inner_text("#pair-url") == ""
                assert page.locator("#pair-qr svg").count() == 0
            finally:
                browser.close()

        # The URL pairs a new device once: decide only, never a desk; never twice.
        phone = redeem(url)
        assert phone.name == "phone"
        found = {d.name: d for d in load_devices(state)}
        assert (found["phone"].full, found["phone"].desk) == (False, False)
        assert (found["desk"].full, found["desk"].desk) == (True, True)
        again = post(port, "/api/auth/login", {"code": code}, {})
        assert again["error_code"] == "login_code_invalid"

        # Nowhere else: not in the log, status.json or the page's data.
        bearer = {"Authorization": f"Bearer {secret}"}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/status.json", headers={"Host": f"127.0.0.1:{port}", **bearer})
        status_json = conn.getresponse().read().decode()
        conn.close()
        desk = sign_in(port, secret, "desk-2", desk=True)
        status, page_data = _signed(desk, "GET", "/api/page")
        assert status == 200 and page_data["may_pair"] is True
        for text in (service.log.read_text(errors="replace"), status_json, json.dumps(page_data)):
            assert code not in text

        # Who may not mint one: the phone, a browser paired from afar even with --full, a
        # program with the secret; a foreign Origin is refused before anything.
        status, doc = _signed(phone, "POST", "/api/auth/pair", {"name": "p2"})
        assert (status, doc["error_code"]) == (403, "pairing_not_allowed")
        status, page_data = _signed(phone, "GET", "/api/page")
        assert status == 200 and page_data["may_pair"] is False
        far = sign_in(port, secret, "far", desk=False)
        status, doc = _signed(far, "POST", "/api/auth/pair", {})
        assert (status, doc["error_code"]) == (403, "pairing_not_allowed")
        doc = post(port, "/api/auth/pair", {}, bearer)
        assert doc["error_code"] == "pairing_not_allowed"
        status, doc = _signed(desk, "POST", "/api/auth/pair", {}, origin="http://evil.example")
        assert (status, doc["error_code"]) == (403, "forbidden_request")
        status, doc = _signed(desk, "POST", "/api/auth/pair", {"name": "bad name!"})
        assert (status, doc["error_code"]) == (400, "invalid_device_name")
        status, doc = _signed(desk, "POST", "/api/auth/pair", {"full": True})
        assert status == 200 and doc["full"] is True
        assert {d.name for d in load_devices(state) if d.active} == {
            "desk",
            "phone",
            "desk-2",
            "far",
        }
    finally:
        service.stop()


def test_with_a_public_url_the_page_pairs_on_it(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    public = "https://phone-test.example:8443"
    state = tmp_path / "state"
    service = start_service(
        state, bound_home, base_env, codex_bin, tmp_path / "serve.log", "--public-url", public
    )
    try:
        desk = sign_in(service.port, str(read_secret(state)), "desk", desk=True)
        status, doc = _signed(desk, "POST", "/api/auth/pair", {"name": "phone"})
        assert status == 200 and doc["url"].startswith(f"{public}/login#code=")
        assert doc["expires_in_sec"] <= 300 and doc["name"] == "phone" and doc["full"] is False
        assert doc["qr_svg"].startswith("<svg") and "<script" not in doc["qr_svg"]
    finally:
        service.stop()

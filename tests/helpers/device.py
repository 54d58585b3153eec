"""A signed-in device for tests that act as the owner's page over plain HTTP: a one-time code
from the service (asked with the owner's secret, as `loopx-chat open` asks over its socket),
redeemed for the device's key, and every request signed as the page's script signs it."""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import time
from dataclasses import dataclass, field

from loopx_chat.service.device_auth import server_proof, sign, signing_string


@dataclass
class Device:
    device_id: str
    name: str
    key: bytes = field(repr=False)
    port: int = 0
    run_id: str = ""

    def prove(self) -> str:
        """Check the service as the page does (it must know this device's key); the run id
        every signature then names."""
        challenge = secrets.token_urlsafe(24)
        doc = post(
            self.port, "/api/auth/prove", {"device_id": self.device_id, "challenge": challenge}, {}
        )
        assert doc["ok"], doc
        assert doc["proof"] == server_proof(self.key, challenge, doc["run_id"])
        self.run_id = str(doc["run_id"])
        return self.run_id

    def headers(self, method: str, target: str, body: bytes = b"") -> dict[str, str]:
        if not self.run_id:
            self.prove()
        stamp = str(int(time.time() * 1000))
        nonce = secrets.token_urlsafe(16)
        text = signing_string(method, target, stamp, nonce, body, self.run_id)
        return {
            "X-Loopx-Device": self.device_id,
            "X-Loopx-Time": stamp,
            "X-Loopx-Nonce": nonce,
            "X-Loopx-Signature": sign(self.key, text),
        }


def post(port: int, path: str, doc: dict, headers: dict[str, str]) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps(doc).encode()
    conn.request(
        "POST",
        path,
        body=body,
        headers={"Host": f"127.0.0.1:{port}", "Content-Type": "application/json", **headers},
    )
    reply = json.loads(conn.getresponse().read())
    conn.close()
    return reply


def login_code(port: int, secret: str, name: str | None = None, *, desk: bool = False) -> str:
    """`desk`: as `loopx-chat open` asks (the browser at the machine), not a pairing."""
    doc = post(
        port,
        "/api/auth/codes",
        {"desk": desk, **({"name": name} if name else {})},
        {"Authorization": f"Bearer {secret}"},
    )
    assert doc["ok"], doc
    return str(doc["code"])


def sign_in(port: int, secret: str, name: str | None = None, *, desk: bool = False) -> Device:
    code = login_code(port, secret, name, desk=desk)
    doc = post(port, "/api/auth/login", {"code": code}, {})
    assert doc["ok"], doc
    key = base64.urlsafe_b64decode(doc["key"] + "=" * (-len(doc["key"]) % 4))
    return Device(doc["device_id"], doc["name"], key, port)


def browser_sign_in(page, port: int, secret: str, name: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """Sign a Playwright page in as `loopx-chat open` would: to /login with a one-time code
    in the fragment; the page's script makes its own key and lands on `/`."""
    code = login_code(port, secret, name, desk=True)
    page.goto(f"http://127.0.0.1:{port}/login#code={code}")
    page.wait_for_function("() => location.pathname === '/' && !location.hash")


def redeem(url: str) -> Device:
    """What a browser does with a sign-in URL (`open --print`): spend its one-time code."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    port = int(parts.port or 80)
    code = parse_qs(parts.fragment)["code"][0]
    doc = post(port, "/api/auth/login", {"code": code}, {})
    assert doc["ok"], doc
    key = base64.urlsafe_b64decode(doc["key"] + "=" * (-len(doc["key"]) % 4))
    return Device(doc["device_id"], doc["name"], key, port)


def page_cards(device: Device) -> str:
    """The cards the page shows, fetched as its script fetches them (signed)."""
    conn = http.client.HTTPConnection("127.0.0.1", device.port, timeout=60)
    headers = {"Host": f"127.0.0.1:{device.port}", **device.headers("GET", "/api/page")}
    conn.request("GET", "/api/page", headers=headers)
    response = conn.getresponse()
    doc = json.loads(response.read())
    conn.close()
    assert response.status == 200, doc
    return str(doc["cards_html"])

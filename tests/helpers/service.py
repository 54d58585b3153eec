"""A client of a running local service: requests over real HTTP on its loopback port, the
events stream of a session, and every body it got back (for the canaries that must never come
back). The `service` fixture (tests/integration/conftest.py) runs one."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat.controller.chat_controller import ChatController
from tests.helpers.device import Device, sign_in


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Service:
    port: int
    controller: ChatController
    state: Path
    home: Path
    seen: list[bytes]
    secret: str
    _device: Device | None = None
    app: Any = None  # the ServiceApp (an owner-socket server of the same app may be added)

    def device(self) -> Device:
        """This service's signed-in test browser (signed in on first use)."""
        if self._device is None:
            self._device = sign_in(self.port, self.secret)
        return self._device

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        auth: str = "bearer",
    ) -> Reply:
        """`auth`: "bearer" (a program with the secret), "device" (the owner's signed-in
        page, signing this request), or anything else for none."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        hdrs = {"Host": f"127.0.0.1:{self.port}"}
        if auth == "bearer":
            hdrs["Authorization"] = f"Bearer {self.secret}"
        payload = raw
        if body is not None:
            payload = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if auth == "device":
            hdrs.update(self.device().headers(method, path, payload or b""))
        hdrs.update(headers or {})
        conn.request(method, path, body=payload, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        self.seen.append(data)
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)

    def events(self, session_id: str) -> list[dict[str, Any]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request(
            "GET",
            f"/api/chat/sessions/{session_id}/events",
            headers={"Host": f"localhost:{self.port}", "Authorization": f"Bearer {self.secret}"},
        )
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
        data = resp.read()
        conn.close()
        self.seen.append(data)
        return [
            json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")
        ]

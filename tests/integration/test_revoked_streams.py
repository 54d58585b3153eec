"""`devices revoke` ends a device's open streams: the cards stream and a session's events
stream (a turn still running), on a real `serve` with the real codex and the mock."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import read_secret
from tests.helpers.device import Device, sign_in
from tests.helpers.serve_process import start_service

pytestmark = pytest.mark.codex


def _owner(port: int, secret: str, method: str, path: str, body: object) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(
        method,
        path,
        body=json.dumps(body),
        headers={
            "Host": f"127.0.0.1:{port}",
            "Authorization": f"Bearer {secret}",
            "Content-Type": "application/json",
        },
    )
    doc = json.loads(conn.getresponse().read())
    conn.close()
    return doc


def _open_stream(device: Device, path: str) -> http.client.HTTPResponse:
    # The socket's timeout only keeps a broken test from hanging; nothing is timed.
    conn = http.client.HTTPConnection("127.0.0.1", device.port, timeout=60)
    conn.request(
        "GET", path, headers={"Host": f"127.0.0.1:{device.port}", **device.headers("GET", path)}
    )
    response = conn.getresponse()
    assert response.status == 200
    assert response.readline().startswith(b"event: ")
    return response


def _drain(response: http.client.HTTPResponse) -> bytes:
    """Everything until the service closes the stream (b"" lines end it)."""
    out = b""
    while line := response.readline():
        out += line
    return out


def test_revoking_a_device_ends_its_cards_and_session_streams(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    service = start_service(state, bound_home, base_env, codex_bin, tmp_path / "serve.log")
    try:
        secret = read_secret(state)
        session = _owner(
            service.port,
            secret,
            "POST",
            "/api/chat/sessions",
            {"goal_id": "g", "work_dir": str(work), "create_goal": True},
        )["session"]["session_id"]
        turn = _owner(
            service.port,
            secret,
            "POST",
            f"/api/chat/sessions/{session}/turns",
            {"text": "mock:hang"},
        )
        assert turn["ok"], turn
        device = sign_in(service.port, secret, "phone")
        cards = _open_stream(device, "/api/status/events")
        events = _open_stream(device, f"/api/chat/sessions/{session}/events")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "loopx_chat",
                "--state-dir",
                str(state),
                "devices",
                "revoke",
                "phone",
            ],
            env={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        _drain(cards)
        rest = _drain(events)
        assert b"event: end" not in rest  # ended by the revocation, not by the turn
        # And the device is refused from its next request on.
        conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=60)
        conn.request(
            "GET",
            "/api/page",
            headers={"Host": f"127.0.0.1:{service.port}", **device.headers("GET", "/api/page")},
        )
        assert conn.getresponse().status == 401
    finally:
        service.stop()

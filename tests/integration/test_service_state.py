"""The running service under the same state conditions as the CLI matrix: known conditions
are never 500 internal_error, problem entries carry `<path>`, the listen backlog holds a
burst of connections, and request lines are logged with control characters escaped."""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest

from loopx_chat.service.server import LoopbackServer
from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.conditions import read_only_bind
from tests.helpers.service import Service


def test_too_deep_json_is_bad_json(service: Service) -> None:
    reply = service.request(
        "POST",
        "/api/chat/sessions",
        raw=b'{"goal_id":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert reply.status == 400 and reply.json()["error_code"] == "bad_json"


@pytest.mark.parametrize(
    "work_dir",
    ["/tmp/a\x00b", "~no-such-user-16/x", "/tmp/\ud800", "/" + "a" * 5000, 42],
    ids=["nul", "unknown-user", "lone-surrogate", "too-long", "not-a-string"],
)
def test_bad_work_dir_is_usage_error(service: Service, work_dir: object) -> None:
    raw = json.dumps({"goal_id": "g", "work_dir": work_dir}).encode()
    reply = service.request(
        "POST", "/api/chat/sessions", raw=raw, headers={"Content-Type": "application/json"}
    )
    # A lone surrogate is refused at the body, before any field is read (valid_text).
    code = "invalid_text" if isinstance(work_dir, str) and "\ud800" in work_dir else "usage_error"
    assert reply.status == 400 and reply.json()["error_code"] == code, reply.body
    assert not (service.state / "sessions").exists() or not any(
        (service.state / "sessions").iterdir()
    )


def test_unwritable_state_is_503(service: Service) -> None:
    service.state.mkdir(parents=True, exist_ok=True)
    with read_only_bind(service.state):
        reply = service.request("POST", "/api/chat/sessions", {"goal_id": "g", "create_goal": True})
    assert reply.status == 503 and reply.json()["error_code"] == "state_unwritable", reply.body
    assert str(service.state) not in reply.body.decode()


@pytest.mark.parametrize("kind", ["fifo", "deep", "symlink", "mismatch"])
def test_session_problems_show_no_local_path(service: Service, kind: str) -> None:
    store = SessionStore(service.state)
    store.create(SessionRecord(session_id="bad", goal_id="g", created_at="t", updated_at="t"))
    path = store.session_path("bad")
    if kind == "fifo":
        path.unlink()
        os.mkfifo(path, 0o600)
    elif kind == "deep":
        path.write_bytes(b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}")
    elif kind == "symlink":
        target = service.state.parent / "elsewhere.json"
        path.rename(target)
        path.symlink_to(target)
    else:
        data = json.loads(path.read_bytes())
        path.write_text(json.dumps({**data, "session_id": "other"}))
    reply = service.request("GET", "/api/chat/sessions")
    assert reply.status == 200
    (problem,) = reply.json()["problems"]
    expected = "state_unsafe" if kind == "symlink" else "state_corrupt"
    assert problem["error_code"] == expected and "<path>" in problem["error"]
    assert str(service.state) not in reply.body.decode()
    one = service.request("GET", "/api/chat/sessions/bad")
    assert one.status != 500 or one.json()["error_code"] != "internal_error"
    assert one.json()["error_code"] == expected and str(service.state) not in one.body.decode()


def test_a_corrupt_goal_is_a_problem_card_not_a_500(service: Service) -> None:
    for goal in ("good", "bad"):
        folder = service.state / "goals" / goal
        folder.mkdir(parents=True)
    (service.state / "goals" / "bad" / "gates.jsonl").write_bytes(b"[" * 5000 + b"\n")
    status = service.request("GET", "/status.json")
    assert status.status == 200
    queue = {g["goal_id"]: g for g in status.json()["attention_queue"]}
    assert queue["bad"]["error_code"] == "state_corrupt" and "<path>" in queue["bad"]["error"]
    assert str(service.state) not in status.body.decode()
    page = service.request("GET", "/api/page")
    assert page.status == 200 and 'data-goal="bad"' in page.json()["cards_html"]
    assert str(service.state).encode() not in page.body


def test_listen_backlog_holds_a_burst_of_connections() -> None:
    server = LoopbackServer("127.0.0.1", 0, lambda port: None)
    try:
        # Nobody accepts: every connection waits in the kernel's backlog. With a backlog of
        # 5 the seventh connect would time out.
        sockets = [
            socket.create_connection(("127.0.0.1", server.port), timeout=2) for _ in range(100)
        ]
        for sock in sockets:
            sock.close()
    finally:
        server.server_close()


def test_request_lines_are_logged_with_control_characters_escaped(
    service: Service,
    capfd: pytest.CaptureFixture[str],
) -> None:
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        sock.sendall(
            b"GET /nope\x1b[31m\x07forged\x7f HTTP/1.1\r\n"
            b"Host: 127.0.0.1:%d\r\nConnection: close\r\n"
            % service.port
            + b"Authorization: Bearer %s\r\n\r\n" % service.secret.encode()
        )
        while sock.recv(65536):
            pass
    err = capfd.readouterr().err
    line = next((x for x in err.splitlines() if "/nope" in x), err)
    # The owner's request to nowhere: its path logged, escaped.
    assert "/nope\\x1b[31m\\x07forged\\x7f 404" in line
    assert not {"\x1b", "\x07", "\x7f"} & set(err)


@pytest.mark.parametrize(
    ("raw", "logged"),
    [
        (b"GARBAGE-secret-line\r\n\r\n", "request 400 refused before handling"),
        (b"GET /x?token=SECRET HTTP/9.9\r\n\r\n", "request 505 refused before handling"),
        (b"OPTIONS /y?token=SECRET HTTP/1.1\r\nHost: h\r\n\r\n", "request 501 refused"),
        (
            b"GET /z?token=SECRET HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n",
            "request 431 refused before handling",
        ),
        (b"GET /" + b"u" * 70000 + b" HTTP/1.1\r\n\r\n", "request 414 refused before handling"),
    ],
)
def test_requests_http_server_refuses_before_the_handler_are_logged_without_their_text(
    capfd: pytest.CaptureFixture[str], raw: bytes, logged: str
) -> None:
    server = LoopbackServer("127.0.0.1", 0, lambda port: None)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(raw)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    err = capfd.readouterr().err
    code = logged.split()[1]
    # A line http.server reads as HTTP/0.9 gets the error page alone, with no status line.
    assert reply.split(b" ", 2)[1] == code.encode() if reply.startswith(b"HTTP/") else reply
    assert f"Error code: {code}".encode() in reply
    assert f"loopx-chat serve: {logged}" in err
    assert "SECRET" not in err and "secret" not in err and "uuuuuuuu" not in err
    assert "/x" not in err and "/y" not in err and "/z" not in err  # nobody vouched for them

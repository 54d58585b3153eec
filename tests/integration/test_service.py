"""The local service over real HTTP on an ephemeral loopback port, with the real codex + mock.

Every endpoint, every error status, the Host/Origin/content-type refusals, a full turn with its
SSE events, concurrency on /status.json while a turn runs, and canaries that must never come
back in any response."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.status_index import StatusIndex
from loopx_chat.state.service_runtime import home_identity
from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.real_codex import make_controller
from tests.helpers.service import Service
from tests.helpers.waiting import wait_value


def test_capabilities(service: Service, codex_version: str) -> None:
    reply = service.request("GET", "/api/chat/capabilities")
    doc = reply.json()
    assert reply.status == 200 and doc["ok"] is True
    assert doc["schema_version"] == "loopx_chat_capabilities_v1"
    assert doc["runtime_identity"]["schema_version"] == "loopx_runtime_identity_v1"
    assert doc["runtime_identity"]["package_version"]
    assert doc["codex"] == {"available": True, "version": codex_version}
    assert doc["loaded_threads"] == 0  # nothing opened yet
    opened = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-c", "create_goal": True}
    )
    assert opened.status == 201
    assert service.request("GET", "/api/chat/capabilities").json()["loaded_threads"] == 1
    assert doc["codex_home"] == {
        "path": str(service.home),
        "source": "LOOPX_CHAT_CODEX_HOME",
        "id": home_identity(service.home),
    }
    assert "access-control-allow-origin" not in reply.headers


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:1234", "127.0.0.1.evil.example", "localhost:1"]
)
def test_foreign_host_headers_are_refused(service: Service, host: str) -> None:
    reply = service.request("GET", "/status.json", headers={"Host": host})
    assert reply.status == 403 and reply.json()["error_code"] == "forbidden_host"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]"])
def test_loopback_host_names_are_accepted(service: Service, host: str) -> None:
    reply = service.request("GET", "/status.json", headers={"Host": f"{host}:{service.port}"})
    assert reply.status == 200


def test_missing_host_header_is_refused(service: Service) -> None:
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        sock.sendall(b"GET /status.json HTTP/1.0\r\n\r\n")
        data = sock.recv(65536)
    assert data.startswith(b"HTTP/1.0 403") or data.startswith(b"HTTP/1.1 403")


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"Content-Type": "text/plain"}, "forbidden_request"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, "forbidden_request"),
        (
            {"Content-Type": "application/json", "Origin": "http://evil.example"},
            "forbidden_request",
        ),
        ({"Content-Type": "application/json", "Origin": "null"}, "forbidden_request"),
        ({"Content-Type": "application/json", "Origin": "http://localhost:1"}, "forbidden_request"),
    ],
)
def test_cross_site_writes_are_refused(
    service: Service, headers: dict[str, str], code: str
) -> None:
    reply = service.request("POST", "/api/chat/sessions", raw=b'{"goal_id":"g"}', headers=headers)
    assert reply.status == 403 and reply.json()["error_code"] == code
    assert SessionStore(service.state).list().sessions == ()


def _announced(
    service: Service,
    path: str,
    length: int,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    sock: socket.socket | None = None,
) -> bytes:
    """The answer to a POST that announces `length` bytes and sends `body` (over `sock`, the
    owner's socket, when given; else loopback TCP)."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    conn = sock or socket.create_connection(("127.0.0.1", service.port), timeout=60)
    with conn:
        conn.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n{extra}"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        head = b""
        while chunk := conn.recv(65536):  # the server closes after its answer
            head += chunk
    return head


def _digest(body: bytes) -> str:
    import hashlib

    from loopx_chat.service.device_auth import b64url

    return b64url(hashlib.sha256(body).digest())


def test_only_the_owners_turn_request_may_be_larger_than_one_mib(service: Service) -> None:
    """A turn of the owner's (over the owner's socket, or signed by a device that declares
    its body's digest) may carry any message the CLI takes; anyone else's request, and the
    owner's other requests, are refused over 1 MiB before a byte is read (issue 33: nobody
    else makes the service read more)."""
    from loopx_chat.service.app import MAX_BODY, TURN_BODY_MAX
    from loopx_chat.service.server import OwnerSocketServer
    from loopx_chat.state import owner_socket

    turns = "/api/chat/sessions/" + "a" * 32 + "/turns"
    device = service.device()
    big = b" " * (MAX_BODY + 1)

    def signed(path: str, body: bytes, digest: bool) -> dict[str, str]:
        headers = device.headers("POST", path, body)
        if digest:
            headers["X-Loopx-Content-SHA256"] = _digest(body)
        return headers

    bearer = {"Authorization": f"Bearer {service.secret}"}
    for path, length, headers in (
        (turns, MAX_BODY + 1, {}),  # nobody's
        (turns, MAX_BODY + 1, bearer),  # a program with the secret: not a device, not the socket
        (turns, MAX_BODY + 1, signed(turns, big, digest=False)),  # nothing checkable yet
        (turns, MAX_BODY + 1, {**signed(turns, big, True), "X-Loopx-Device": "nobody"}),
        (turns, MAX_BODY + 1, {**signed(turns, big, True), "X-Loopx-Content-SHA256": "x"}),
        ("/api/chat/sessions", MAX_BODY + 1, signed("/api/chat/sessions", big, True)),
        (turns, TURN_BODY_MAX + 1, signed(turns, b"", True)),
    ):
        head = _announced(service, path, length, headers)
        assert head.startswith(b"HTTP/1.1 413") and b"body_too_large" in head, (headers, head)
    # A device's turn over 1 MiB, its digest declared and signed, is read whole (and then
    # judged on what it says).
    read = _announced(service, turns, len(big), signed(turns, big, True), big)
    assert read.startswith(b"HTTP/1.1 400") and b"bad_json" in read, read[:200]
    # A declared digest that is not the body's: read, then refused as not the device's.
    other = b"x" * len(big)
    wrong = _announced(service, turns, len(big), signed(turns, other, True), big)
    assert wrong.startswith(b"HTTP/1.1 401"), wrong[:200]
    # Over the owner's socket the same turn is read whole; other requests stay at 1 MiB.
    owner = OwnerSocketServer(service.state, service.app)
    thread = threading.Thread(target=owner.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        via = _announced(service, turns, len(big), {}, big, owner_socket.connect(service.state, 60))
        assert via.startswith(b"HTTP/1.1 400") and b"bad_json" in via, via[:200]
        sock = owner_socket.connect(service.state, 60)
        refused = _announced(service, "/api/chat/sessions", MAX_BODY + 1, {}, b"", sock)
        assert refused.startswith(b"HTTP/1.1 413"), refused[:200]
    finally:
        owner.shutdown()
        owner.server_close()
        thread.join(timeout=10)


def test_error_statuses(service: Service) -> None:
    bad = service.request(
        "POST", "/api/chat/sessions", raw=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert bad.status == 400 and bad.json()["error_code"] == "bad_json"
    # Announce a body over 1 MiB: the server answers 413 before reading a byte of it.
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/chat/sessions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (service.port, (1 << 20) + 1)
        )
        head = b""
        while chunk := sock.recv(65536):  # the server closes after refusing
            head += chunk
    assert head.startswith(b"HTTP/1.1 413") and b"body_too_large" in head
    assert service.request("GET", "/api/chat/sessions/nope").status == 404
    assert service.request("GET", "/api/chat/sessions/..").status in (400, 404)
    assert service.request("GET", "/nope").status == 404
    assert service.request("DELETE", "/api/chat/sessions", body={}).status == 405
    missing = service.request("POST", "/api/chat/sessions", body={})
    assert missing.status == 400 and missing.json()["error_code"] == "usage_error"


def test_full_turn_over_http_with_sse(service: Service) -> None:
    canary = "CANARY-http-4d1e"
    opened = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-http", "create_goal": True}
    )
    assert opened.status == 201
    sid = opened.json()["session"]["session_id"]
    submitted = service.request(
        "POST",
        f"/api/chat/sessions/{sid}/turns",
        body={"text": f"{canary} mock:slow=0.05", "client_turn_id": "c-1"},
    )
    assert submitted.status == 202, submitted.body  # accepted; the reply streams on /events
    turn_id = submitted.json()["turn"]["id"]
    events = service.events(sid)
    deltas = "".join(e["delta"] for e in events if e["type"] == "delta")
    statuses = [e["status"] for e in events if e["type"] == "status"]
    assert deltas.startswith("mock reply #1")
    assert statuses[-1] == "completed"
    detail = service.request("GET", f"/api/chat/sessions/{sid}").json()
    (turn,) = detail["turns"]
    assert (turn["id"], turn["status"]) == (turn_id, "completed")
    replay = service.request(
        "POST", f"/api/chat/sessions/{sid}/turns", body={"text": "again", "client_turn_id": "c-1"}
    )
    assert replay.status == 200 and replay.json()["created"] is False
    assert replay.json()["turn"]["id"] == turn_id
    listing = service.request("GET", "/api/chat/sessions").json()
    assert [s["session_id"] for s in listing["sessions"]] == [sid]
    status = service.request("GET", "/status.json").json()
    assert status["schema_version"] == "loopx_chat_status_v1" and status["contract_version"] == 2
    (goal,) = status["attention_queue"]
    assert goal["projection"]["first_screen"]["latest_validation"].startswith(f"turn {turn_id}")
    page = service.request("GET", "/api/page")
    assert page.status == 200 and 'data-goal="g-http"' in page.json()["cards_html"]
    assert "content-security-policy" in service.request("GET", "/", auth="").headers
    resumed = service.request("POST", f"/api/chat/sessions/{sid}/resume", body={})
    assert resumed.status == 200
    not_active = service.request("POST", f"/api/chat/sessions/{sid}/interrupt", body={})
    assert not_active.status == 409
    everything = b"".join(service.seen)
    assert canary.encode() not in everything
    assert str(service.state).encode() not in everything


def test_mismatched_home_is_424_and_busy_thread_is_409(
    service: Service, tmp_path: Path, codex_bin: str, base_env: dict[str, str]
) -> None:
    store = SessionStore(service.state)
    store.create(
        SessionRecord(
            session_id="foreign",
            goal_id="g",
            created_at="2026-01-01T00:00:00Z",
            updated_at="2026-01-01T00:00:00Z",
            codex_home=str(tmp_path / "another-home"),
            upstream_thread_id="01a22600-0000-7000-8000-000000000000",
        )
    )
    before = store.session_path("foreign").read_bytes()
    for action, body in (("resume", {}), ("turns", {"text": "x"})):
        reply = service.request("POST", f"/api/chat/sessions/foreign/{action}", body=body)
        assert reply.status == 424 and reply.json()["error_code"] == "codex_home_mismatch"
    assert store.session_path("foreign").read_bytes() == before

    opened = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-busy", "create_goal": True}
    ).json()
    sid = opened["session"]["session_id"]
    service.request("POST", f"/api/chat/sessions/{sid}/turns", body={"text": "one"})
    service.events(sid)
    service.controller.close()  # the service lets go of the thread...
    with make_controller(service.state, service.home, base_env, codex_bin) as other:
        other.resume_session(sid)  # ...and another controller takes it
        busy = service.request("POST", f"/api/chat/sessions/{sid}/turns", body={"text": "two"})
    assert busy.status == 409 and busy.json()["error_code"] == "thread_busy"


def test_fifty_concurrent_status_clients_while_a_turn_runs(service: Service) -> None:
    sid = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-load", "create_goal": True}
    ).json()["session"]["session_id"]
    service.request("POST", f"/api/chat/sessions/{sid}/turns", body={"text": "mock:slow=0.2"})
    results: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        try:
            status = service.request("GET", "/status.json").status
        except OSError:
            status = -1
        with lock:
            results.append(status)

    threads = [threading.Thread(target=client) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 50 and set(results) == {200}
    service.events(sid)


def test_status_cache_recomputes_only_what_changed(tmp_path: Path) -> None:
    from loopx_chat.service.status_cache import StatusCache

    store, goals = SessionStore(tmp_path), GateStore(tmp_path)
    index = StatusIndex(store, goals, "home")
    # No sweep window: every read looks at the disk, so what it folds is what changed.
    cache = StatusCache(index, lambda: None, sweep_sec=0)
    first = cache.get()
    assert first[0]["goal_count"] == 0
    assert cache.get()[1] is first[1]  # nothing changed: the same bytes, nothing folded
    store.create(SessionRecord(session_id="a", goal_id="g", created_at="t", updated_at="t"))
    goals.request_gate("h", "Q?")
    assert cache.get()[0]["goal_count"] == 2 and index.folded == 2
    store.update("a", status="busy")
    assert cache.get()[0]["goal_count"] == 2 and index.folded == 1  # g alone
    goals.request_gate("h", "Q2?")  # an append to an existing file
    body = cache.get()[1]
    assert index.folded == 1
    assert cache.get()[1] is body and index.folded == 0


def test_page_escapes_every_value_and_shows_goal_records() -> None:
    from loopx_chat.service.page import render_cards

    status = {
        "attention_queue": [
            {
                "goal_id": "g<1>",
                "severity": "action",
                "answers": {"waiting_on": "<script>alert(1)</script>", "latest_run": "a & b"},
                "goal_state": {"objective": "Ship <v2>", "boundary": "repo & docs"},
                "quota": {"decision": "throttled", "reason_code": "token_budget_spent"},
                "host": {"stale": True, "behind_turns": 2},
                "reconcile_reason": "missing_validation",
            }
        ]
    }
    html = render_cards(status, {})
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "Ship &lt;v2&gt;" in html
    # codes become words on the page (the JSON keeps the codes)
    assert "paused by its budget (its token budget is spent)" in html
    assert "token_budget_spent" not in html and "throttled:" not in html
    assert "Codex is 2 turn(s) ahead, Codex finished, but nothing on record checks it" in html
    assert 'data-goal="g&lt;1&gt;"' in html


def test_a_refused_second_turn_does_not_end_the_running_turns_stream(service: Service) -> None:
    sid = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-sse", "create_goal": True}
    ).json()["session"]["session_id"]
    running = service.request(
        "POST", f"/api/chat/sessions/{sid}/turns", body={"text": "mock:slow=0.3"}
    )
    assert running.status == 202
    got: dict[str, list[dict[str, Any]]] = {}
    watcher = threading.Thread(target=lambda: got.setdefault("events", service.events(sid)))
    watcher.start()
    refused = service.request(
        "POST", f"/api/chat/sessions/{sid}/turns", body={"text": "x", "client_turn_id": "bad id!"}
    )
    assert refused.status == 400
    watcher.join(timeout=60)
    statuses = [e.get("status") for e in got["events"] if e["type"] == "status"]
    # The listener saw the running turn through to its end, not an early "end".
    assert statuses[-1] == "completed"


def test_bad_goal_ids_are_refused_and_status_survives_old_ones(service: Service) -> None:
    opened = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "bad goal/<x>", "create_goal": True}
    )
    assert opened.status == 400 and opened.json()["error_code"] == "invalid_goal_id"
    # A goal folder no writer would accept now (an older version's) does not break status.
    (service.state / "goals" / "bad goal").mkdir(parents=True)
    ok = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-fine", "create_goal": True}
    )
    assert ok.status == 201
    status = service.request("GET", "/status.json")
    assert status.status == 200
    assert [g["goal_id"] for g in status.json()["attention_queue"]] == ["g-fine"]
    assert service.request("GET", "/api/page").status == 200


def test_head_chunked_and_odd_lengths(service: Service) -> None:
    head = service.request("HEAD", "/status.json")
    assert head.status == 200 and head.body == b""
    assert int(head.headers["content-length"]) > 0
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        smuggled = f"GET /api/chat/sessions HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n\r\n"
        body = f"{len(smuggled):x}\r\n{smuggled}\r\n0\r\n\r\n"
        sock.sendall(
            (
                f"POST /api/chat/sessions HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + body
            ).encode()
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    # One refusal and the connection closed: the chunk was never run as a second request.
    assert answer.count(b"HTTP/1.1 ") == 1 and b" 400 " in answer.split(b"\r\n", 1)[0]
    odd = service.request(
        "POST", "/api/chat/sessions", raw=b"{}", headers={"Content-Length": "1_5"}
    )
    assert odd.status == 400


def test_status_reads_its_own_writes_at_once(service: Service) -> None:
    assert service.request("GET", "/status.json").json()["goal_count"] == 0
    opened = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-now", "create_goal": True}
    )
    assert opened.status == 201
    # No waiting for a cache window: the write through the service is seen by the next read.
    assert service.request("GET", "/status.json").json()["goal_count"] == 1
    # Goal records written by the CLI are in the goal's signature too (not only
    # gates/handoffs), so its row is folded again.
    index = StatusIndex(SessionStore(service.state), GateStore(service.state), "home")
    index.refresh()
    GoalLedger(GateStore(service.state)).set_goal_state(
        "g-now", {"objective": "Ship it", "acceptance": ["it ships"]}
    )
    index.refresh()
    assert index.folded == 1


def test_the_page_counts_archived_goals_in_its_header_and_renders_none(
    service: Service,
) -> None:
    """`GET /` is a data-less shell: the archive's count reaches the header through
    `GET /api/page` (`archived_count`), and an archived goal gets no card."""
    goals = GateStore(service.state)
    ledger = GoalLedger(goals)
    for goal in ("g-quiet", "g-asks"):
        ledger.set_goal_state(goal, {"objective": "Ship it", "acceptance": ["it ships"]})
    goals.request_gate("g-asks", "Deploy now?")  # waits on the owner: never archived
    old = time.time_ns() - 40 * 86400 * 10**9
    for path in (service.state / "goals").rglob("*.jsonl"):
        os.utime(path, ns=(old, old))  # both quiet for 40 days

    def page() -> dict[str, Any] | None:
        doc = service.request("GET", "/api/page").json()
        return doc if doc["goal_count"] == 1 and doc["archived_count"] == 1 else None

    doc = wait_value(page, what="the archived goal counted by /api/page")
    assert 'data-goal="g-asks"' in doc["cards_html"]
    assert "g-quiet" not in doc["cards_html"]
    status = service.request("GET", "/status.json").json()
    assert status["archive"]["count"] == 1
    assert [r["goal_id"] for r in status["archive"]["goals"]] == ["g-quiet"]
    assert status["unreadable_records"] == []


def test_error_responses_carry_no_local_paths(service: Service) -> None:
    canary = "CANARY-path-71c2"
    missing = service.request(
        "POST",
        "/api/chat/sessions",
        body={"goal_id": "g-p", "create_goal": True, "work_dir": f"/tmp/{canary}/w"},
    )
    assert missing.status == 400 and missing.json()["error_code"] == "usage_error"
    assert canary not in missing.body.decode() and "<path>" in missing.json()["error"]
    opened = service.request(
        "POST", "/api/chat/sessions", body={"goal_id": "g-p", "create_goal": True}
    )
    sid = opened.json()["session"]["session_id"]
    (service.state / "sessions" / sid / "session.json").write_text("{corrupt")
    broken = service.request("GET", f"/api/chat/sessions/{sid}")
    assert broken.status == 500 and broken.json()["error_code"] == "state_corrupt"
    assert str(service.state) not in broken.body.decode()


def test_requests_started_by_another_site_are_refused_and_record_nothing(
    service: Service,
) -> None:
    GateStore(service.state).request_gate("g-x", question="Proceed?")
    for site in ("cross-site", "same-site"):
        for path in ("/status.json", "/api/page"):
            got = service.request("GET", path, headers={"Sec-Fetch-Site": site})
            assert got.status == 403 and got.json()["error_code"] == "forbidden_request"
    # An image tag on another site never counted as the owner seeing the blocker.
    kinds = [e["kind"] for e in GateStore(service.state).control.events()]
    assert "blocker_displayed" not in kinds
    for site in ("none", "same-origin"):
        assert service.request("GET", "/", headers={"Sec-Fetch-Site": site}).status == 200
    # Serving the page is not the owner seeing it: the page says so once it rendered.
    assert "blocker_displayed" not in [e["kind"] for e in GateStore(service.state).control.events()]
    page = service.request("GET", "/api/page", auth="device").json()["cards_html"]
    ref = re.search(r'data-blockers="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    shown = {"shown": {"g-x": [ref]}}
    refused = service.request(
        "POST",
        "/api/status/rendered",
        body=shown,
        headers={"Sec-Fetch-Site": "cross-site"},
        auth="device",
    )
    assert refused.status == 403
    # Nobody signed in is nobody: no cookie or token exists that a page elsewhere could send.
    anonymous = service.request("POST", "/api/status/rendered", body=shown, auth="")
    assert (anonymous.status, anonymous.json()["error_code"]) == (401, "unauthorized")
    # A program with the secret is the owner, but not the owner's eyes on a page.
    program = service.request("POST", "/api/status/rendered", body=shown)
    assert (program.status, program.json()["error_code"]) == (403, "forbidden_request")
    assert "blocker_displayed" not in [e["kind"] for e in GateStore(service.state).control.events()]
    ok = service.request("POST", "/api/status/rendered", body=shown, auth="device")
    assert ok.json() == {"ok": True, "recorded": 1}
    again = service.request("POST", "/api/status/rendered", body=shown, auth="device")
    assert again.json() == {"ok": True, "recorded": 0}  # once per blocker
    displayed = [
        e for e in GateStore(service.state).control.events() if e["kind"] == "blocker_displayed"
    ]
    assert [(e["blocker_ref"], e["surface"]) for e in displayed] == [(ref, "page")]


def test_a_client_that_stops_sending_is_dropped(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopx_chat.service import server as server_module

    monkeypatch.setattr(server_module._Handler, "timeout", 1)
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        sock.sendall(
            f"POST /api/chat/sessions HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 10\r\n\r\n{".encode()
        )
        # Closed by the server, not answered (recv raises if it is still open after 10 s).
        assert sock.recv(65536) == b""
    assert service.request("GET", "/status.json").status == 200  # and it still serves

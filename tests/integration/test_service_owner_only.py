"""The service answers its owner only, and bounds what any client can hold.

A real `loopx-chat serve` process with the real codex and the model mock. Another local user
(`nobody`, through setpriv) tries every route and method with no secret, a guessed one, a
forged cookie and a guessed page token: each is 401 (only a bare /healthz answers, and says
only that it is up), nothing is written, no turn reaches the mock, no app-server starts. The
owner, with the secret, gets each route. Then the secret's files, the canary that the secret
never leaks, and the bounds: event streams under `ulimit -n 256`, the warm app-server cap, the
request deadline, a reset connection, HEAD on a stream.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.service.access import PUBLIC
from loopx_chat.service.app import ROUTES
from loopx_chat.state.service_runtime import (
    RUNTIME_FILE,
    SECRET_FILE,
    home_identity,
    read_runtime,
    read_secret,
)
from tests.helpers.conditions import as_nobody_prefix
from tests.helpers.device import login_code


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    port: int
    state: Path
    log: Path

    @property
    def secret(self) -> str:
        secret = read_secret(self.state)
        assert secret is not None
        return secret

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
        timeout: float = 60,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        hdrs = {"Host": f"127.0.0.1:{self.port}"}
        if auth:
            hdrs["Authorization"] = f"Bearer {self.secret}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read() if method != "HEAD" else b""
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, raw
        finally:
            conn.close()

    def app_servers(self) -> list[psutil.Process]:
        """The `codex app-server` processes the service started (codex forks helpers of its
        own with the same command line: those are its children, not ours)."""
        found = []
        for proc in psutil.Process(self.proc.pid).children(recursive=False):
            try:
                if "app-server" in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        return self.log.read_text(errors="replace")


def _serve(
    state: Path,
    home: Path,
    env: dict[str, str],
    codex_bin: str,
    *args: str,
    open_files: int | None = None,
) -> Served:
    port = _free_port()
    log = state.parent / f"serve-{port}.log"
    state.parent.mkdir(parents=True, exist_ok=True)

    def limit() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    with log.open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
                *("--codex-bin", codex_bin, "serve", "--port", str(port), *args),
            ],
            env={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=limit,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # service.json is written once the socket listens.
        if read_runtime(state) is not None:
            return Served(proc, port, state, log)
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve did not write service.json")


@pytest.fixture
def served(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> Iterator[Served]:
    # No notices: their background writes (the notice log, the status they are read from)
    # are not what an unauthenticated request may cause, and would race the snapshots.
    svc = _serve(tmp_path / "state", bound_home, base_env, codex_bin, "--notify", "none")
    try:
        yield svc
    finally:
        svc.stop()


def _snapshot(root: Path) -> dict[str, str]:
    """Every owner record (sessions, turns, goals, control events), by content. Caches the
    service rewrites on its own (the rollout index) are not records."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_file() and not rel.startswith(("cache", "index", "rollout")):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


ATTACK = r"""
import http.client, json, sys
port = int(sys.argv[1])
plan = json.loads(sys.stdin.read())
results = []
for method, path, body, headers in plan["requests"]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    sent = {"Host": "127.0.0.1:%d" % port}
    sent.update(headers)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=sent)
    resp = conn.getresponse()
    raw = resp.read() if method != "HEAD" else b""
    conn.close()
    results.append([method, path, resp.status, raw.decode("utf-8", "replace")])
files = {}
for name in plan["files"]:
    try:
        open(name, "rb").read()
        files[name] = "read"
    except OSError as exc:
        files[name] = type(exc).__name__
print(json.dumps({"results": results, "files": files}))
"""


_GROUP = "([^/]+)"


def _concrete(pattern: str, values: tuple[str, ...]) -> str:
    """A route's pattern with real ids in its groups, in order (regex escapes undone)."""
    parts = pattern.split(_GROUP)
    unescaped = [re.sub(r"\\(.)", r"\1", part) for part in parts]
    path = unescaped[0]
    for value, rest in zip(values, unescaped[1:], strict=True):
        path += value + rest
    return path


def _route_paths(goal: str, gate: str, session: str) -> list[tuple[str, str]]:
    out = []
    for route in ROUTES:
        pattern = route.pattern.pattern
        if "/gates/" in pattern:
            values: tuple[str, ...] = (goal, gate)
        elif pattern.startswith("/api/goals/"):
            values = (goal,)  # Run, Pause and the run's state
        else:
            values = (session,) * pattern.count(_GROUP)
        out.append((route.method, _concrete(pattern, values)))
    return out


def _body_for(method: str, path: str) -> dict[str, Any] | None:
    if method != "POST":
        return None
    if path.endswith("/decision"):
        return {"decision": "approve"}
    if path.endswith("/turns"):
        return {"text": "mock:reply=stolen"}
    if path.endswith("/rendered"):
        return {"shown": {}}
    if path == "/api/chat/sessions":
        return {"goal_id": "URGENT-approve-in-terminal", "create_goal": True, "work_dir": "/"}
    return {}


def test_another_local_user_gets_401_everywhere_and_changes_nothing(
    served: Served, mock: MockResponsesServer, bound_home: Path
) -> None:
    prefix = as_nobody_prefix()
    question = "Ship the owner-only release?"
    gate = GateStore(served.state).request_gate("g-own", question, actor="owner")
    status, _, raw = served.request(
        "POST", "/api/chat/sessions", {"goal_id": "g-own", "create_goal": True}
    )
    assert status == 201, raw
    session = json.loads(raw)["session"]
    status, _, raw = served.request(
        "POST", f"/api/chat/sessions/{session['session_id']}/turns", {"text": "hello"}
    )
    assert status in (201, 202), raw
    deadline = time.monotonic() + 30
    while (
        served.request("GET", f"/api/chat/sessions/{session['session_id']}")[2].count(
            b'"active_turn_id": null'
        )
        == 0
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)

    routes = _route_paths("g-own", gate.gate_id, session["session_id"])
    credentials: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer " + "A" * 43},
        {"Authorization": "Basic b3duZXI6b3duZXI="},
        {
            "X-Loopx-Device": "dev-" + "A" * 16,
            "X-Loopx-Time": str(int(time.time() * 1000)),
            "X-Loopx-Nonce": "guess",
            "X-Loopx-Signature": "A" * 43,
        },
    ]
    plan: list[tuple[str, str, Any, dict[str, str]]] = []
    for method, path in routes:
        for creds in credentials:
            plan.append((method, path, _body_for(method, path), creds))
            if method == "GET":
                plan.append(("HEAD", path, None, creds))
    plan += [
        ("GET", "/?token=" + "A" * 43, None, {}),
        ("GET", "/healthz", None, {}),
        ("HEAD", "/healthz", None, {}),
        ("GET", "/healthz?verbose=1", None, {}),
        ("GET", "/no-such-route", None, {}),
        ("DELETE", "/api/chat/sessions", None, {}),
    ]
    base = Path(tempfile.mkdtemp(prefix="loopx-attack-"))
    try:
        base.chmod(0o755)
        script = base / "attack.py"
        script.write_text(ATTACK)
        script.chmod(0o644)
        before = _snapshot(served.state)
        requests_before = len(mock.requests)
        servers_before = {p.pid for p in served.app_servers()}
        done = subprocess.run(
            [
                *prefix,
                *(getattr(sys, "_base_executable", sys.executable), "-S", str(script)),
                str(served.port),
            ],
            input=json.dumps(
                {
                    "requests": plan,
                    "files": [
                        str(served.state / SECRET_FILE),
                        str(served.state / RUNTIME_FILE),
                    ],
                }
            ),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        shutil.rmtree(base)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert set(got["files"].values()) == {"PermissionError"}
    for (method, path, status, body), sent in zip(got["results"], plan, strict=True):
        if path == "/healthz":
            assert status == 200 and body in ('{"ok": true}\n', ""), (method, path)
            continue
        public = (method.replace("HEAD", "GET"), path) in PUBLIC and method != "POST"
        if public and not sent[3]:
            assert status == 200, (method, path)  # the shell and its script: no data
        else:
            assert status == 401, (method, path, status, body)
        if method == "GET" and body.startswith("{"):
            assert json.loads(body)["error_code"] == "unauthorized"
        for private in (
            "g-own",
            question,
            session["session_id"],
            session.get("upstream_thread_id") or "no-thread",
            str(bound_home),
            served.secret,
            "URGENT",
        ):
            assert private not in body, (method, path, private)
    assert len(got["results"]) == len(plan)
    # Nothing written, no turn reached the model, no app-server started or stopped.
    assert _snapshot(served.state) == before
    assert len(mock.requests) == requests_before
    assert {p.pid for p in served.app_servers()} == servers_before
    assert GateStore(served.state).gate("g-own", gate.gate_id).status == "pending"

    # The owner, with the secret, gets every route.
    sid = session["session_id"]
    for method, path in routes:
        if path.endswith("/events"):
            status, headers, _ = served.request("HEAD", path)
            assert status == 200 and headers["content-type"] == "text/event-stream", path
            continue
        body = _body_for(method, path)
        if path == "/api/chat/sessions" and method == "POST":
            body = {"goal_id": "g-own"}
        if path.endswith("/turns"):
            body = {"text": "mock:reply=owner"}
        status, headers, raw = served.request(method, path, body)
        if path.endswith("/rendered"):
            # Only the owner's page reports what it rendered; a program would forge it.
            assert (status, json.loads(raw)["error_code"]) == (403, "forbidden_request")
        elif path == "/api/auth/pair":
            # Only the browser `open` signed in at the machine shows a pairing code.
            assert (status, json.loads(raw)["error_code"]) == (403, "pairing_not_allowed")
        elif path in ("/api/auth/login", "/api/auth/prove"):
            # A code or a device the service does not know, whoever asks.
            assert (status, json.loads(raw)["error_code"]) == (401, "login_code_invalid")
        elif path.endswith("/interrupt"):
            assert status in (200, 409), raw  # the turn may already be over
        elif path.endswith("/contract"):
            # The public contract is read, never refused, for the owner.
            assert status == 200 and json.loads(raw)["goal_id"] == "g-own", raw
        elif path.startswith("/api/goals/") and "/gates/" not in path:
            # This goal has no budget to run with and no run: the owner gets the refusal's
            # code, never a 401 (Reopen without a note is a usage error).
            code = json.loads(raw)["error_code"]
            assert (status, code) in (
                (400, "budget_required"),
                (404, "run_not_found"),
                (409, "run_not_complete"),
                (400, "usage_error"),
            ), raw
        else:
            assert status < 300, (method, path, status, raw)
    decided = GateStore(served.state).gate("g-own", gate.gate_id)
    assert (decided.status, decided.decided_by) == ("approved", "owner-api")
    assert sid


def test_the_secret_and_runtime_files(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    # A stale service.json (its pid is gone) is ignored and replaced.
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = {"schema_version": "loopx_chat_service_runtime_v1", "port": 1, "pid": dead.pid}
    stale |= {"started_at": "x", "version": "0", "codex_home_id": "x", "process_started": 1.0}
    (state / RUNTIME_FILE).write_text(json.dumps(stale))
    (state / RUNTIME_FILE).chmod(0o600)
    assert read_runtime(state) is None
    svc = _serve(state, bound_home, base_env, codex_bin)
    try:
        for name in (SECRET_FILE, RUNTIME_FILE):
            assert (state / name).stat().st_mode & 0o777 == 0o600, name
        assert state.stat().st_mode & 0o777 == 0o700
        assert len(svc.secret) >= 43  # 32 random bytes, urlsafe
        runtime = read_runtime(state)
        assert runtime is not None
        assert (runtime.port, runtime.pid) == (svc.port, svc.proc.pid)
        assert runtime.codex_home_id == home_identity(bound_home)
        _, _, raw = svc.request("GET", "/api/chat/capabilities")
        assert json.loads(raw)["codex_home"]["id"] == runtime.codex_home_id
        secret = svc.secret
    finally:
        log = svc.stop()
    assert svc.proc.returncode == 0, log
    assert not (state / RUNTIME_FILE).exists()  # removed on a clean stop
    # The next start keeps the same secret (pages stay logged in across restarts).
    again = _serve(state, bound_home, base_env, codex_bin)
    try:
        assert again.secret == secret
    finally:
        again.stop()
    # A secret others could have read is refused, and left exactly as it was.
    (state / SECRET_FILE).chmod(0o644)
    before = (state / SECRET_FILE).read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "serve", "--port", "0"],
        env={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stderr.startswith("error [state_unsafe]:"), done.stderr
    assert "Traceback" not in done.stderr and secret not in done.stderr
    assert (state / SECRET_FILE).read_bytes() == before
    assert (state / SECRET_FILE).stat().st_mode & 0o777 == 0o644


def test_the_secret_never_leaves_in_a_log_error_status_page_or_event(served: Served) -> None:
    secret = served.secret
    GateStore(served.state).request_gate("g-canary", "Decide?", actor="owner")
    seen: list[bytes] = []
    for method, path, body in (
        ("GET", "/", None),
        ("GET", "/status.json", None),
        ("GET", "/api/chat/capabilities", None),
        ("GET", "/api/chat/sessions", None),
        ("GET", "/api/chat/sessions/nope", None),
        ("POST", "/api/chat/sessions", {"goal_id": "missing-goal"}),
        ("POST", "/api/chat/sessions", {"goal_id": "g-canary", "work_dir": 7}),
        ("GET", "/nope", None),
    ):
        status, headers, raw = served.request(method, path, body)
        seen.append(raw + json.dumps(headers).encode())
    # Wrong and missing credentials: 401s carry no secret either.
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Cookie": f"token={secret}"}):
        status, got_headers, raw = served.request(
            "GET", "/status.json", headers=headers, auth=False
        )
        assert status == 401
        seen.append(raw + json.dumps(got_headers).encode())
    # The status event stream: read its first event, then leave.
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    conn.request(
        "GET",
        "/api/status/events",
        headers={"Host": f"127.0.0.1:{served.port}", "Authorization": f"Bearer {secret}"},
    )
    resp = conn.getresponse()
    seen.append(resp.fp.readline() + resp.fp.readline())
    conn.close()
    # The old login URL is nobody, and no answer sets a cookie.
    status, headers, raw = served.request("GET", f"/?token={secret}", auth=False)
    assert status == 401 and "set-cookie" not in headers
    seen.append(raw + json.dumps(headers).encode())
    # A browser signs in with a one-time code: what it gets back is its own key, never the
    # secret; neither the code nor the key is logged.
    code = login_code(served.port, secret)
    status, headers, raw = served.request("POST", "/api/auth/login", {"code": code}, auth=False)
    assert status == 200 and "set-cookie" not in headers
    key = json.loads(raw)["key"]
    assert key != secret
    seen.append(raw + json.dumps(headers).encode())
    log = served.stop()
    assert secret not in log and "token=" not in log and code not in log and key not in log
    assert "Traceback" not in log
    for chunk in seen:
        assert secret.encode() not in chunk
    for path in served.state.rglob("*"):
        if path.is_file() and path.name != SECRET_FILE:
            assert secret.encode() not in path.read_bytes(), path


def _status_line(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0]


def test_400_event_streams_under_ulimit_256_leave_the_owner_a_working_page(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    svc = _serve(tmp_path / "state", bound_home, base_env, codex_bin, open_files=256)
    socks: list[socket.socket] = []
    try:
        request = (
            f"GET /api/status/events HTTP/1.1\r\nHost: 127.0.0.1:{svc.port}\r\n"
            f"Authorization: Bearer {svc.secret}\r\n\r\n"
        ).encode()
        statuses: list[bytes] = []
        for _ in range(400):
            sock = socket.create_connection(("127.0.0.1", svc.port), timeout=30)
            sock.sendall(request)
            socks.append(sock)
        for sock in socks:
            statuses.append(_status_line(sock))
        held = sum(1 for s in statuses if s.startswith(b"HTTP/1.1 200"))
        refused = sum(1 for s in statuses if s.startswith(b"HTTP/1.1 503"))
        assert held == 64 and held + refused == 400, set(statuses)
        # The owner's page and a write still work while the 64 are held (1 s to answer).
        status, _, raw = svc.request("GET", "/", timeout=1.0)
        assert status == 200 and b"<html" in raw
        status, _, raw = svc.request(
            "POST", "/api/chat/sessions", {"goal_id": "g-live", "create_goal": True}
        )
        assert status == 201, raw
    finally:
        for sock in socks:
            sock.close()
        log = svc.stop()
    assert "Traceback" not in log and "EMFILE" not in log and "Too many open files" not in log


def test_twenty_session_opens_leave_at_most_the_warm_cap_of_app_servers(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    svc = _serve(tmp_path / "state", bound_home, base_env, codex_bin, "--max-warm", "3")
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, len(svc.app_servers()))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    codes: list[int] = []
    try:
        for n in range(20):
            status, headers, raw = svc.request(
                "POST", "/api/chat/sessions", {"goal_id": f"g-{n}", "create_goal": True}
            )
            codes.append(status)
            if status == 503:
                assert json.loads(raw)["error_code"] == "busy" and "retry-after" in headers
    finally:
        stop.set()
        watcher.join()
        log = svc.stop()
    # Each open's thread is idle once it answers: the least recently used one makes room.
    assert codes == [201] * 20, log
    assert 1 <= peak <= 3, peak


def test_a_busy_cap_refuses_with_a_retry_hint_and_spawns_nothing(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    svc = _serve(tmp_path / "state", bound_home, base_env, codex_bin, "--max-warm", "1")
    try:
        status, _, raw = svc.request(
            "POST", "/api/chat/sessions", {"goal_id": "g-a", "create_goal": True}
        )
        sid = json.loads(raw)["session"]["session_id"]
        status, _, raw = svc.request(
            "POST", f"/api/chat/sessions/{sid}/turns", {"text": "mock:hang"}
        )
        assert status in (201, 202), raw
        servers = {p.pid for p in svc.app_servers()}
        before = _snapshot(svc.state)
        status, headers, raw = svc.request(
            "POST", "/api/chat/sessions", {"goal_id": "g-b", "create_goal": True}
        )
        assert (status, json.loads(raw)["error_code"]) == (503, "busy")
        assert int(headers["retry-after"]) > 0
        assert {p.pid for p in svc.app_servers()} == servers
        assert _snapshot(svc.state) == before
    finally:
        svc.stop()


def test_a_slow_client_is_closed_at_the_request_deadline(served: Served) -> None:
    # The deadline is 10 s in all for the request line, headers and body: a client sending a
    # header byte every 0.5 s for 30 s is cut off before it finishes.
    line = f"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nX-Slow: ".encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(line)
        cut = False
        for _ in range(60):
            try:
                sock.sendall(b"a")
            except OSError:
                cut = True
                break
            sock.settimeout(0.5)
            try:
                if sock.recv(1) == b"":
                    cut = True
                    break
            except TimeoutError:
                pass
        assert cut, "the server kept a trickling client past its deadline"
    status, _, _ = served.request("GET", "/healthz", auth=False)
    assert status == 200
    log = served.stop()
    assert "not read within the deadline" in log


def test_a_reset_connection_logs_one_escaped_line(served: Served) -> None:
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
    sock.sendall(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Part")
    time.sleep(0.2)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # RST
    deadline = time.monotonic() + 10
    while "connection failed" not in served.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = served.stop()
    failed = [line for line in log.splitlines() if "connection failed" in line]
    assert failed == ["loopx-chat serve: connection failed: ConnectionResetError"], log
    assert "Traceback" not in log and "File " not in log


def test_head_on_an_event_stream_is_headers_only(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(
            f"HEAD /api/status/events HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
            f"Authorization: Bearer {served.secret}\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):  # the server closes: no body follows
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
    assert body == b""


def test_loopx_chat_open_puts_nothing_that_grants_access_on_argv(
    served: Served, tmp_path: Path, base_env: dict[str, str]
) -> None:
    """`open` hands the browser a 0600 file in the 0700 state dir (as Jupyter does): its argv
    names a file another user cannot read, and replayed later in a fresh browser profile it
    signs nothing in (the one-time code in it was spent by the owner's browser)."""
    from playwright.sync_api import sync_playwright

    from tests.helpers.serve_process import chromium

    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "opened.json"
    opener = bindir / "xdg-open"
    opener.write_text(
        "#!" + sys.executable + "\nimport json, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    opener.chmod(0o755)
    env = {**base_env, "PATH": f"{bindir}:{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(served.state), "open"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (argv,) = json.loads(record.read_text())
    redirect = served.state / "open.html"
    assert argv == str(redirect)
    assert redirect.stat().st_mode & 0o777 == 0o600
    assert "#code=" not in argv and served.secret not in argv
    assert served.secret not in done.stderr + done.stdout + redirect.read_text()
    # Another local user cannot read what the argv names.
    peek = subprocess.run(
        [*as_nobody_prefix(), "cat", str(redirect)], capture_output=True, timeout=60, check=False
    )
    assert peek.returncode != 0 and b"code" not in peek.stdout
    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=args)
        try:
            owner = browser.new_context().new_page()
            owner.goto(redirect.as_uri())
            owner.wait_for_selector("section.card, p.empty")
            owner.wait_for_function("() => document.getElementById('about').textContent")
            # The same argv in a fresh profile, after the owner's browser used it.
            replay = browser.new_context().new_page()
            replay.goto(redirect.as_uri())
            replay.wait_for_function(
                "() => document.getElementById('live').textContent.includes('not signed in')"
            )
            assert replay.locator("section.card").count() == 0
        finally:
            browser.close()
    devices = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-m",
                "loopx_chat",
                "--state-dir",
                str(served.state),
                "devices",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    )["devices"]
    assert [d["name"] for d in devices] == ["browser-1"]  # one browser got in, once
    served.stop()
    gone = subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(served.state), "open"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert gone.returncode == 1 and gone.stderr.startswith("error [service_not_running]:")

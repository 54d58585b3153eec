"""`serve` on a socket systemd passed (sd_listen_fds: `LISTEN_PID`, `LISTEN_FDS`, fd 3): a
real listening socket handed to a real `serve` process, exactly as systemd's socket unit
does, so the port stays held while the service restarts; what it refuses; and the protocol's
own rules (another process's `LISTEN_PID` is not ours; the variables are gone afterwards)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopx_chat.service.inherited_socket import inherited_listener, listen_fds
from tests.helpers.waiting import wait_for

# What systemd does between fork and exec, in bash (dash takes no fd above 9): the socket as
# fd 3, LISTEN_PID the pid that execs `serve` (`exec` keeps the shell's pid), LISTEN_FDS 1.
AS_SYSTEMD = 'fd=$1; shift; export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@" 3<&"$fd"'


def serve_argv(root: Path, port: int) -> list[str]:
    state = ("--state-dir", str(root / "state"))
    return [sys.executable, "-m", "loopx_chat", *state, "serve", "--port", str(port)]


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(root / "home")}


def start_on(sock: socket.socket, root: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["/bin/bash", "-c", AS_SYSTEMD, "bash", str(sock.fileno()), *serve_argv(root, port)],
        pass_fds=(sock.fileno(),),
        env=env_for(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def get(port: int, path: str = "/healthz") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        return conn.recv(256)


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A loopback socket bound and listening, as `loopx-chat.socket` leaves it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock


@pytest.fixture
def taken() -> Iterator[int]:
    """A port someone else listens on: a `serve` that bound its own would fail there."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        yield int(other.getsockname()[1])


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return err


def test_serve_accepts_on_the_socket_it_was_passed(
    tmp_path: Path, listening: socket.socket, taken: int
) -> None:
    port = int(listening.getsockname()[1])
    proc = start_on(listening, tmp_path, taken)
    try:
        wait_for(lambda: (tmp_path / "state" / "service.json").exists() or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()[1]
        assert get(port).startswith(b"HTTP/1.1 200 ")
        # service.json names the port it really serves, the socket's, not --port.
        runtime = json.loads((tmp_path / "state" / "service.json").read_text())
        assert runtime["port"] == port
    finally:
        err = stop(proc)
    assert f"listening on http://127.0.0.1:{port}/" in err


def test_the_port_stays_held_while_the_service_restarts(
    tmp_path: Path, listening: socket.socket, taken: int
) -> None:
    port = int(listening.getsockname()[1])
    first = start_on(listening, tmp_path, taken)
    try:
        wait_for(lambda: (tmp_path / "state" / "service.json").exists())
        assert get(port).startswith(b"HTTP/1.1 200 ")
    finally:
        stop(first)
    # Nobody serves now, yet a client connects (the held socket queues it) and is answered
    # by the next service started on the same socket.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as waiting:
        waiting.sendall(f"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        second = start_on(listening, tmp_path, taken)
        try:
            assert waiting.recv(256).startswith(b"HTTP/1.1 200 ")
        finally:
            stop(second)


@pytest.mark.parametrize(
    ("family", "kind", "address", "code"),
    [
        (socket.AF_INET, socket.SOCK_DGRAM, "127.0.0.1", "inherited_socket_invalid"),
        (socket.AF_INET, socket.SOCK_STREAM, "0.0.0.0", "non_loopback_host"),
    ],
    ids=["datagram", "all interfaces"],
)
def test_a_socket_that_cannot_be_served_is_refused(
    tmp_path: Path, taken: int, family: int, kind: int, address: str, code: str
) -> None:
    with socket.socket(family, kind) as sock:
        sock.bind((address, 0))
        if kind == socket.SOCK_STREAM:
            sock.listen(1)
        proc = start_on(sock, tmp_path, taken)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"error [{code}]" in err and "Traceback" not in err
    assert not (tmp_path / "state" / "service.json").exists()


def test_another_process_listen_pid_is_not_ours(tmp_path: Path) -> None:
    """sd_listen_fds: a LISTEN_PID that is not this process's means nothing was passed (a
    parent's variables leaked through); serve binds its own --port."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = int(free.getsockname()[1])
    env = {**env_for(tmp_path), "LISTEN_PID": "1", "LISTEN_FDS": "1"}
    proc = subprocess.Popen(serve_argv(tmp_path, port), env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (tmp_path / "state" / "service.json").exists())
        assert get(port).startswith(b"HTTP/1.1 200 ")
    finally:
        stop(proc)


def test_the_protocol_rules_and_the_variables_are_removed() -> None:
    assert listen_fds({"LISTEN_PID": "7", "LISTEN_FDS": "2"}, 7) == [3, 4]
    assert listen_fds({"LISTEN_PID": "7", "LISTEN_FDS": "2"}, 8) == []
    assert listen_fds({"LISTEN_PID": "7", "LISTEN_FDS": "²"}, 7) == []
    assert listen_fds({}, 7) == []
    leaked = {"LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "x", "KEEP": "1"}
    copy = dict(leaked)
    assert inherited_listener(leaked, copy) is None  # not ours: no descriptor is touched
    assert leaked == copy == {"KEEP": "1"}  # and no child (codex) sees them

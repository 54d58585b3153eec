"""`loopx-chat serve` as a real process on a free loopback port (`start_serve`; and
`start_service`, ready once its service.json names it, its log kept for the requests it
served), and the Debian Chromium that loads its first screen (missing: a skip locally, a
failure under CI)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(
    state: Path, home: Path, env: dict[str, str], codex_bin: str
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loopx_chat",
            "--state-dir",
            str(state),
            "--codex-bin",
            codex_bin,
            "serve",
            "--port",
            str(port),
        ],
        env={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve did not start listening")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        message = "Debian chromium is missing; `make test` installs it where apt is available"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return exe


@dataclass
class RunningService:
    """A `loopx-chat serve` process of the tests, its port and its log."""

    proc: subprocess.Popen[bytes]
    port: int
    state: Path
    log: Path

    def served(self) -> list[str]:
        """The request lines it logged so far (`POST /api/... 200 3ms`)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [line for line in text.splitlines() if " /api/" in line]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start_service(
    state: Path,
    home: Path,
    env: dict[str, str],
    codex_bin: str,
    log: Path,
    *serve_args: str,
    port: int | None = None,
) -> RunningService:
    """`serve` for a state dir, a home and an environment, its stderr in `log`, on `port` (a
    free one when None); ready once its `service.json` names it (written after it listens)."""
    from loopx_chat.state.service_runtime import read_runtime

    port = free_port() if port is None else port
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
                *("--codex-bin", codex_bin, "serve", "--port", str(port), *serve_args),
            ],
            env={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    service = RunningService(proc=proc, port=port, state=state, log=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        runtime = read_runtime(state)
        if runtime is not None and runtime.pid == proc.pid:
            return service
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    service.stop()
    raise AssertionError(f"serve did not start: {log.read_text(errors='replace')[-2000:]}")

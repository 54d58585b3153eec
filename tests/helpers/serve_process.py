"""`loopx-chat serve` as a real process on a free loopback port, and the Debian Chromium that
loads its first screen (missing: a skip locally, a failure under CI)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
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

"""A foreground `chat new` on a terminal asks the owner there, and the answer reaches codex."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer


def _run_on_a_tty(argv: list[str], env: dict[str, str], reply: bytes) -> tuple[int, str]:
    master, slave = os.openpty()
    proc = subprocess.Popen(
        argv, env=env, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    os.close(slave)
    err: list[bytes] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read1(4096), b"")))  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + 60
    while b"approve?" not in b"".join(err):
        assert time.monotonic() < deadline and proc.poll() is None, b"".join(err)
        time.sleep(0.05)
    os.write(master, reply)
    code = proc.wait(60)
    reader.join(5)
    os.close(master)
    return code, b"".join(err).decode()


@pytest.mark.parametrize(
    ("reply", "exists", "status"), [(b"y\n", True, "approved"), (b"\n", False, "rejected")]
)
def test_chat_new_on_a_terminal_asks_there(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
    reply: bytes,
    exists: bool,
    status: str,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    state = tmp_path / "state"
    argv = [
        sys.executable,
        "-m",
        "loopx_chat",
        "--state-dir",
        str(state),
        "--codex-bin",
        codex_bin,
        "chat",
        "--sandbox",
        "workspace-write",
        "new",
        "--goal",
        "g",
        "--cwd",
        str(work),
        "--approval",
        "untrusted",
        f"mock:shell=touch {work}/f",
    ]
    code, err = _run_on_a_tty(argv, {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}, reply)
    assert code == 0, err
    assert f"run: /bin/bash -lc 'touch {work}/f'" in err or f"touch {work}/f" in err
    assert (work / "f").exists() is exists
    (gate,) = GateStore(state).gates("g")
    assert gate.status == status and gate.decided_by == "owner-terminal"


def test_goal_run_on_a_terminal_asks_there_and_the_run_goes_on(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    """Codex asks on a continuation turn of a foreground run: the terminal asks the owner,
    the yes reaches codex (the file is made in the writable sandbox the run was given), and
    the run goes on to its budget."""
    from tests.helpers.goals import goal_with_policy

    state = tmp_path / "state"
    work = goal_with_policy(state, "g", "untrusted")
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "--codex-bin", codex_bin]
    opened = subprocess.run(
        [*base, "chat", "new", "--goal", "g", "--cwd", str(work), "mock:text=ready"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert opened.returncode == 0, opened.stderr
    mock.script(f"mock:shell=touch {work}/f", default="mock:text=working on it")
    argv = [*base, "goal", "run", "g", "--token-budget", "12000", "--sandbox", "workspace-write"]
    code, err = _run_on_a_tty(argv, env, b"y\n")
    assert code == 3, err  # the budget: the run went on after the owner's yes
    assert f"touch {work}/f" in err
    assert (work / "f").exists()
    (gate,) = GateStore(state).gates("g")
    assert gate.status == "approved" and gate.decided_by == "owner-terminal"

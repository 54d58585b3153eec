"""`pids`: a recorded pid's start time, which tells the process a record names from a later
one that reuses its pid. psutil, the dependency it stands in for on Linux, is the oracle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from loopx_chat import pids


def _started(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdin=subprocess.PIPE)


def test_this_process_and_a_child_start_when_psutil_says() -> None:
    child = _started(["sleep", "30"])
    try:
        for pid in (os.getpid(), child.pid, 1):
            assert pids.start_time(pid) == psutil.Process(pid).create_time()
    finally:
        child.kill()
        child.wait()


def test_a_command_name_with_parentheses_and_spaces_is_read_past(tmp_path: Path) -> None:
    # The kernel's command name sits in parentheses before the start time and may hold both.
    odd = tmp_path / "a) b (c) 1 2"
    odd.symlink_to(Path(sys.executable))
    child = _started([str(odd), "-c", "import sys; sys.stdin.read()"])
    try:
        name = psutil.Process(child.pid).name()
        assert ")" in name and " " in name  # the name the kernel keeps is the odd one
        assert pids.start_time(child.pid) == psutil.Process(child.pid).create_time()
    finally:
        child.kill()
        child.wait()


def test_a_zombie_still_has_its_start_time_and_a_reaped_pid_has_none() -> None:
    child = _started(["true"])
    expected = psutil.Process(child.pid).create_time()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: a zombie
    assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
    assert pids.start_time(child.pid) == expected
    child.wait()
    assert not psutil.pid_exists(child.pid)
    assert pids.start_time(child.pid) is None


def test_where_there_is_no_proc_psutil_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pids.sys, "platform", "darwin")
    assert pids.start_time(os.getpid()) == psutil.Process().create_time()
    gone = _started(["true"])
    gone.wait()
    assert pids.start_time(gone.pid) is None

"""How `AppServerProcess.close` ends a process: stdin first, then SIGTERM, then SIGKILL.

These are faults the real app-server cannot show on demand (it always exits when its stdin
closes), so small shell programs stand in for it. What each one does on stdin's end and on
SIGTERM is written into a file, and the file is the oracle: no timing is asserted.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

import psutil
import pytest

from loopx_chat.codex.app_server import AppServerProcess


def _program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "server.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _spawn(tmp_path: Path, program: Path) -> AppServerProcess:
    return AppServerProcess.spawn(
        executable=program,
        codex_home=tmp_path,
        work_dir=tmp_path,
        environ={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stderr_log=tmp_path / "stderr.log",
    )


def test_a_server_that_exits_on_end_of_stdin_is_never_signalled(tmp_path: Path) -> None:
    log = tmp_path / "events"
    program = _program(
        tmp_path, f"trap 'echo term >> {log}; exit 3' TERM\ncat > /dev/null\necho eof >> {log}\n"
    )
    proc = _spawn(tmp_path, program)
    assert proc.close(grace=5.0) == 0
    assert log.read_text() == "eof\n"


@pytest.mark.parametrize(
    ("on_term", "closed_with"),
    [
        ("exit 3", 3),  # it honours SIGTERM
        (":", -signal.SIGKILL),  # it ignores SIGTERM too: SIGKILL ends it
    ],
)
def test_a_server_that_ignores_end_of_stdin_gets_sigterm_then_sigkill(
    tmp_path: Path, on_term: str, closed_with: int
) -> None:
    log = tmp_path / "events"
    # `cat` returns at end of stdin; the loop keeps the program running after it.
    program = _program(
        tmp_path,
        f"trap 'echo term >> {log}; {on_term}' TERM\n"
        f"cat > /dev/null\necho eof >> {log}\nwhile :; do sleep 0.05; done\n",
    )
    proc = _spawn(tmp_path, program)
    assert proc.close(grace=0.5) == closed_with
    assert log.read_text() == "eof\nterm\n"


def test_a_wrapper_that_exited_is_not_waited_out_while_its_child_holds_stdout(
    tmp_path: Path,
) -> None:
    """The wrapper exits at end of stdin, but a child it left keeps the stdout pipe open, so
    stdout never ends: the exit must still be seen, and the child ended with the group."""
    log = tmp_path / "events"
    pid_file = tmp_path / "child.pid"
    program = _program(
        tmp_path,
        f'sh -c \'trap "echo child-term >> {log}; exit 0" TERM; echo $$ > {pid_file}; '
        f"while :; do sleep 0.05; done' < /dev/null &\n"
        f"while [ ! -s {pid_file} ]; do sleep 0.01; done\n"
        f"cat > /dev/null\necho eof >> {log}\n",
    )
    proc = _spawn(tmp_path, program)
    child = _read_pid(pid_file)
    assert proc.close(grace=30.0) == 0
    # Exited by itself: no SIGTERM was sent (the child would have written it down), and the
    # final SIGKILL of the group ended the child that still held stdout.
    assert log.read_text() == "eof\n"
    assert _ends(child)


def _read_pid(path: Path) -> int:
    for _ in range(1000):
        text = path.read_text().strip() if path.exists() else ""
        if text.endswith("\n") or text.isdigit():
            return int(text)
        time.sleep(0.01)
    raise AssertionError("the wrapper's child never started")


def _ends(pid: int) -> bool:
    """Gone or a zombie (nobody may reap an orphan in a container), within a few seconds."""
    for _ in range(500):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.01)
    return False

"""A full disk in the middle of a turn (issue 34, case 6), on a real small filesystem: the
state dir is a tmpfs mounted with `size=`, filled to its last byte while the real codex
streams the reply from the mock. The turn's outcome is recorded once space returns (by the
service that ran it) or by the next command (after a CLI that ran it has exited); it is
never left `running`, the session never stays `busy`, and the next send does not relabel
the completed turn `interrupted`."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore
from tests.helpers.waiting import wait_value

WORDS = " ".join(f"w{i}" for i in range(10))
SLOW_REPLY = f"mock:slow=0.3 mock:text={WORDS}"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs of its own (root mounts it; anyone else fails under CI)."""
    where = tmp_path / "small-disk"
    where.mkdir()
    if os.geteuid() != 0:
        message = "mounting a small tmpfs needs root"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write until the filesystem says ENOSPC; the filler's path (delete it for space)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


class Cli:
    def __init__(self, state: Path, home: Path, env: dict[str, str], codex_bin: str) -> None:
        self.state, self.home, self.codex_bin = state, home, codex_bin
        self.env = {**env, "LOOPX_CHAT_CODEX_HOME": str(home), "NO_COLOR": "1"}

    def argv(self, *args: str) -> list[str]:
        base = ["--state-dir", str(self.state), "--codex-bin", self.codex_bin]
        return [sys.executable, "-m", "loopx_chat", *base, *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), env=self.env, capture_output=True, text=True, timeout=120
        )

    def send_while_the_disk_fills(self, disk: Path, session_id: str) -> tuple[Any, Path]:
        """`chat send` of a slow reply; the disk is filled once the turn runs. The finished
        command and the filler."""
        proc = subprocess.Popen(
            self.argv("chat", "send", session_id, SLOW_REPLY),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        seen = []
        while not any("running" in line for line in seen):
            line = proc.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
        filler = fill(disk)
        out, err = proc.communicate(timeout=120)
        return (proc.returncode, out, "".join(seen) + err), filler


@pytest.fixture
def cli(
    small_disk: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> Cli:
    return Cli(small_disk / "state", bound_home, base_env, codex_bin)


def _opened(cli: Cli) -> str:
    opened = cli.run("chat", "new", "--goal", "g", "--json", "mock:text=ok")
    assert opened.returncode == 0, opened.stderr
    return str(json.loads(opened.stdout)["session_id"])


def _turns(cli: Cli, session_id: str) -> list[Any]:
    return SessionStore(cli.state).list_turns(session_id)


def _check_recorded(cli: Cli, session_id: str, count: int) -> None:
    session = SessionStore(cli.state).load(session_id)
    assert session.status == "ready" and session.active_turn_id is None
    turns = _turns(cli, session_id)
    assert [t.status for t in turns] == ["completed"] * count, turns
    assert session.turn_count == count
    assert all(t.tokens.total_tokens > 0 for t in turns)


def test_a_full_disk_mid_turn_is_recorded_by_the_next_command(cli: Cli, small_disk: Path) -> None:
    """The CLI ran the turn itself and exited while the disk was full."""
    session_id = _opened(cli)
    (code, out, err), filler = cli.send_while_the_disk_fills(small_disk, session_id)
    assert out.rstrip("\n") == WORDS  # the reply streamed whole
    assert code == 1 and "state_unwritable" in err, err
    assert "kept aside and recorded once space returns, or by the next command" in err
    assert "Traceback" not in err
    filler.unlink()
    # Space is back; the next command records the outcome Codex gave, then runs its own turn.
    again = cli.run("chat", "send", session_id, "--json", "mock:text=after")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["turn"]["status"] == "completed"
    _check_recorded(cli, session_id, 3)


def test_a_full_disk_mid_turn_in_the_service_is_recorded_once_space_returns(
    cli: Cli, small_disk: Path, start_service: Callable[..., Any]
) -> None:
    """The service ran the turn: it records the outcome by itself once there is space."""
    service = start_service(cli.state, cli.home, cli.env, cli.codex_bin)
    session_id = _opened(cli)
    (code, out, err), filler = cli.send_while_the_disk_fills(small_disk, session_id)
    assert "not using the service" not in err
    assert out.rstrip("\n") == WORDS
    assert code == 1 and "state_unwritable" in err, err
    assert "Traceback" not in err
    filler.unlink()
    # No command touches the session: the service's own retry records it.
    wait_value(
        lambda: SessionStore(cli.state).load(session_id).active_turn_id is None,
        timeout=60,
        what="the service to record the outcome",
    )
    _check_recorded(cli, session_id, 2)
    # And the next send goes on as usual, relabelling nothing.
    again = cli.run("chat", "send", session_id, "--json", "mock:text=after")
    assert again.returncode == 0, again.stderr
    _check_recorded(cli, session_id, 3)
    assert service.proc.poll() is None

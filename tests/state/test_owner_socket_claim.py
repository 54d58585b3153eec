"""One service serves a state dir: the owner socket's claim (a flock the kernel lets go when
the holder dies) refuses a second listener while the first lives, in this process or in
another, and is free again once the first is removed or its process is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loopx_chat.state import owner_socket


@pytest.fixture
def state(tmp_path: Path) -> Path:
    # A short path: sun_path holds about 100 bytes and pytest's tmp paths can be long.
    folder = tmp_path / "s"
    folder.mkdir(mode=0o700)
    return folder


def test_a_second_listener_is_refused_until_the_first_is_removed(state: Path) -> None:
    first = owner_socket.listen(state)
    with pytest.raises(owner_socket.AlreadyServed):
        owner_socket.listen(state)
    assert owner_socket.socket_path(state).exists()  # the refusal removed nothing
    owner_socket.remove(state, first)
    first.close()
    again = owner_socket.listen(state)
    owner_socket.remove(state, again)
    again.close()


def test_a_killed_holder_leaves_the_claim_free_and_its_stale_socket_replaced(state: Path) -> None:
    script = (
        "import sys, time; from pathlib import Path; from loopx_chat.state import owner_socket;"
        "owner_socket.listen(Path(sys.argv[1])); print('up', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(state)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "up\n"
        with pytest.raises(owner_socket.AlreadyServed):
            owner_socket.listen(state)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        assert owner_socket.socket_path(state).exists()  # the dead service's socket file
        sock = owner_socket.listen(state)
        owner_socket.remove(state, sock)
        sock.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_the_claim_file_is_the_owners_and_private(state: Path) -> None:
    sock = owner_socket.listen(state)
    try:
        info = os.stat(state / owner_socket.CLAIM_FILE)
        assert info.st_uid == os.getuid() and info.st_mode & 0o777 == 0o600
    finally:
        owner_socket.remove(state, sock)
        sock.close()

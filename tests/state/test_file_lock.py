"""The writers' lock file (`state/file_lock.py`) against real other processes: filelock as an
older release of loopx-chat takes the same file, and `flock(1)` where it is installed."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from loopx_chat.errors import StateError
from loopx_chat.state.file_lock import FileLock, LockTimeout
from tests.helpers.conditions import unavailable
from tests.helpers.older_lock import filelock_gets_it

# Another process: take the lock with filelock (what releases before this one ran), report
# it, hold it until told to go.
_HOLDER = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1], mode=0o600, thread_local=False)
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
lock.release()
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    return folder


def test_a_held_lock_keeps_filelock_out_and_its_release_lets_it_in(folder: Path) -> None:
    lock = FileLock(folder / "a.lock")
    lock.acquire()
    assert lock.is_locked
    assert not filelock_gets_it(folder / "a.lock")
    lock.release()
    assert not lock.is_locked
    assert filelock_gets_it(folder / "a.lock")
    assert (folder / "a.lock").exists()  # never unlinked: a waiter's inode stays the lock


def test_a_lock_filelock_holds_is_refused_then_waited_for(folder: Path) -> None:
    path = folder / "b.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        lock = FileLock(path)
        with pytest.raises(LockTimeout):
            lock.acquire(timeout=0)
        with pytest.raises(LockTimeout):
            lock.acquire(timeout=0.2)  # tried until the deadline, still held
        assert not lock.is_locked
        got = threading.Event()

        def wait() -> None:
            lock.acquire()  # no deadline: the kernel wakes it when the holder lets go
            got.set()

        waiter = threading.Thread(target=wait)
        waiter.start()
        assert not got.wait(0.3)  # still held elsewhere: it waits
        holder.stdin.write("go\n")
        holder.stdin.flush()
        waiter.join()
        assert got.is_set() and lock.is_locked
        lock.release()
    finally:
        holder.kill()
        holder.wait()


def test_holds_are_counted_and_force_gives_up_all_of_them(folder: Path) -> None:
    lock = FileLock(folder / "c.lock")
    with lock:
        with lock:
            pass
        assert not filelock_gets_it(folder / "c.lock")  # the outer hold still has it
    assert filelock_gets_it(folder / "c.lock")
    lock.acquire()
    lock.acquire()
    lock.release(force=True)
    assert not lock.is_locked
    assert filelock_gets_it(folder / "c.lock")
    lock.release()  # one release too many is nothing


def test_two_instances_in_one_process_exclude_each_other(folder: Path) -> None:
    first, second = FileLock(folder / "d.lock"), FileLock(folder / "d.lock")
    first.acquire()
    with pytest.raises(LockTimeout):
        second.acquire(timeout=0)
    first.release()
    second.acquire(timeout=0)
    second.release()


def test_flock_1_sees_the_same_lock(folder: Path) -> None:
    if shutil.which("flock") is None:
        unavailable("flock(1) (util-linux) is not installed")
    path = folder / "e.lock"

    def flock_gets_it() -> bool:
        done = subprocess.run(["flock", "-n", str(path), "true"], timeout=60, check=False)
        return done.returncode == 0

    with FileLock(path):
        assert not flock_gets_it()
    assert flock_gets_it()


def test_a_new_lock_file_is_private(folder: Path) -> None:
    os.umask(old := os.umask(0))
    try:
        with FileLock(folder / "f.lock"):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE((folder / "f.lock").stat().st_mode) == 0o600


def test_a_symlink_in_its_place_is_refused_and_left_alone(folder: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (folder / "g.lock").symlink_to(target)
    with pytest.raises(OSError):  # ELOOP: O_NOFOLLOW; the callers map it to a state error
        FileLock(folder / "g.lock").acquire(timeout=0)
    assert target.read_text() == "keep"
    assert (folder / "g.lock").is_symlink()


def test_a_fifo_in_its_place_is_refused_not_waited_on(folder: Path) -> None:
    os.mkfifo(folder / "h.lock", 0o600)
    with pytest.raises(StateError) as caught:
        FileLock(folder / "h.lock").acquire()
    assert caught.value.error_code == "state_unsafe"

"""Crash consistency and cross-process correctness of the session store.

A writer SIGKILLed at a random moment leaves `session.json` equal to either the old or the
new content; four processes incrementing one counter through the store lose no update.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore

FIXED = "2026-01-01T00:00:00Z"


def _fixed_clock() -> str:
    return FIXED


def _rewrite_forever(root: Path, ready_w: int) -> None:
    """Child body: toggle turn_count 0 <-> 1 as fast as possible until killed."""
    store = SessionStore(root, clock=_fixed_clock)
    signalled = False
    n = 0
    while True:
        n += 1
        store.update("victim", turn_count=n % 2)
        if not signalled:
            os.write(ready_w, b"x")
            signalled = True


def test_sigkill_mid_write_leaves_old_or_new_content(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store = SessionStore(root, clock=_fixed_clock)
    base = SessionRecord(session_id="victim", goal_id="g", created_at=FIXED, updated_at=FIXED)
    store.create(base)
    path = store.session_path("victim")
    old = path.read_bytes()
    store.update("victim", turn_count=1)
    new = path.read_bytes()
    store.update("victim", turn_count=0)
    assert old != new and path.read_bytes() == old

    rng = random.Random(20261129)
    kills = 0
    for _ in range(200):
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.close(ready_r)
                _rewrite_forever(root, ready_w)
            finally:
                os._exit(1)
        os.close(ready_w)
        os.read(ready_r, 1)  # at least one write completed; now kill at a random moment
        os.close(ready_r)
        time.sleep(rng.uniform(0, 0.004))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        kills += 1
        content = path.read_bytes()
        assert content in (old, new), content[:200]
        loaded = SessionStore(root).load("victim")
        assert loaded.turn_count in (0, 1)
    assert kills == 200
    listing = SessionStore(root).list()
    assert [s.session_id for s in listing.sessions] == ["victim"] and not listing.problems


INCREMENTER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from loopx_chat.state.session_store import SessionStore

    store = SessionStore(Path(sys.argv[1]))
    for _ in range(int(sys.argv[2])):
        store.mutate("counter", lambda r: r.with_changes({"turn_count": r.turn_count + 1}))
    """
)


def test_four_processes_incrementing_lose_no_update(tmp_path: Path) -> None:
    root = tmp_path / "state"
    store = SessionStore(root)
    store.create(
        SessionRecord(session_id="counter", goal_id="g", created_at=FIXED, updated_at=FIXED)
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", INCREMENTER, str(root), "100"]) for _ in range(4)
    ]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0, 0, 0, 0]
    assert store.load("counter").turn_count == 400

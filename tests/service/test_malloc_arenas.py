"""The service's malloc arenas are capped at start (glibc on Linux), so the memory threads
that come and go free is not scattered over an arena each (issue 37)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loopx_chat.service.malloc_arenas import SERVICE_ARENAS, cap_malloc_arenas, is_glibc

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not is_glibc(), reason="glibc's arenas only"
)

# Eight threads alive at once, each allocating blocks malloc serves from an arena (above
# pymalloc's 512 bytes, below the 128 KiB that malloc maps on its own); then the count.
THREADS = f"""
import sys, threading
sys.path[:0] = {sys.path!r}
from loopx_chat.service.malloc_arenas import cap_malloc_arenas
from tests.helpers.malloc_arenas import arena_count
import os
if sys.argv[1] == "cap":
    assert cap_malloc_arenas()
barrier = threading.Barrier(8)
def work():
    kept = [bytearray(4096) for _ in range(64)]
    barrier.wait()
    del kept
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(arena_count(os.getpid()))
"""


def _arenas(mode: str) -> int:
    env = {"PATH": "/usr/bin:/bin"}  # no MALLOC_ARENA_MAX from the caller
    done = subprocess.run(
        [sys.executable, "-c", THREADS, mode], capture_output=True, text=True, env=env, check=True
    )
    return int(done.stdout)


def test_the_cap_keeps_eight_threads_on_the_capped_arenas() -> None:
    uncapped, capped = _arenas("free"), _arenas("cap")
    # The main heap is not counted: SERVICE_ARENAS - 1 others, one more if a mapping happens
    # to share the alignment.
    assert capped <= SERVICE_ARENAS
    assert uncapped >= 4, "without the cap each thread takes an arena of its own"


def test_an_owner_set_malloc_arena_max_is_left_alone() -> None:
    assert cap_malloc_arenas(environ={"MALLOC_ARENA_MAX": "8"}) is False

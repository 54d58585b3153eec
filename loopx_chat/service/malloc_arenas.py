"""The service process's malloc arenas: capped when `serve` starts (glibc on Linux only).

glibc gives each thread that allocates its own arena, up to eight per core, and an arena
keeps the memory its thread freed for the next thread that happens to use it. The service's
request and turn threads come and go, so each new one may start on an arena of its own and
leave freed memory scattered across them: the resident size grows in steps that no live
object explains (issue 37; `bench/bench_service_memory.py --baseline HEAD --env
MALLOC_ARENA_MAX=2` measures it). The Python objects themselves live in pymalloc's arenas
and take the GIL either way, so a cap costs the threads next to no lock contention.

What this module owns: `cap_malloc_arenas`, one `mallopt(M_ARENA_MAX, n)` on glibc.

What it must never do: fail `serve` (any refusal or another C library leaves malloc as it
is), or override a `MALLOC_ARENA_MAX` the owner set in the environment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

M_ARENA_MAX = -8  # glibc's <malloc.h>
SERVICE_ARENAS = 2  # the main heap and one more


def is_glibc() -> bool:
    """Whether this process runs on glibc (musl, macOS and Windows have no such arenas)."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return False
    return version is not None and version.startswith("glibc")


def cap_malloc_arenas(
    arenas: int = SERVICE_ARENAS, environ: Mapping[str, str] = os.environ
) -> bool:
    """Cap this process's glibc malloc arenas at `arenas`; whether the cap was set."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in environ:
        return False
    if not is_glibc():
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt(M_ARENA_MAX, arenas) == 1

"""Whether the process a record names still runs, and when it started: probes, no signal sent.

Owns the two rules for a pid written into owner-local state (a run's, a service's, an
app-server's, a host request holder's): gone when the kernel has no such process; alive when
it has one, even one of another user's that this process may not signal; and its start time,
which tells the process a record names from a later one that reuses its pid. It never kills
or waits.
"""

from __future__ import annotations

import os
import sys


def pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone's process: alive, and not ours to signal
    return True


def start_time(pid: int) -> float | None:
    """When `pid` started, in seconds since the epoch, exactly as psutil's
    `Process.create_time()` says it; None when it is gone or not ours to read.

    On Linux it is read from /proc the way psutil reads it (same fields, same arithmetic, so a
    time recorded by either compares equal): importing psutil costs a chat turn or a goal
    run about 17 ms of CPU (28 under load) for this one number. Elsewhere psutil answers."""
    if sys.platform.startswith("linux"):
        return _proc_start_time(pid)
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def _proc_start_time(pid: int) -> float | None:
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
        boot = _boot_time()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: fields resume after the
    # last ')'. starttime is field 22, in clock ticks since boot.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        ticks = float(fields[19])
    except (IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK") + boot


def _boot_time() -> float:
    """/proc/stat's `btime`, read each time as psutil reads it (the kernel derives it from
    the wall clock, which may be stepped)."""
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")

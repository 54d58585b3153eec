"""Whether the process a record names still runs: a probe, no signal sent.

Owns the one rule for a pid written into owner-local state (a run's, a service's, a host
request holder's): gone when the kernel has no such process; alive when it has one, even
one of another user's that this process may not signal. It never kills or waits.
"""

from __future__ import annotations

import os


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

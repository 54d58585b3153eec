"""A lock file as an older release of loopx-chat takes it (filelock), from another process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Asks filelock for the lock without waiting: exit 0 if it got it, 3 if it is held.
_PROBE = """
import sys
from filelock import FileLock, Timeout
try:
    FileLock(sys.argv[1]).acquire(timeout=0)
except Timeout:
    sys.exit(3)
"""


def filelock_gets_it(path: Path) -> bool:
    """Whether another process could take the lock at `path` now (it lets it go at once)."""
    done = subprocess.run([sys.executable, "-c", _PROBE, str(path)], timeout=60, check=False)
    assert done.returncode in (0, 3), done
    return done.returncode == 0

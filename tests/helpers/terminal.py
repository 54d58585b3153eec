"""Reading a pseudo-terminal's output in the tests: until a marker shows, or until the
command has ended."""

from __future__ import annotations

import os
import select
import subprocess
import time


def read_until(fd: int, marker: bytes, seen: bytearray, start: int = 0) -> int:
    """Read the terminal until `marker` shows after `start`; where it ends."""
    deadline = time.monotonic() + 60
    while marker not in seen[start:]:
        assert time.monotonic() < deadline, f"no {marker!r} in {bytes(seen)[-800:]!r}"
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen.extend(os.read(fd, 4096))
            except OSError:
                raise AssertionError(f"no {marker!r}: {bytes(seen)[-800:]!r}") from None
    return seen.index(marker, start) + len(marker)


def read_to_end(fd: int, seen: bytearray, proc: subprocess.Popen[bytes]) -> None:
    """Read what the terminal shows until the command's side closes or it has exited."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)
        elif proc.poll() is not None:
            return

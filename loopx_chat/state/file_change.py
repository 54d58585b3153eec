"""Whether a record file another process writes moved since the last look.

Owns `FileChange`: one stat per look (size, mtime and inode: a file replaced by a rename
within the clock's tick, at the same size, is a change too), so a follower reads a goal's
record only when it changed. It never reads the file and never decides what a change means.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FileChange:
    path: Path
    seen: tuple[int, int, int] | None = None  # size, mtime, inode at the last look; None: no file

    def moved(self) -> bool:
        """Whether the file changed, came or went since the last look (first look: it is)."""
        try:
            st = os.stat(self.path)
            now: tuple[int, int, int] | None = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            now = None
        moved, self.seen = now != self.seen, now
        return moved

"""How many glibc malloc arenas besides the main heap a process holds, from its smaps.

Each arena other than the main heap is an anonymous read-write mapping aligned to 64 MiB
(glibc's HEAP_MAX_SIZE on 64-bit); a 64 MiB alignment by chance of another mapping is rare,
so a count may be one too many, never too few.
"""

from __future__ import annotations

from pathlib import Path

ARENA_ALIGN = 64 * 1024 * 1024


def arena_count(pid: int) -> int:
    count = 0
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if len(head) == 5 and "-" in head[0] and head[1].startswith("rw"):
            count += int(head[0].split("-")[0], 16) % ARENA_ALIGN == 0
    return count

"""The agent's words on a thread, read from Codex's own rollout file as it grows, for a terminal.

Owns finding the rollout of one thread in the bound home (`sessions/**/rollout-*-<thread>.jsonl`,
no symlink followed) and handing back, on each call, the agent's messages completed since the
last call (codex writes a message to its rollout when the message is complete). It is what
`goal follow` shows from another shell, where the deltas of the process that runs the goal
cannot reach.

It never stores, logs or returns anything but the agent's message text to its caller, never
consumes a trailing partial line, never reads more than `READ_CAP` bytes in one call, and
never writes to the home.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from loopx_chat.codex.rollouts.layout import ACTIVE_FOLDER

READ_CAP = 4 * 1024 * 1024  # bytes read per call at most: a long backlog is read in steps


def _find(home: Path, thread_id: str) -> Path | None:
    folder = home / ACTIVE_FOLDER
    if not folder.is_dir() or folder.is_symlink():
        return None
    for path in sorted(folder.glob(f"*/*/*/rollout-*-{thread_id}.jsonl")):
        if path.is_file() and not path.is_symlink():
            return path
    return None


def _words(line: bytes) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    payload = record.get("payload") if isinstance(record, dict) else None
    if record.get("type") != "response_item" or not isinstance(payload, dict):
        return None
    if payload.get("type") != "message" or payload.get("role") != "assistant":
        return None
    parts = payload.get("content")
    texts = [
        p["text"]
        for p in (parts if isinstance(parts, list) else [])
        if isinstance(p, dict) and p.get("type") == "output_text" and isinstance(p.get("text"), str)
    ]
    return "".join(texts) or None


class RolloutWords:
    """The agent's messages on one thread, in order, each handed out once."""

    def __init__(self, home: Path, thread_id: str) -> None:
        self.home, self.thread_id = home, thread_id
        self.path: Path | None = None
        self.offset = 0

    def new(self) -> list[str]:
        """The agent's messages completed since the last call (none while the file is not
        there yet)."""
        if self.path is None:
            self.path = _find(self.home, self.thread_id)
            if self.path is None:
                return []
            # Start at the end: only what is said from now on.
            self.offset = self.path.stat().st_size
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return []
        try:
            os.lseek(fd, self.offset, os.SEEK_SET)
            chunk = os.read(fd, READ_CAP)
        finally:
            os.close(fd)
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        found = (_words(line) for line in chunk[:end].split(b"\n") if line.strip())
        return [w for w in found if w]

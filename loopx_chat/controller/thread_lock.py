"""One writer per Codex thread: a cross-process lock per (home, thread).

A controller holds it for as long as it has the thread loaded in an app-server. A second
controller (any process using the same state dir) is refused at once with `thread_busy`.
The Codex app-server's own writer lock remains the final word across tools that do not share
our state dir; its "active writer" error maps to the same code.
"""

from __future__ import annotations

from pathlib import Path

from loopx_chat.errors import CodexError, Remedy
from loopx_chat.home import home_key
from loopx_chat.state.file_lock import FileLock, LockTimeout
from loopx_chat.state.private_files import ensure_private_dir
from loopx_chat.state.session_records import validate_session_id

# Refused by our own lock, so the holder is another loopx-chat process with this state dir:
# say what it may be. The local service keeps a thread loaded after a turn (warm) and is the
# holder a CLI user most often meets.
# How long a controller keeps a thread loaded (and this lock held) after its last turn,
# unless configured otherwise (`ControllerConfig.warm_idle_close_sec`).
DEFAULT_HOLD_AFTER_TURN_SEC = 180.0
LOCK_BUSY_REMEDY = Remedy(
    summary="Another loopx-chat process holds this Codex thread.",
    next_action="A turn may be running there, or it is the local service (`loopx-chat serve`), "
    f"which keeps a thread loaded for {DEFAULT_HOLD_AFTER_TURN_SEC / 60:g} minutes after its "
    "last turn. Send the message through that process (the service's page or API), or retry "
    "once it lets the thread go; two clients never drive one thread at once.",
)


class ThreadWriterLock:
    def __init__(self, state_root: Path, codex_home: Path, thread_id: str) -> None:
        folder = state_root / "locks" / "threads" / home_key(codex_home)
        self.path = folder / f"{validate_session_id(thread_id)}.lock"
        self.thread_id = thread_id
        # thread_local=False: acquired by the caller, released by whichever thread closes.
        self._lock = FileLock(self.path)

    def acquire(self) -> None:
        ensure_private_dir(self.path.parent)
        try:
            self._lock.acquire(timeout=0)
        except LockTimeout:
            raise CodexError(
                "Another loopx-chat controller is driving this Codex thread",
                error_code="thread_busy",
                remedy=LOCK_BUSY_REMEDY,
            ) from None

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release(force=True)

    def held_elsewhere(self) -> bool:
        """True when another process holds the lock (probes without keeping it)."""
        probe = FileLock(self.path)
        ensure_private_dir(self.path.parent)
        try:
            probe.acquire(timeout=0)
        except LockTimeout:
            return True
        probe.release(force=True)
        return False

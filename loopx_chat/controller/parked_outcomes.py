"""Finished turns whose outcome waits in its session's slot for space on the disk.

Owns the retry: a session whose turn outcome the full disk would not take
(`turn_ledger.TurnNotRecorded`) is tried again every `RETRY_SEC` on one daemon worker,
until `TurnLedger.record_parked` writes it, and once more when the controller closes. What
is still parked then is recorded by the next command that settles the session. It never
decides an outcome and never writes anything but through the ledger.
"""

from __future__ import annotations

import threading

from loopx_chat.controller.turn_ledger import TurnLedger
from loopx_chat.errors import LoopxChatError

RETRY_SEC = 1.0


class ParkedOutcomes:
    def __init__(self, ledger: TurnLedger) -> None:
        self._ledger = ledger
        self._lock = threading.Lock()
        self._waiting: set[str] = set()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

    def add(self, session_id: str) -> None:
        """Retry `session_id`'s parked outcome until it is recorded."""
        with self._lock:
            self._waiting.add(session_id)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._run, name="parked-outcomes", daemon=True
                )
                self._worker.start()

    def _try_all(self) -> None:
        with self._lock:
            waiting = sorted(self._waiting)
        for session_id in waiting:
            try:
                self._ledger.record_parked(session_id)
            except LoopxChatError:
                continue  # still no space (or unreadable): the next try, or the next command
            with self._lock:
                self._waiting.discard(session_id)

    def _run(self) -> None:
        while not self._stop.wait(RETRY_SEC):
            self._try_all()
            with self._lock:
                if not self._waiting:
                    self._worker = None
                    return

    def close(self) -> None:
        """One last try for each; stop the worker."""
        self._stop.set()
        self._try_all()

"""The notifier: admits notices (dedup, rate limit) and sends them on per-channel workers.

Owns the worker threads: one per channel, each with its own queue, so a webhook that hangs
for its full timeouts delays neither a desktop notice nor the caller (`submit` never
blocks), plus one summary worker that sends the single summary notice once the rate limit
allows. Every outcome goes to `on_outcome` (the service records it); a failure there is
swallowed, because a notice must never take the service down.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from loopx_chat.notify.desktop import Outcome
from loopx_chat.notify.notice import (
    RATE_LIMIT,
    RATE_WINDOW_SEC,
    Notice,
    Throttle,
    Verdict,
    summary_notice,
)

MODES = ("none", "desktop", "webhook", "both")


class Sender(Protocol):
    channel: str

    def send(self, notice: Notice) -> Outcome: ...


class Notifier:
    def __init__(
        self,
        senders: Sequence[Sender],
        *,
        page_url: str,
        on_outcome: Callable[[Notice, Outcome], None],
        seen: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        limit: int = RATE_LIMIT,
        window: float = RATE_WINDOW_SEC,
        summary_poll: float = 1.0,
    ) -> None:
        self.page_url = page_url
        self._on_outcome = on_outcome
        self._clock = clock
        self._throttle = Throttle(limit=limit, window=window, seen=seen)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._queues: list[queue.Queue[Notice | None]] = []
        self._threads: list[threading.Thread] = []
        for sender in senders:
            q: queue.Queue[Notice | None] = queue.Queue()
            self._queues.append(q)
            t = threading.Thread(
                target=self._work, args=(sender, q), name=f"notify-{sender.channel}", daemon=True
            )
            self._threads.append(t)
            t.start()
        self._summary_poll = summary_poll
        if senders:
            t = threading.Thread(target=self._summaries, name="notify-summary", daemon=True)
            self._threads.append(t)
            t.start()

    @property
    def has_channels(self) -> bool:
        return bool(self._queues)

    def submit(self, notice: Notice) -> Verdict:
        """Queue `notice` on every channel unless it is a duplicate or held back."""
        with self._lock:
            verdict = self._throttle.admit(notice.key, self._clock())
        if verdict is Verdict.SEND:
            for q in self._queues:
                q.put(notice)
        elif verdict is Verdict.HELD:
            self._report(notice, Outcome(False, "-", "held"))
        return verdict

    def _report(self, notice: Notice, outcome: Outcome) -> None:
        with contextlib.suppress(Exception):
            self._on_outcome(notice, outcome)

    def _work(self, sender: Sender, q: queue.Queue[Notice | None]) -> None:
        while (notice := q.get()) is not None:
            try:
                outcome = sender.send(notice)
            except Exception:  # a sender must never end its worker
                outcome = Outcome(False, sender.channel, "internal_error")
            self._report(notice, outcome)

    def _summaries(self) -> None:
        while not self._stop.wait(self._summary_poll):
            with self._lock:
                held = self._throttle.summary_due(self._clock())
            if held:
                notice = summary_notice(held, self.page_url)
                for q in self._queues:
                    q.put(notice)

    def close(self, timeout: float = 1.0) -> None:
        self._stop.set()
        for q in self._queues:
            q.put(None)
        for t in self._threads:
            t.join(timeout)

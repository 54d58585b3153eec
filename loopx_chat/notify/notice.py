"""What one notice says, and which notices go out: dedup per gate and the rate limit. Pure.

A `Notice` carries public-safe text only: the goal id (already a validated id), the gate
kind in words and the page URL without the owner's secret. `Throttle` admits each key once
(dedup per gate) and at most `limit` notices per `window` seconds; what it holds back is
counted, and one summary notice says how many once the window allows it. No clock and no
I/O of its own: callers pass `now`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

RATE_LIMIT = 10  # notices per window
RATE_WINDOW_SEC = 60.0

# The gate kinds a notice may name, with their words (nothing else reaches a notice).
KIND_WORDS = {
    "owner_gate": "an owner gate needs your decision",
    "host_gate": "Codex asks for your approval or answer",
    "blocked": "the goal is blocked",
}
SUMMARY_KEY = "summary"


@dataclass(frozen=True)
class Notice:
    key: str  # dedup key: one notice per gate
    goal_id: str
    kind: str  # a KIND_WORDS key, or "summary"
    page_url: str
    held: int = 0  # a summary: how many notices it stands for
    blocker_ref: str | None = None  # the gate or outcome id it is about (the metrics key)

    @property
    def title(self) -> str:
        if self.kind == SUMMARY_KEY:
            return "loopx-chat: more goals need you"
        return "loopx-chat: Waiting on you" if self.kind != "blocked" else "loopx-chat: Blocked"

    @property
    def body(self) -> str:
        if self.kind == SUMMARY_KEY:
            return f"{self.held} more notices were held back; open the page to see them all."
        return f"Goal {self.goal_id}: {KIND_WORDS.get(self.kind, 'needs you')}."

    def payload(self) -> dict[str, object]:
        """The webhook's JSON body: public-safe fields only."""
        return {
            "schema_version": "loopx_chat_notice_v1",
            "goal_id": self.goal_id if self.kind != SUMMARY_KEY else None,
            "kind": self.kind,
            "title": self.title,
            "text": self.body,
            "page_url": self.page_url,
            "held": self.held,
        }


def summary_notice(held: int, page_url: str) -> Notice:
    return Notice(key=SUMMARY_KEY, goal_id="", kind=SUMMARY_KEY, page_url=page_url, held=held)


class Verdict(Enum):
    SEND = "send"
    DUPLICATE = "duplicate"
    HELD = "held"


class Throttle:
    """Dedup per key plus at most `limit` notices in any `window` seconds."""

    def __init__(
        self,
        *,
        limit: int = RATE_LIMIT,
        window: float = RATE_WINDOW_SEC,
        seen: Iterable[str] = (),
    ) -> None:
        self.limit = limit
        self.window = window
        self._seen: set[str] = set(seen)
        self._sent: deque[float] = deque()
        self.held = 0

    def _expire(self, now: float) -> None:
        while self._sent and now - self._sent[0] >= self.window:
            self._sent.popleft()

    def admit(self, key: str, now: float) -> Verdict:
        if key in self._seen:
            return Verdict.DUPLICATE
        self._seen.add(key)
        self._expire(now)
        if len(self._sent) >= self.limit or self.held:
            self.held += 1
            return Verdict.HELD
        self._sent.append(now)
        return Verdict.SEND

    def summary_due(self, now: float) -> int:
        """How many notices one summary now stands for (0: none due). Due once the window
        has room again; it counts as one notice of the new window."""
        if not self.held:
            return 0
        self._expire(now)
        if len(self._sent) >= self.limit:
            return 0
        held, self.held = self.held, 0
        self._sent.append(now)
        return held

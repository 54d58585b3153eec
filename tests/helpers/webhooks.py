"""A webhook receiver's check, as a receiver in the wild does it: the `standardwebhooks`
library verifies the signature and the timestamp window, and a message id seen before is a
replay (the Standard Webhooks rule for the receiver)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def state_webhook_secret(state: Path) -> str:
    """The `whsec_` secret a service of `state` signs with (what its owner gives a receiver)."""
    return (state / "notify-webhook-secret").read_text().strip()


class Verifier:
    """Verifies each notice with the library; `refused` keeps why each refused one was.
    `processes=False`: a receiver that answers every notice with an error, so the sender's
    retries of one message (the same id) are not replays."""

    def __init__(self, secret_of: Callable[[], str], *, processes: bool = True) -> None:
        self._secret_of = secret_of
        self._processes = processes
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self.refused: list[str] = []

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Any | None:
        """The parsed body of a genuine, new notice; None (and a reason kept) otherwise."""
        try:
            doc = Webhook(self._secret_of()).verify(body, dict(headers))
        except WebhookVerificationError as exc:
            self.refused.append(str(exc))
            return None
        message_id = {k.lower(): v for k, v in headers.items()}["webhook-id"]
        with self._lock:
            if not self._processes:
                return doc
            if message_id in self._seen:
                self.refused.append("replayed message id")
                return None
            self._seen.add(message_id)
        return doc

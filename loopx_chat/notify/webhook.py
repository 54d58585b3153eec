"""The opt-in webhook: one signed JSON POST per notice, to the one URL the owner named.

Owns the body (the notice's public-safe payload, sorted JSON), the signature header
(`X-Loopx-Signature: sha256=<hex HMAC-SHA256 of the body>`, keyed by a secret made once,
0600, in the state dir: `notify-webhook-secret`), a 5 s timeout per attempt, and 3 retries
with backoff after the first attempt. It never follows a proxy from the environment, never
sends the owner's page secret, and never raises: every failure is an `Outcome`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence

from loopx_chat.errors import UsageError
from loopx_chat.notify.desktop import Outcome
from loopx_chat.notify.notice import Notice

SIGNATURE_HEADER = "X-Loopx-Signature"
SECRET_FILE = "notify-webhook-secret"
TIMEOUT_SEC = 5.0
BACKOFF_SEC: tuple[float, ...] = (0.5, 1.0, 2.0)  # before retry 1, 2, 3


def checked_url(url: str) -> str:
    """The webhook URL, or `usage_error`: http(s) with a host, nothing else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            "--notify-url must be an http:// or https:// URL with a host",
            error_code="usage_error",
        )
    return url


def body_of(notice: Notice) -> bytes:
    return json.dumps(notice.payload(), sort_keys=True, separators=(",", ":")).encode()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookSender:
    channel = "webhook"

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        timeout: float = TIMEOUT_SEC,
        backoff: Sequence[float] = BACKOFF_SEC,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = checked_url(url)
        self._secret = secret
        self._timeout = timeout
        self._backoff = tuple(backoff)
        self._sleep = sleep
        # No proxy from the environment: the notice goes where the owner said, nowhere else.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _attempt(self, body: bytes) -> str:
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "User-Agent": "loopx-chat-notify",
                SIGNATURE_HEADER: signature(self._secret, body),
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except TimeoutError:
            return "timeout"
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return "timeout" if isinstance(reason, TimeoutError) else "unreachable"
        return "sent" if 200 <= status < 300 else f"http_{status}"

    def send(self, notice: Notice) -> Outcome:
        body = body_of(notice)
        code = self._attempt(body)
        for delay in self._backoff:
            if code == "sent":
                break
            self._sleep(delay)
            code = self._attempt(body)
        return Outcome(code == "sent", self.channel, code)

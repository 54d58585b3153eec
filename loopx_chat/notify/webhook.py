"""The opt-in webhook: one signed JSON POST per notice, to the one URL the owner named.

Owns the body (the notice's public-safe payload, sorted JSON) and its signature the Standard
Webhooks way (https://www.standardwebhooks.com): `webhook-id` (new for each notice, the same
on its retries), `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`
(`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed by the `whsec_` secret in the
state dir, `notify/webhook_secret.py`), so a receiver using any Standard Webhooks library
verifies a notice and refuses a replay (an old timestamp, an id it has seen); a 5 s timeout
per attempt, and 3 retries with backoff after the first attempt (none after a 4xx but 408 and
429). It never follows a proxy
from the environment, never sends the owner's page secret, and never raises: every failure
is an `Outcome`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence

from loopx_chat.errors import UsageError
from loopx_chat.notify.desktop import Outcome
from loopx_chat.notify.notice import Notice
from loopx_chat.notify.webhook_secret import signing_key

ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER = (
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
)
TIMEOUT_SEC = 5.0
BACKOFF_SEC: tuple[float, ...] = (0.5, 1.0, 2.0)  # before retry 1, 2, 3
# The receiver refused the request itself: no retry (408 timeout and 429 too many are retried).
FINAL_CODES = frozenset(f"http_{n}" for n in range(400, 500)) - {"http_408", "http_429"}


def checked_url(url: str) -> str:
    """The webhook URL, or `usage_error`: http(s) with a host, nothing else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            "--notify-url must be an http:// or https:// URL with a host",
            error_code="usage_error",
        )
    return url


USER_AGENT = "loopx-chat-notify"


def no_proxy_opener() -> urllib.request.OpenerDirector:
    """No proxy from the environment: a notice goes where the owner said, nowhere else."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_once(
    opener: urllib.request.OpenerDirector,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
) -> str:
    """One POST: `sent`, `http_N`, `timeout` or `unreachable`; never raises."""
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except TimeoutError:
        return "timeout"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return "timeout" if isinstance(reason, TimeoutError) else "unreachable"
    return "sent" if 200 <= status < 300 else f"http_{status}"


def with_retries(
    attempt: Callable[[], str], backoff: Sequence[float], sleep: Callable[[float], None]
) -> str:
    """The first attempt, then one more after each delay of `backoff` until one is sent or
    the receiver refuses the request itself (a 4xx but 408 and 429: sent again, it would be
    refused again)."""
    code = attempt()
    for delay in backoff:
        if code == "sent" or code in FINAL_CODES:
            break
        sleep(delay)
        code = attempt()
    return code


def body_of(notice: Notice) -> bytes:
    return json.dumps(notice.payload(), sort_keys=True, separators=(",", ":")).encode()


def new_message_id() -> str:
    """A notice's `webhook-id`: random, so two notices never sign the same content."""
    return "msg_" + secrets.token_urlsafe(18)


def signed_headers(key: bytes, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt of one notice."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: "v1," + base64.b64encode(digest).decode("ascii"),
    }


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
        self._key = signing_key(secret)
        self._timeout = timeout
        self._backoff = tuple(backoff)
        self._sleep = sleep
        self._opener = no_proxy_opener()

    def _attempt(self, message_id: str, body: bytes) -> str:
        signed = signed_headers(self._key, message_id, int(time.time()), body)
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **signed}
        return post_once(self._opener, self.url, body, headers, self._timeout)

    def send(self, notice: Notice) -> Outcome:
        body = body_of(notice)
        message_id = new_message_id()  # a retry is the same message, signed at its own time
        code = with_retries(lambda: self._attempt(message_id, body), self._backoff, self._sleep)
        return Outcome(code == "sent", self.channel, code)

"""The opt-in webhook: one signed JSON POST per notice, to the one URL the owner named.

Owns the body (the notice's public-safe payload, sorted JSON) and its signature the Standard
Webhooks way (https://www.standardwebhooks.com): `webhook-id` (new for each notice, the same
on its retries), `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`
(`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed by the `whsec_` secret in the
state dir, `notify/webhook_secret.py`), so a receiver using any Standard Webhooks library
verifies a notice and refuses a replay (an old timestamp, an id it has seen); a 5 s timeout
per attempt, and 3 retries with backoff after the first attempt (none after a 4xx but 408 and
429). A receiver that says how long to wait is obeyed: an HTTP `Retry-After` in seconds (or
a channel's own word for it in a 429's body, Telegram's `parameters.retry_after`), capped at
`RETRY_AFTER_MAX_SEC`; the wait happens on the channel's own worker (notify/dispatcher.py),
never on the service's. It never follows a proxy from the environment, never sends the
owner's page secret, and never raises: every failure is an `Outcome`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
# The longest wait a receiver's `Retry-After` gets before the next attempt: a channel worker
# waits for one notice at most this long per retry, so later notices are not held for hours.
RETRY_AFTER_MAX_SEC = 30.0
# How much of a refusal's body a channel may read for its wait (Telegram's 429 is ~100 bytes).
HINT_BODY_LIMIT = 4096


@dataclass(frozen=True)
class Attempt:
    """One POST's end: `sent`, `http_N`, `timeout` or `unreachable`, and the seconds the
    receiver asked to wait before the next one, when it said."""

    code: str
    retry_after: float | None = None


# A channel's reading of a 429's body for the wait it asks (None: it says none).
BodyHint = Callable[[bytes], "float | None"]


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` in its seconds form (RFC 9110 §10.2.3: `1*DIGIT`); None for an HTTP
    date or anything else (the backoff then applies)."""
    text = (value or "").strip()
    if not text or len(text) > 9 or not (text.isascii() and text.isdigit()):
        return None
    return float(int(text))


def wait_before_retry(delay: float, asked: float | None) -> float:
    """The backoff's delay, or longer when the receiver asked for longer (capped)."""
    if asked is None:
        return delay
    return min(max(delay, asked), RETRY_AFTER_MAX_SEC)


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
    hint: BodyHint | None = None,
) -> Attempt:
    """One POST and the wait a refusal asks for (`Retry-After`, else `hint` on a 429's
    body); never raises."""
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        with exc:
            asked = retry_after_seconds(exc.headers.get("Retry-After") if exc.headers else None)
            if asked is None and hint is not None and exc.code == 429:
                with contextlib.suppress(OSError, ValueError):
                    asked = hint(exc.read(HINT_BODY_LIMIT))
        return Attempt(f"http_{exc.code}", asked)
    except TimeoutError:
        return Attempt("timeout")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Attempt("timeout" if isinstance(reason, TimeoutError) else "unreachable")
    return Attempt("sent" if 200 <= status < 300 else f"http_{status}")


def with_retries(
    attempt: Callable[[], Attempt], backoff: Sequence[float], sleep: Callable[[float], None]
) -> str:
    """The first attempt, then one more after each delay of `backoff` (longer when the
    receiver asked: `wait_before_retry`) until one is sent or the receiver refuses the
    request itself (a 4xx but 408 and 429: sent again, it would be refused again)."""
    result = attempt()
    for delay in backoff:
        if result.code == "sent" or result.code in FINAL_CODES:
            break
        sleep(wait_before_retry(delay, result.retry_after))
        result = attempt()
    return result.code


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

    def _attempt(self, message_id: str, body: bytes) -> Attempt:
        signed = signed_headers(self._key, message_id, int(time.time()), body)
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **signed}
        return post_once(self._opener, self.url, body, headers, self._timeout)

    def send(self, notice: Notice) -> Outcome:
        body = body_of(notice)
        message_id = new_message_id()  # a retry is the same message, signed at its own time
        code = with_retries(lambda: self._attempt(message_id, body), self._backoff, self._sleep)
        return Outcome(code == "sent", self.channel, code)

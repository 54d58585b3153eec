"""What every push to the phone shares: one HTTPS request per notice, its secrets from the
environment, its failures as outcomes.

Owns `PushSender` (the timeout, the retries and the no-proxy opener of `notify/webhook.py`,
and the `Outcome` a send ends in), the read of a channel's secret from the service's
environment (`usage_error` naming the variable when it is missing or malformed; the value is
never named, printed or logged), and the API base override a test or a self-hosted relay
may set (https only, unless the host is loopback). A channel module (ntfy, Pushover,
Telegram, Slack) only turns a notice into its API's request. Never raises from `send`.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence

from loopx_chat.errors import Remedy, UsageError
from loopx_chat.notify.desktop import Outcome
from loopx_chat.notify.notice import SUMMARY_KEY, Notice
from loopx_chat.notify.webhook import (
    BACKOFF_SEC,
    TIMEOUT_SEC,
    USER_AGENT,
    BodyHint,
    no_proxy_opener,
    post_once,
    with_retries,
)


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        # A hostname other than "localhost" could resolve anywhere: refuse rather than resolve.
        return False


def secret_from(environ: Mapping[str, str], name: str, shape: re.Pattern[str], flag: str) -> str:
    """The secret in `environ[name]`, or `usage_error` naming the variable (never its value)."""
    value = environ.get(name, "").strip()
    if not value:
        raise UsageError(
            f"{flag} needs {name} in the service's environment (never on the command line)",
            error_code="usage_error",
            remedy=Remedy(
                summary=f"{flag} reads its secret from {name}.",
                next_action=f"Set {name} where serve runs (export it in the shell; for the "
                "LaunchAgent or systemd service, run `loopx-chat service install` from a "
                f"shell that has it: it is kept in the state dir, 0600), or drop {flag}.",
            ),
        )
    if not shape.fullmatch(value):
        raise UsageError(
            f"{name} is not in the form {flag} expects; check it was copied whole",
            error_code="usage_error",
        )
    return value


def checked_endpoint(url: str, name: str) -> str:
    """An https URL with a host (http only to a loopback host), or `usage_error` naming
    `name` (the variable it came from; the URL itself may be a secret, so it is not shown)."""
    parts = urllib.parse.urlsplit(url)
    plain_ok = parts.scheme == "http" and is_loopback(parts.hostname)
    if not parts.hostname or not (parts.scheme == "https" or plain_ok) or parts.username:
        raise UsageError(
            f"{name} must be an https:// URL with a host (http:// only to a loopback host)",
            error_code="usage_error",
        )
    return url


def api_base(environ: Mapping[str, str], name: str, default: str) -> str:
    """The API's origin: `default`, or the override in `environ[name]` (for tests and
    self-hosted relays only)."""
    override = environ.get(name, "").strip()
    return checked_endpoint(override, name).rstrip("/") if override else default


def link_words(notice: Notice) -> str:
    """What a channel's link or button says."""
    return "Open the page" if notice.kind == SUMMARY_KEY else "Open the card"


def json_request(doc: Mapping[str, object]) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return body, {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT}


def form_request(fields: Mapping[str, str]) -> tuple[bytes, dict[str, str]]:
    body = urllib.parse.urlencode(fields).encode("ascii")
    return body, {"Content-Type": "application/x-www-form-urlencoded", "User-Agent": USER_AGENT}


class PushSender:
    """One notice, one POST: a channel gives `_request`; this sends it with retries."""

    channel = "push"

    def __init__(
        self,
        *,
        timeout: float = TIMEOUT_SEC,
        backoff: Sequence[float] = BACKOFF_SEC,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._timeout = timeout
        self._backoff = tuple(backoff)
        self._sleep = sleep
        self._opener = no_proxy_opener()

    def _request(self, notice: Notice) -> tuple[str, bytes, dict[str, str]]:
        """The URL, body and headers of this notice's request. Pure."""
        raise NotImplementedError

    # The wait a channel's API asks for in a 429's body, when it says so there rather than
    # in `Retry-After` (None: this API does not). Pure.
    retry_hint: BodyHint | None = None

    def send(self, notice: Notice) -> Outcome:
        url, body, headers = self._request(notice)
        code = with_retries(
            lambda: post_once(self._opener, url, body, headers, self._timeout, self.retry_hint),
            self._backoff,
            self._sleep,
        )
        return Outcome(code == "sent", self.channel, code)

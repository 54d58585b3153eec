"""Push to the owner's phone through ntfy (https://ntfy.sh, or the owner's own ntfy server).

Owns one notice as ntfy's publish request: `POST <server>/<topic>` with the notice's text
as the body and its title, tag and tap action in headers (`Title`, `Tags`, `Click`: the
gate's link, so a tap opens that gate's card), plus `Authorization: Bearer <token>` when the
owner's ntfy server wants one (taken from `LOOPX_CHAT_NTFY_TOKEN` in the service's
environment, never from argv). Same timeout, retries and no-proxy opener as the webhook
(`notify/push.py`). A notice names only the goal, the kind and the link; never a question, a
path or a credential of the service. Never raises: every failure is an `Outcome`.

Written by hand rather than through Apprise: ntfy is one POST with three headers, and
Apprise would bring requests, PyYAML, Markdown and click into the service (see
docs/reference.md, "Push to a phone").
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence

from loopx_chat.errors import UsageError
from loopx_chat.notify.notice import Notice
from loopx_chat.notify.push import PushSender, secret_from
from loopx_chat.notify.webhook import BACKOFF_SEC, TIMEOUT_SEC, USER_AGENT
from loopx_chat.state.push_options import NTFY_TOKEN_ENV

TOKEN_ENV = NTFY_TOKEN_ENV
_TOPIC = re.compile(r"[A-Za-z0-9_-]{1,64}")
# ntfy's access tokens are `tk_` and letters and digits (its `user` package; Gatus checks the
# prefix the same way). A password, a `Bearer ` prefix or a line break copied with it is
# refused before it reaches a header.
_TOKEN = re.compile(r"tk_[A-Za-z0-9]{1,125}")
TAGS = {"host_gate": "question", "owner_gate": "question", "blocked": "warning"}


def checked_topic_url(url: str) -> str:
    """`http(s)://server[:port]/TOPIC`, or `usage_error` saying what is wrong."""
    parts = urllib.parse.urlsplit(url)
    topic = parts.path.strip("/")
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or not _TOPIC.fullmatch(topic)
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise UsageError(
            "--ntfy-url must be http(s)://SERVER/TOPIC (a topic of A-Z a-z 0-9 _ -, up to "
            "64 characters; a token goes in LOOPX_CHAT_NTFY_TOKEN, never in the URL)",
            error_code="usage_error",
        )
    return url


def request_of(notice: Notice, token: str | None) -> tuple[bytes, dict[str, str]]:
    """The publish request's body and headers for one notice. Pure."""
    headers = {
        "Title": notice.title,
        "Tags": TAGS.get(notice.kind, "bell"),
        "Click": notice.page_url,
        "Content-Type": "text/plain; charset=utf-8",
        "User-Agent": USER_AGENT,
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return notice.body.encode("utf-8"), headers


class NtfySender(PushSender):
    channel = "ntfy"

    def __init__(
        self,
        url: str,
        environ: Mapping[str, str],
        *,
        timeout: float = TIMEOUT_SEC,
        backoff: Sequence[float] = BACKOFF_SEC,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(timeout=timeout, backoff=backoff, sleep=sleep)
        self.url = checked_topic_url(url)
        given = environ.get(TOKEN_ENV, "").strip()
        self._token = secret_from(environ, TOKEN_ENV, _TOKEN, "--ntfy-url") if given else None

    def _request(self, notice: Notice) -> tuple[str, bytes, dict[str, str]]:
        return (self.url, *request_of(notice, self._token))

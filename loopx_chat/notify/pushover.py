"""Push to the owner's phone through Pushover (https://pushover.net/api).

Owns one notice as Pushover's message request: `POST <api>/1/messages.json`, form-encoded
`token` (the app's token, `LOOPX_CHAT_PUSHOVER_TOKEN`), `user` (the owner's user key,
`LOOPX_CHAT_PUSHOVER_USER`), `title`, `message`, `url` (the gate's link: a tap opens its
card) and `url_title`. Both keys come from the service's environment, never from argv, and
go nowhere but that form body. A notice names only the goal, the kind and the link. Never
raises from `send`: every failure is an `Outcome` (`notify/push.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from loopx_chat.notify.notice import Notice
from loopx_chat.notify.push import PushSender, api_base, form_request, link_words, secret_from
from loopx_chat.state.push_options import CHANNEL_SECRETS

TOKEN_ENV, USER_ENV = CHANNEL_SECRETS["pushover"]
API_ENV = "LOOPX_CHAT_PUSHOVER_API"  # tests and self-hosted relays only
API = "https://api.pushover.net"
PATH = "/1/messages.json"
# Pushover's keys: 30 characters of A-Z a-z 0-9 (its API documentation).
_KEY = re.compile(r"[A-Za-z0-9]{30}")


def fields_of(notice: Notice, token: str, user: str) -> dict[str, str]:
    """The message request's form fields for one notice. Pure."""
    return {
        "token": token,
        "user": user,
        "title": notice.title,
        "message": notice.body,
        "url": notice.page_url,
        "url_title": link_words(notice),
    }


class PushoverSender(PushSender):
    channel = "pushover"

    def __init__(self, environ: Mapping[str, str], **retry: Any) -> None:
        super().__init__(**retry)
        self._token = secret_from(environ, TOKEN_ENV, _KEY, "--push pushover")
        self._user = secret_from(environ, USER_ENV, _KEY, "--push pushover")
        self._url = api_base(environ, API_ENV, API) + PATH

    def _request(self, notice: Notice) -> tuple[str, bytes, dict[str, str]]:
        return (self._url, *form_request(fields_of(notice, self._token, self._user)))

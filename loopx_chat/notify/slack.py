"""Push to the owner through a Slack incoming webhook (https://api.slack.com/messaging/webhooks).

Owns one notice as the webhook's message: `POST <webhook URL>` with JSON `{text}`, the text
in Slack's mrkdwn with the gate's link as `<URL|Open the card>` (`&`, `<` and `>` escaped as
Slack asks). The webhook URL is itself the credential: it comes from
`LOOPX_CHAT_SLACK_WEBHOOK_URL` in the service's environment, never argv, and is never
logged, shown or put in an error; https only (http only to a loopback host, for tests). A
notice names only the goal, the kind and the link. Never raises from `send`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from loopx_chat.notify.notice import Notice
from loopx_chat.notify.push import (
    PushSender,
    checked_endpoint,
    json_request,
    link_words,
    secret_from,
)
from loopx_chat.state.push_options import CHANNEL_SECRETS

(URL_ENV,) = CHANNEL_SECRETS["slack"]
_ANY_URL = re.compile(r"\S+")  # its form is checked by `checked_endpoint`
# Slack's three control characters in message text, as it asks them escaped.
_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))


def escaped(text: str) -> str:
    for raw, entity in _ESCAPES:
        text = text.replace(raw, entity)
    return text


def message_of(notice: Notice) -> dict[str, object]:
    """The webhook's body for one notice. Pure."""
    link = f"<{escaped(notice.page_url)}|{link_words(notice)}>"
    return {"text": f"*{escaped(notice.title)}*\n{escaped(notice.body)} {link}"}


class SlackSender(PushSender):
    channel = "slack"

    def __init__(self, environ: Mapping[str, str], **retry: Any) -> None:
        super().__init__(**retry)
        url = secret_from(environ, URL_ENV, _ANY_URL, "--push slack")
        self._secret_url = checked_endpoint(url, URL_ENV)

    def __repr__(self) -> str:  # never the URL: it is the credential
        return "SlackSender()"

    def _request(self, notice: Notice) -> tuple[str, bytes, dict[str, str]]:
        return (self._secret_url, *json_request(message_of(notice)))

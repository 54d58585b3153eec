"""Push to the owner's phone through a Telegram bot (https://core.telegram.org/bots/api).

Owns one notice as the Bot API's `sendMessage`: `POST <api>/bot<TOKEN>/sendMessage` with JSON
`{chat_id, text, reply_markup: {inline_keyboard: [[{text, url}]]}}`, the gate's link as the
button. Telegram refuses a button to a loopback address or a host name without a dot, so
such a link goes in the text instead (with its preview off). The bot's token comes from
`LOOPX_CHAT_TELEGRAM_TOKEN` in the service's environment, never argv; it sits in the URL's
path, so that URL is never logged, shown or put in an error. The chat is `serve
--telegram-chat ID` (not a secret: the bot is). A notice names only the goal, the kind and
the link. A 429 that says `parameters.retry_after` in its body is waited for as a
`Retry-After` would be (notify/webhook.py). Never raises from `send`.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from loopx_chat.errors import UsageError
from loopx_chat.notify.notice import Notice
from loopx_chat.notify.push import (
    PushSender,
    api_base,
    is_loopback,
    json_request,
    link_words,
    secret_from,
)
from loopx_chat.state.push_options import CHANNEL_SECRETS

(TOKEN_ENV,) = CHANNEL_SECRETS["telegram"]
API_ENV = "LOOPX_CHAT_TELEGRAM_API"  # tests and self-hosted Bot API servers only
API = "https://api.telegram.org"
# A bot token as @BotFather gives it: the bot's id, a colon, then A-Z a-z 0-9 _ -.
_TOKEN = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{20,100}")
# A chat: its numeric id (negative for groups), or @username of a public channel.
_CHAT = re.compile(r"-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31}")


def checked_chat(chat: str | None) -> str:
    if chat is None or not _CHAT.fullmatch(chat):
        raise UsageError(
            "--push telegram needs --telegram-chat ID: the chat's numeric id (negative for a "
            "group) or @channelname",
            error_code="usage_error",
        )
    return chat


def takes_button(url: str) -> bool:
    """Whether Telegram takes `url` on a button: not a loopback address, and a host name with
    a dot (it refuses `http://localhost:8767/` and a bare LAN name with BUTTON_URL_INVALID)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    return "." in host and not is_loopback(host)


def message_of(notice: Notice, chat: str) -> dict[str, object]:
    """The `sendMessage` body for one notice. Pure."""
    text = f"{notice.title}\n{notice.body}"
    if not takes_button(notice.page_url):
        return {
            "chat_id": chat,
            "text": f"{text}\n{notice.page_url}",
            "link_preview_options": {"is_disabled": True},
        }
    button = {"text": link_words(notice), "url": notice.page_url}
    return {"chat_id": chat, "text": text, "reply_markup": {"inline_keyboard": [[button]]}}


def retry_after_of(body: bytes) -> float | None:
    """The wait a Bot API 429 asks for: `{"ok": false, "parameters": {"retry_after": N}}`
    (https://core.telegram.org/bots/api#responseparameters); None when it says none."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    params = doc.get("parameters") if isinstance(doc, dict) else None
    wait = params.get("retry_after") if isinstance(params, dict) else None
    if isinstance(wait, bool) or not isinstance(wait, int) or wait < 0:
        return None
    return float(wait)


class TelegramSender(PushSender):
    channel = "telegram"
    retry_hint = staticmethod(retry_after_of)

    def __init__(self, environ: Mapping[str, str], chat: str | None, **retry: Any) -> None:
        super().__init__(**retry)
        self._chat = checked_chat(chat)
        token = secret_from(environ, TOKEN_ENV, _TOKEN, "--push telegram")
        self._secret_url = f"{api_base(environ, API_ENV, API)}/bot{token}/sendMessage"

    def __repr__(self) -> str:  # never the URL: it holds the token
        return f"TelegramSender(chat={self._chat!r})"

    def _request(self, notice: Notice) -> tuple[str, bytes, dict[str, str]]:
        return (self._secret_url, *json_request(message_of(notice, self._chat)))

"""Pushover, Telegram and Slack each get one request per notice, exactly as their public API
documents it, checked against a real loopback stand-in of that API: the method, the path,
the content type, the fields and the gate's link; each secret only where the API wants it,
and nowhere in an outcome or the notice log. A 5xx is retried, a 4xx is not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from loopx_chat.errors import UsageError
from loopx_chat.notify.log import NoticeLog
from loopx_chat.notify.notice import Notice
from loopx_chat.notify.push import api_base
from loopx_chat.notify.pushover import PushoverSender
from loopx_chat.notify.slack import SlackSender
from loopx_chat.notify.telegram import TelegramSender
from loopx_chat.notify.telegram import message_of as telegram_message
from loopx_chat.service.notices import push_senders
from tests.helpers.push_apis import (
    PUSHOVER_TOKEN,
    PUSHOVER_USER,
    SECRETS,
    SLACK_HOOK_PATH,
    TELEGRAM_TOKEN,
    PushReceiver,
    Seen,
    push_env,
)

PUBLIC = "https://mac.tail1234.ts.net/"
LINK = f"{PUBLIC}#gate=ship-it/host-abc"
LOOPBACK_LINK = "http://127.0.0.1:8767/#gate=ship-it/host-abc"
TEXT = "Goal ship-it: Codex asks for your approval or answer."
TITLE = "loopx-chat: Waiting on you"
CHAT = "-1001234567890"


def _notice(link: str = LINK) -> Notice:
    return Notice("ship-it:host-abc", "ship-it", "host_gate", link, blocker_ref="host-abc")


def _sender(api: str, receiver: PushReceiver, **retry: Any) -> Any:
    env = push_env({api: receiver})
    if api == "telegram":
        return TelegramSender(env, CHAT, **retry)
    return {"pushover": PushoverSender, "slack": SlackSender}[api](env, **retry)


@pytest.fixture(params=["pushover", "telegram", "slack"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def receiver(api: str) -> Iterator[PushReceiver]:
    r = PushReceiver(api)
    yield r
    r.close()


def _send_one(api: str, notice: Notice) -> tuple[Any, Seen]:
    """One notice to a fresh stand-in of `api`: the outcome and the one request it saw."""
    receiver = PushReceiver(api)
    try:
        outcome = _sender(api, receiver).send(notice)
    finally:
        receiver.close()
    assert outcome.ok and outcome.channel == api and not receiver.refused, receiver.refused
    [seen] = receiver.seen
    assert seen.method == "POST"
    return outcome, seen


def _secrets_outside(seen: Seen, allowed: bytes) -> list[str]:
    """The secrets found in the request once `allowed` (where the API wants them) is cut out."""
    rest = seen.raw.replace(allowed, b"", 1)
    return [s for s in SECRETS if s.encode() in rest]


def test_pushover_gets_its_message_request() -> None:
    _, seen = _send_one("pushover", _notice())
    assert (seen.method, seen.path) == ("POST", "/1/messages.json")
    assert seen.headers["Content-Type"] == "application/x-www-form-urlencoded"
    form = parse_qs(seen.body.decode("ascii"), strict_parsing=True)
    assert form == {
        "token": [PUSHOVER_TOKEN],
        "user": [PUSHOVER_USER],
        "title": [TITLE],
        "message": [TEXT],
        "url": [LINK],
        "url_title": ["Open the card"],
    }
    assert _secrets_outside(seen, seen.body) == []


def test_telegram_gets_send_message_with_the_link_as_a_button() -> None:
    _, seen = _send_one("telegram", _notice())
    assert (seen.method, seen.path) == ("POST", f"/bot{TELEGRAM_TOKEN}/sendMessage")
    assert seen.headers["Content-Type"].split(";")[0] == "application/json"
    assert json.loads(seen.body) == {
        "chat_id": CHAT,
        "text": f"{TITLE}\n{TEXT}",
        "reply_markup": {"inline_keyboard": [[{"text": "Open the card", "url": LINK}]]},
    }
    assert _secrets_outside(seen, f"/bot{TELEGRAM_TOKEN}/".encode()) == []


def test_telegram_gets_a_loopback_link_in_the_text_where_it_takes_no_button() -> None:
    _, seen = _send_one("telegram", _notice(LOOPBACK_LINK))
    doc = json.loads(seen.body)
    assert doc["text"] == f"{TITLE}\n{TEXT}\n{LOOPBACK_LINK}"
    assert "reply_markup" not in doc and doc["link_preview_options"] == {"is_disabled": True}
    for link in ("http://localhost:8767/#goal=g", "http://[::1]:8767/", "https://mac:8443/"):
        assert "reply_markup" not in telegram_message(_notice(link), CHAT), link
    assert "reply_markup" in telegram_message(_notice("https://mac.lan:8443/#goal=g"), CHAT)


def test_slack_gets_its_webhook_message_with_the_link() -> None:
    _, seen = _send_one("slack", _notice(f"{PUBLIC}#gate=a%26b/c"))
    assert (seen.method, seen.path) == ("POST", SLACK_HOOK_PATH)
    assert seen.headers["Content-Type"].split(";")[0] == "application/json"
    assert json.loads(seen.body) == {
        "text": f"*{TITLE}*\n{TEXT} <{PUBLIC}#gate=a%26b/c|Open the card>",
    }
    assert _secrets_outside(seen, SLACK_HOOK_PATH.encode()) == []
    # Slack's control characters in a link are escaped as Slack asks.
    from loopx_chat.notify.slack import message_of

    assert "<https://h/?a=1&amp;b=&lt;x&gt;|" in str(message_of(_notice("https://h/?a=1&b=<x>")))


def test_a_5xx_is_retried_three_times_and_a_4xx_not_at_all(api: str, tmp_path: Path) -> None:
    for statuses, code, attempts, slept_want in (
        ((503,), "http_503", 4, [0.5, 1.0, 2.0]),
        ((502, 200), "sent", 2, [0.5]),
        ((400,), "http_400", 1, []),
        ((429, 200), "sent", 2, [0.5]),
    ):
        receiver = PushReceiver(api, statuses)
        slept: list[float] = []
        try:
            outcome = _sender(api, receiver, sleep=slept.append).send(_notice())
        finally:
            receiver.close()
        assert (outcome.code, len(receiver.seen), slept) == (code, attempts, slept_want), statuses
        log = NoticeLog(tmp_path)
        log.record(_notice(), outcome, "2026-12-03T00:00:00Z")
        written = repr(outcome).encode() + log.path.read_bytes()
        assert not [s for s in SECRETS if s.encode() in written]


def test_an_unreachable_api_is_an_outcome_that_names_no_secret(api: str) -> None:
    receiver = PushReceiver(api)
    receiver.close()  # nothing listens there now
    sender = _sender(api, receiver, backoff=())
    outcome = sender.send(_notice())
    assert (outcome.ok, outcome.code) == (False, "unreachable")
    assert not [s for s in SECRETS if s in repr(outcome) + repr(sender)]


@pytest.mark.parametrize(
    ("channel", "drop", "names"),
    [
        ("pushover", "LOOPX_CHAT_PUSHOVER_TOKEN", "LOOPX_CHAT_PUSHOVER_TOKEN"),
        ("pushover", "LOOPX_CHAT_PUSHOVER_USER", "LOOPX_CHAT_PUSHOVER_USER"),
        ("telegram", "LOOPX_CHAT_TELEGRAM_TOKEN", "LOOPX_CHAT_TELEGRAM_TOKEN"),
        ("slack", "LOOPX_CHAT_SLACK_WEBHOOK_URL", "LOOPX_CHAT_SLACK_WEBHOOK_URL"),
    ],
)
def test_a_missing_secret_is_a_usage_error_naming_its_variable(
    channel: str, drop: str, names: str
) -> None:
    receiver = PushReceiver(channel)
    receiver.close()
    env = {k: v for k, v in push_env({channel: receiver}).items() if k != drop}
    with pytest.raises(UsageError) as caught:
        push_senders([channel], env, CHAT)
    assert caught.value.error_code == "usage_error" and names in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LOOPX_CHAT_PUSHOVER_TOKEN", "short"),
        ("LOOPX_CHAT_TELEGRAM_TOKEN", "not a bot token"),
        ("LOOPX_CHAT_SLACK_WEBHOOK_URL", "http://hooks.slack.com/services/T/B/plain-http"),
        ("LOOPX_CHAT_PUSHOVER_API", "http://pushover.example"),
        ("LOOPX_CHAT_TELEGRAM_API", "ftp://127.0.0.1"),
    ],
)
def test_a_malformed_secret_or_api_is_refused_without_showing_it(name: str, value: str) -> None:
    receiver = PushReceiver("slack")
    receiver.close()
    env = {
        **push_env({c: receiver for c in ("pushover", "telegram", "slack")}),
        name: value,
    }
    with pytest.raises(UsageError) as caught:
        push_senders(["pushover", "telegram", "slack"], env, CHAT)
    assert name in str(caught.value) and value not in str(caught.value)


def test_a_telegram_chat_must_be_an_id_or_a_channel_name() -> None:
    receiver = PushReceiver("telegram")
    receiver.close()
    env = push_env({"telegram": receiver})
    for chat in (None, "", "12ab", "@x", "me"):
        with pytest.raises(UsageError, match="--telegram-chat"):
            push_senders(["telegram"], env, chat)
    assert len(push_senders(["telegram", "telegram"], env, "@loopx_owner")) == 1


def test_the_api_override_is_https_or_loopback_only() -> None:
    name = "LOOPX_CHAT_PUSHOVER_API"
    assert api_base({}, name, "https://api.pushover.net") == "https://api.pushover.net"
    assert api_base({name: "https://relay.example/"}, name, "x") == "https://relay.example"
    assert api_base({name: "http://[::1]:9"}, name, "x") == "http://[::1]:9"
    for bad in ("http://10.0.0.2", "http://localhost.evil.example", "https://u:p@h"):
        with pytest.raises(UsageError):
            api_base({name: bad}, name, "x")

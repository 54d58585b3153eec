"""A channel's API that says how long to wait is obeyed: an HTTP `Retry-After` in seconds,
or Telegram's `parameters.retry_after` in a 429's body, capped at RETRY_AFTER_MAX_SEC, never
shorter than the backoff; an HTTP date or nothing leaves the 0.5/1/2 s backoff. Checked
against the loopback stand-ins of each API (pushover, telegram, slack; the webhook and ntfy
share the same sending code), with the sleep injected: the number and order of requests
and each wait asked for. The wait runs on the channel's worker: while one channel waits,
the caller and every other channel go on."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from loopx_chat.notify.desktop import Outcome
from loopx_chat.notify.dispatcher import Notifier
from loopx_chat.notify.notice import Notice
from loopx_chat.notify.ntfy import NtfySender
from loopx_chat.notify.pushover import PushoverSender
from loopx_chat.notify.slack import SlackSender
from loopx_chat.notify.telegram import TelegramSender, retry_after_of
from loopx_chat.notify.webhook import (
    RETRY_AFTER_MAX_SEC,
    WebhookSender,
    retry_after_seconds,
)
from tests.helpers.push_apis import PushReceiver, Reply, push_env, telegram_429

LINK = "https://mac.tail1234.ts.net/#gate=ship-it/host-abc"
WEBHOOK_SECRET = "whsec_" + "a2" * 16


def _notice(key: str = "ship-it:host-abc") -> Notice:
    return Notice(key, "ship-it", "host_gate", LINK, blocker_ref="host-abc")


def _sender(api: str, receiver: PushReceiver, **retry: Any) -> Any:
    env = push_env({api: receiver})
    if api == "telegram":
        return TelegramSender(env, "-1001234567890", **retry)
    return {"pushover": PushoverSender, "slack": SlackSender}[api](env, **retry)


def _waits(header: str) -> Reply:
    return Reply(429, (("Retry-After", header),))


def _sent(api: str, replies: tuple[Reply, ...]) -> tuple[str, list[float], PushReceiver]:
    receiver = PushReceiver(api, replies=replies)
    slept: list[float] = []
    try:
        outcome = _sender(api, receiver, sleep=slept.append).send(_notice())
    finally:
        receiver.close()
    return outcome.code, slept, receiver


@pytest.mark.parametrize("api", ["pushover", "telegram", "slack"])
@pytest.mark.parametrize(
    ("replies", "slept_want"),
    [
        ((_waits("7"),), [7.0]),  # asked for: waited for
        ((_waits("0"),), [0.5]),  # never shorter than the backoff
        ((_waits("120"),), [RETRY_AFTER_MAX_SEC]),  # capped
        ((_waits("Wed, 21 Oct 2015 07:28:00 GMT"),), [0.5]),  # a date: the backoff
        ((_waits("7"), Reply(503, (("Retry-After", "3"),))), [7.0, 3.0]),
        ((_waits("2"), Reply(502)), [2.0, 1.0]),  # said once, then the backoff again
    ],
)
def test_retry_after_is_waited_for_before_the_next_request(
    api: str, replies: tuple[Reply, ...], slept_want: list[float]
) -> None:
    code, slept, receiver = _sent(api, replies)
    assert (code, slept) == ("sent", slept_want)
    # One request per attempt, the same request each time, the last one answered by the API.
    assert len(receiver.seen) == len(replies) + 1 and not receiver.refused
    assert len({(s.path, s.body) for s in receiver.seen}) == 1


def test_every_retry_asked_to_wait_then_given_up() -> None:
    code, slept, receiver = _sent("slack", (_waits("4"),) * 4)
    assert (code, slept, len(receiver.seen)) == ("http_429", [4.0, 4.0, 4.0], 4)


def test_telegram_says_its_wait_in_the_body_of_a_429() -> None:
    code, slept, receiver = _sent("telegram", (telegram_429(5), telegram_429(40)))
    assert (code, slept, len(receiver.seen)) == ("sent", [5.0, RETRY_AFTER_MAX_SEC], 3)
    # The header, when there is one, is what counts.
    both = Reply(429, (("Retry-After", "2"),), telegram_429(9).body)
    assert _sent("telegram", (both,))[1] == [2.0]
    # Another API's 429 body is not read for a wait.
    assert _sent("slack", (Reply(429, (), telegram_429(9).body),))[1] == [0.5]


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b'{"ok":false,"parameters":{"retry_after":3}}', 3.0),
        (b'{"ok":false,"parameters":{"retry_after":true}}', None),
        (b'{"ok":false,"parameters":{"retry_after":-1}}', None),
        (b'{"ok":false,"parameters":{"retry_after":"3"}}', None),
        (b'{"ok":false}', None),
        (b"[1]", None),
        (b"not json", None),
    ],
)
def test_telegrams_body_is_read_for_a_whole_number_of_seconds(
    body: bytes, want: float | None
) -> None:
    assert retry_after_of(body) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [("5", 5.0), (" 12 ", 12.0), ("0", 0.0), ("1.5", None), ("-3", None), ("٣", None), ("", None)],
)
def test_only_the_seconds_form_of_retry_after_is_taken(value: str, want: float | None) -> None:
    assert retry_after_seconds(value) == want


@pytest.mark.parametrize("channel", ["webhook", "ntfy"])
def test_the_webhook_and_ntfy_wait_as_asked_too(channel: str) -> None:
    receiver = PushReceiver("slack", replies=(_waits("6"), _waits("6")))
    slept: list[float] = []
    try:
        if channel == "webhook":
            sender: Any = WebhookSender(
                receiver.origin + "/hook", WEBHOOK_SECRET, sleep=slept.append
            )
        else:
            sender = NtfySender(receiver.origin + "/loopx-topic", {}, sleep=slept.append)
        outcome = sender.send(_notice())
    finally:
        receiver.close()
    # Two refusals, each waited for; the third request reaches the stand-in's own check.
    assert slept == [6.0, 6.0] and len(receiver.seen) == 3, outcome
    assert len({s.body for s in receiver.seen}) == 1


def _until(predicate: Any) -> None:
    """Wait for what the workers do (a guard against a hang, not a time bound on them)."""
    for _ in range(6000):
        if predicate():
            return
        threading.Event().wait(0.01)
    raise AssertionError("the notifier's workers never got there")


class _Desk:
    channel = "desktop"

    def __init__(self) -> None:
        self.sent: list[Notice] = []

    def send(self, notice: Notice) -> Outcome:
        self.sent.append(notice)
        return Outcome(True, self.channel, "sent")


def test_a_channel_waiting_on_retry_after_holds_up_nobody_else() -> None:
    receiver = PushReceiver("slack", replies=(_waits("25"),))
    asked: list[float] = []
    release = threading.Event()

    def sleep(seconds: float) -> None:  # the worker waits here until the test lets it go
        asked.append(seconds)
        release.wait()

    desk = _Desk()
    outcomes: list[tuple[Notice, Outcome]] = []
    notifier = Notifier(
        [_sender("slack", receiver, sleep=sleep), desk],
        page_url="u",
        on_outcome=lambda n, o: outcomes.append((n, o)),
    )
    try:
        for i in range(3):
            notifier.submit(_notice(key=f"ship-it:{i}"))  # returns: submit never blocks
        _until(lambda: len(desk.sent) == 3 and asked == [25.0])
        # The desktop channel told all three while the push channel still waits on the first.
        assert [o.channel for _, o in outcomes] == ["desktop"] * 3
        assert len(receiver.seen) == 1
        release.set()
        _until(lambda: len(outcomes) == 6)
        assert [o.code for _, o in outcomes if o.channel == "slack"] == ["sent"] * 3
        assert len(receiver.seen) == 4
    finally:
        release.set()
        notifier.close(timeout=1.0)
        receiver.close()

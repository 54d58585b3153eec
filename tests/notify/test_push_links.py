"""Notices lead to the decision: each links to its gate's card (in the fragment, never sent
to a server, no credential), and ntfy gets what its publish API expects, with that link as
the tap action, checked against a loopback ntfy stand-in."""

from __future__ import annotations

from typing import Any

import pytest

from loopx_chat.errors import UsageError
from loopx_chat.notify.notice import Notice
from loopx_chat.notify.ntfy import NtfySender, checked_topic_url, request_of
from loopx_chat.service.notices import gate_link, wanted_notices
from loopx_chat.service.page import GateView, GoalActions
from tests.helpers.ntfy import NtfyReceiver

PUBLIC = "https://mac.tail1234.ts.net/"


def _status() -> dict[str, Any]:
    return {"attention_queue": [{"goal_id": "ship-it", "status": "ok", "answers": {}}]}


def _actions(gate_id: str) -> dict[str, GoalActions]:
    gate = GateView(gate_id, "deploy?", True, "pending", "2026-12-01T00:00:00Z")
    return {"ship-it": GoalActions(gates=(gate,))}


def test_each_gate_notice_links_to_its_card_on_the_public_url() -> None:
    notices = wanted_notices(_status(), _actions("host-abc123"), PUBLIC)
    assert [n.page_url for n in notices] == [f"{PUBLIC}#gate=ship-it/host-abc123"]
    assert notices[0].kind == "host_gate"
    loopback = wanted_notices(_status(), _actions("gate-1"), "http://127.0.0.1:8767/")
    assert loopback[0].page_url == "http://127.0.0.1:8767/#gate=ship-it/gate-1"


def test_a_link_escapes_what_it_names_and_carries_nothing_else() -> None:
    assert gate_link(PUBLIC, "a/b", "c&d=e") == f"{PUBLIC}#gate=a%2Fb/c%26d%3De"
    assert gate_link(PUBLIC + "#old", "g") == f"{PUBLIC}#goal=g"


def _notice(link: str = f"{PUBLIC}#gate=ship-it/host-abc") -> Notice:
    return Notice("ship-it:host-abc", "ship-it", "host_gate", link, blocker_ref="host-abc")


def test_the_ntfy_request_names_the_goal_kind_and_link_only() -> None:
    body, headers = request_of(_notice(), None)
    assert body == b"Goal ship-it: Codex asks for your approval or answer."
    assert headers["Click"] == f"{PUBLIC}#gate=ship-it/host-abc"
    assert headers["Title"] == "loopx-chat: Waiting on you"
    assert "Authorization" not in headers
    _, with_token = request_of(_notice(), "tk_secret")
    assert with_token["Authorization"] == "Bearer tk_secret"


@pytest.mark.parametrize(
    "token", ["Bearer tk_abc", "tk_abc\nX-Other: 1", "hunter2", "tk_", "tk_a b"]
)
def test_a_malformed_ntfy_token_is_refused_naming_the_variable_never_the_value(
    token: str,
) -> None:
    with pytest.raises(UsageError) as refused:
        NtfySender("https://ntfy.example/topic", {"LOOPX_CHAT_NTFY_TOKEN": token})
    assert refused.value.error_code == "usage_error"
    assert "LOOPX_CHAT_NTFY_TOKEN" in str(refused.value)
    assert token.split()[-1] not in str(refused.value)
    # No token at all is no Authorization header, as before.
    assert NtfySender("https://ntfy.example/topic", {"LOOPX_CHAT_NTFY_TOKEN": " "})


def test_ntfy_is_sent_as_its_publish_api_expects() -> None:
    receiver = NtfyReceiver(token="tk_abc")
    try:
        sender = NtfySender(receiver.url, {"LOOPX_CHAT_NTFY_TOKEN": "tk_abc"}, backoff=())
        outcome = sender.send(_notice())
        assert outcome.ok and outcome.channel == "ntfy", outcome
        assert not receiver.refused
        [message] = receiver.messages
        assert message["click"] == f"{PUBLIC}#gate=ship-it/host-abc"
        assert message["title"] == "loopx-chat: Waiting on you"
        assert message["message"] == "Goal ship-it: Codex asks for your approval or answer."
        # Without the token the server refuses, and the outcome says so.
        refused = NtfySender(receiver.url, {}, backoff=()).send(_notice())
        assert (refused.ok, refused.code) == (False, "http_400")
    finally:
        receiver.close()


@pytest.mark.parametrize(
    "url",
    [
        "https://ntfy.sh",
        "https://ntfy.sh/",
        "https://ntfy.sh/a/b",
        "https://ntfy.sh/topic?auth=x",
        "https://user:tk@ntfy.sh/topic",
        "ntfy://ntfy.sh/topic",
        "https://ntfy.sh/to pic",
    ],
)
def test_a_topic_url_that_is_not_one_is_refused(url: str) -> None:
    with pytest.raises(UsageError):
        checked_topic_url(url)

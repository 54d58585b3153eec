"""The push options a service definition carries (pure) and the file their secrets are kept
in: 0600 in the 0700 state dir, refused when anyone else could have read it, the
environment first when `serve` starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loopx_chat.errors import StateError, UsageError
from loopx_chat.notify import ntfy, pushover, slack, telegram
from loopx_chat.state import push_secrets
from loopx_chat.state.push_options import PushChoice, PushPlan, option_values, push_plan

INSTALLED = (
    *("/bin/loopx-chat", "serve", "--port", "1", "--ntfy-url=https://n.example/t"),
    *("--push", "telegram", "--push", "slack", "--telegram-chat", "42"),
)


def test_the_channels_read_their_secrets_from_the_one_table() -> None:
    plan = PushPlan("https://n.example/t", ("pushover", "telegram", "slack"), "42")
    assert plan.required_secrets == (
        pushover.TOKEN_ENV,
        pushover.USER_ENV,
        telegram.TOKEN_ENV,
        slack.URL_ENV,
    )
    assert plan.optional_secrets == (ntfy.TOKEN_ENV,)


def test_an_upgrade_keeps_what_is_not_given_and_none_drops() -> None:
    assert option_values(INSTALLED, "--push") == ("telegram", "slack")
    kept = push_plan(PushChoice(), INSTALLED)
    assert kept == PushPlan("https://n.example/t", ("telegram", "slack"), "42")
    assert kept.argv() == (
        *("--ntfy-url", "https://n.example/t", "--push", "telegram", "--push", "slack"),
        *("--telegram-chat", "42"),
    )
    # Channels given replace the installed ones; a chat no channel uses is dropped.
    assert push_plan(PushChoice(push=("slack", "slack")), INSTALLED) == PushPlan(
        "https://n.example/t", ("slack",), None
    )
    assert push_plan(PushChoice(ntfy_url="none", push=("none",)), INSTALLED) == PushPlan()
    assert push_plan(PushChoice(), ()) == PushPlan()


@pytest.mark.parametrize(
    ("choice", "installed"),
    [
        (PushChoice(push=("telegram",)), ()),  # no chat to write to
        (PushChoice(push=("slack",), telegram_chat="42"), ()),  # a chat with no telegram
    ],
)
def test_what_serve_would_refuse_is_refused(choice: PushChoice, installed: tuple[str]) -> None:
    with pytest.raises(UsageError) as refused:
        push_plan(choice, installed)
    assert refused.value.error_code == "usage_error"


def test_the_kept_file_is_private_and_the_environment_comes_first(tmp_path: Path) -> None:
    state = tmp_path / "state"
    push_secrets.save(state, {slack.URL_ENV: "https://hooks.example/kept", "OTHER": "x"})
    assert push_secrets.load(state) == {slack.URL_ENV: "https://hooks.example/kept"}
    path = state / push_secrets.SECRETS_FILE
    assert (path.stat().st_mode & 0o777, state.stat().st_mode & 0o777) == (0o600, 0o700)
    merged = push_secrets.with_kept_secrets({"HOME": "/h"}, state)
    assert merged == {"HOME": "/h", slack.URL_ENV: "https://hooks.example/kept"}
    mine = {slack.URL_ENV: "https://hooks.example/env"}
    assert push_secrets.with_kept_secrets(mine, state) == mine
    with pytest.raises(UsageError) as missing:
        push_secrets.keep_for_service(state, {}, (pushover.TOKEN_ENV,))
    assert pushover.TOKEN_ENV in str(missing.value)
    assert push_secrets.load(state) == {slack.URL_ENV: "https://hooks.example/kept"}  # as it was
    os.chmod(path, 0o644)  # readable by others: never used again
    with pytest.raises(StateError) as unsafe:
        push_secrets.with_kept_secrets({}, state)
    assert unsafe.value.error_code == "state_unsafe"
    assert "hooks.example" not in str(unsafe.value)


def test_a_file_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = state / push_secrets.SECRETS_FILE
    path.write_text('{"not": "ours"}')
    path.chmod(0o600)
    with pytest.raises(StateError) as corrupt:
        push_secrets.load(state)
    assert corrupt.value.error_code == "state_corrupt"

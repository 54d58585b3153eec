"""A pairing code (`pair`, `open`): single use, dead after 5 minutes, guesses rate-limited,
and what it grants (a name, `full` or not) is what the device becomes. Pure: times given."""

from __future__ import annotations

from loopx_chat.service.device_auth import (
    GUESS_LIMIT,
    GUESS_WINDOW_SEC,
    LIVE_CODES_LIMIT,
    LoginCodes,
)

T0 = 1_000_000.0


def test_a_code_works_once() -> None:
    codes = LoginCodes()
    code = codes.issue(T0, "phone", full=False)
    grant = codes.redeem(code, T0 + 1)
    assert grant is not None and grant.name == "phone" and grant.full is False
    assert codes.redeem(code, T0 + 2) is None


def test_a_code_is_dead_after_five_minutes() -> None:
    codes = LoginCodes()
    code = codes.issue(T0, "phone")
    assert codes.redeem(code, T0 + 300.0) is None
    live = codes.issue(T0, "tablet")
    assert codes.redeem(live, T0 + 299.0) is not None


def test_guessing_shuts_redemption_for_a_while() -> None:
    codes = LoginCodes()
    code = codes.issue(T0, "phone")
    for i in range(GUESS_LIMIT):
        assert codes.redeem(f"guess-{i}", T0 + 1) is None
    assert codes.redeem(code, T0 + 2) is None  # even the right code, while the window lasts
    assert codes.redeem(code, T0 + 2 + GUESS_WINDOW_SEC) is not None


def test_live_codes_are_bounded_whoever_asks() -> None:
    codes = LoginCodes()
    live = [codes.issue(T0, f"d{i}") for i in range(LIVE_CODES_LIMIT)]
    assert all(live) and codes.issue(T0, "one-more") is None
    assert codes.redeem(live[0], T0 + 1) is not None  # a spent code frees a place
    assert codes.issue(T0 + 1, "now") is not None
    assert codes.issue(T0 + 1, "full again") is None
    assert codes.issue(T0 + 300.0, "after expiry") is not None


def test_a_code_says_whether_it_is_the_desks() -> None:
    codes = LoginCodes()
    desk, far = codes.issue(T0, desk=True), codes.issue(T0)
    assert codes.redeem(desk, T0 + 1).desk is True  # type: ignore[union-attr]
    assert codes.redeem(far, T0 + 1).desk is False  # type: ignore[union-attr]

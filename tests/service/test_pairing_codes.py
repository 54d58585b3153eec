"""A pairing code (`pair`, `open`): single use, dead after 5 minutes, guesses rate-limited,
and what it grants (a name, `full` or not) is what the device becomes. Pure: times given."""

from __future__ import annotations

from loopx_chat.service.device_auth import GUESS_LIMIT, GUESS_WINDOW_SEC, LoginCodes

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

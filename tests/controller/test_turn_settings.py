"""A turn's own options on the wire (`controller/turn_settings.py`): every `chat` option the
service takes per turn, the first-output timeout included, and refusals by name."""

from __future__ import annotations

import pytest

from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller.turn_settings import TurnSettings, from_wire, turn_timeouts
from loopx_chat.errors import UsageError


def test_the_timeouts_of_a_turn_come_from_its_options() -> None:
    settings = from_wire({"idle_timeout": 30, "turn_timeout": 60, "first_output_timeout": 5})
    assert settings == TurnSettings(idle_timeout=30.0, turn_timeout=60.0, first_output_timeout=5.0)
    limits = turn_timeouts(Timeouts(), settings)
    assert (limits.idle, limits.hard, limits.first_output) == (30.0, 60.0, 5.0)
    # Not given: the runner's own.
    own = Timeouts(first_output=42.0)
    assert turn_timeouts(own, from_wire({"idle_timeout": 30})).first_output == 42.0
    assert turn_timeouts(own, None) is own


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("inf")])
def test_a_bad_first_output_timeout_is_refused_by_name(bad: object) -> None:
    with pytest.raises(UsageError) as raised:
        from_wire({"first_output_timeout": bad})
    assert raised.value.error_code == "usage_error"
    assert "first_output_timeout" in str(raised.value)

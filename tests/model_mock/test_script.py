"""The mock's script as data: what parses, and each refusal naming the key that is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from loopx_chat.model_mock.script import GoalLane, MockScript, ScriptRefused, parse_script


def test_a_full_script_parses_into_its_records() -> None:
    doc = {
        "requests": ["mock:text=first"],
        "default": "mock:text=later",
        "goals": [
            {"objective": "Say hello", "requests": ["mock:text=hello"], "default": "mock:text=x"},
            {"objective": "Count"},
        ],
    }
    assert parse_script(doc) == MockScript(
        requests=("mock:text=first",),
        default="mock:text=later",
        goals=(
            GoalLane("Say hello", ("mock:text=hello",), "mock:text=x"),
            GoalLane("Count"),
        ),
    )
    assert parse_script({}) == MockScript()


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ([], "the script must be a JSON object"),
        ({"request": []}, "unknown key 'request'"),
        ({"requests": "mock:text=x"}, "requests must be a list of strings"),
        ({"requests": [1]}, "requests[0] must be a non-empty string"),
        ({"requests": ["  "]}, "requests[0] must be a non-empty string"),
        ({"default": 3}, "default must be a non-empty string"),
        ({"goals": {}}, "goals must be a list"),
        ({"goals": [{"requests": []}]}, "goals[0].objective must be a non-empty string"),
        ({"goals": [{"objective": "x", "when": 1}]}, "goals[0] has unknown key 'when'"),
        ({"requests": ["x" * 4001]}, "requests[0] is longer than 4000 characters"),
    ],
)
def test_a_wrong_script_is_refused_naming_the_key(doc: Any, says: str) -> None:
    with pytest.raises(ScriptRefused) as refused:
        parse_script(doc)
    assert says in str(refused.value)

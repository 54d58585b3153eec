"""The one valid-text check (`valid_text`): invalid Unicode refused at an entry with
`invalid_text`, and repaired (U+FFFD) when read back from a record; the reader's repair."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopx_chat.errors import UsageError
from loopx_chat.state.safe_read import JsonRefused, parse_json
from loopx_chat.valid_text import (
    checked_text,
    checked_tree,
    may_hold_invalid,
    repaired_text,
    repaired_tree,
)


@given(st.text())
def test_text_that_encodes_as_utf8_passes_unchanged(text: str) -> None:
    assert checked_text(text, "x") == text
    assert repaired_text(text) == text


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("ok \udcff", "character 4 is the byte 0xff, which is not UTF-8"),
        ("\ud800", "character 1 is U+D800, a lone surrogate"),
    ],
)
def test_invalid_text_is_refused_naming_what_and_where_never_the_text(text: str, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        checked_text(text, "--question")
    assert refused.value.error_code == "invalid_text"
    assert refused.value.message.startswith("--question is not valid text: ")
    assert said in refused.value.message and "ok" not in refused.value.message


def test_a_tree_is_checked_in_its_keys_and_values() -> None:
    assert checked_tree({"a": ["b", {"c": 1}]}, "the body") == {"a": ["b", {"c": 1}]}
    for doc in ({"a": ["b", "\ud800"]}, {"\udcfe": 1}):
        with pytest.raises(UsageError) as refused:
            checked_tree(doc, "the request body")
        assert refused.value.error_code == "invalid_text"


def test_a_record_read_back_shows_invalid_text_as_the_replacement_character() -> None:
    raw = json.dumps({"q": "a\ud800b", "\udcff": ["\ud83d"]}).encode()
    assert may_hold_invalid(raw)
    assert parse_json(raw, repair=True) == {"q": "a\ufffdb", "\ufffd": ["\ufffd"]}
    assert parse_json(b'{"q": "a\xfeb"}', repair=True) == {"q": "a\ufffdb"}
    assert parse_json(b'{"q": "a\xed\xa0\x80b"}', repair=True) == {"q": "a\ufffdb"}
    assert repaired_tree({"q": "\U0001f600"}) == {"q": "\U0001f600"}
    assert not may_hold_invalid(json.dumps({"q": "\U0001f600 fine"}, ensure_ascii=False).encode())
    with pytest.raises(JsonRefused) as refused:
        parse_json(b'{"q": "a\xfeb"}')
    assert refused.value.not_utf8

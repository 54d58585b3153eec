"""The key classifier against an expected-classification corpus and word lists written from the
spec (tests/data/session_runtime_key_classes.tsv and the lists below), never from the module's
own tables, so dropping a table entry makes a test fail instead of changing the oracle too."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopx_chat.session_runtime import (
    KeyState,
    RawMaterialCategory,
    build_session_runtime_readonly_projection,
    classify_session_runtime_key,
)
from loopx_chat.session_runtime import keys as keys_module
from tests.helpers.spec_keys import SPEC_ID_KEYS, SPEC_RAW_WORDS

CORPUS_FILE = Path(__file__).resolve().parents[1] / "data" / "session_runtime_key_classes.tsv"


def _load_corpus() -> dict[str, str]:
    corpus: dict[str, str] = {}
    for number, line in enumerate(CORPUS_FILE.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        key, expected = line.split("\t")
        assert key not in corpus, f"line {number}: {key!r} listed twice"
        corpus[key] = expected
    return corpus


CORPUS = _load_corpus()
CLASSES = {"compact", "unclassified", *(c.value for c in RawMaterialCategory)}


def _expected(name: str) -> tuple[KeyState, RawMaterialCategory | None]:
    if name in ("compact", "unclassified"):
        return (KeyState(name), None)
    return (KeyState.RAW_MATERIAL, RawMaterialCategory(name))


def _spellings(key: str) -> list[str]:
    """The same words spelled ALLCAPS, kebab-case and camelCase (for snake_case keys)."""
    words = key.split("_")
    camel = words[0] + "".join(w.capitalize() for w in words[1:])
    return [key.upper(), "-".join(words), camel, ".".join(words).upper()]


@pytest.mark.parametrize(("key", "expected"), sorted(CORPUS.items()))
def test_corpus_key(key: str, expected: str) -> None:
    assert expected in CLASSES
    assert classify_session_runtime_key(key) == _expected(expected)
    if key == key.lower():
        for spelling in _spellings(key):
            assert classify_session_runtime_key(spelling) == _expected(expected), spelling


def test_the_corpus_covers_every_entry_of_the_module_tables() -> None:
    # Not an oracle: a new table entry without a corpus row (written from the spec) fails here.
    words = {w for ws in keys_module.RAW_MATERIAL_WORDS.values() for w in ws}
    entries = (
        set(keys_module.COMPACT_KEYS)
        | set(keys_module.RAW_MATERIAL_KEYS)
        | words
        | set(keys_module.COMPACT_SUFFIX_WORDS)
        | set(keys_module.COMPACT_METRIC_WORDS)
    )
    assert sorted(entries - set(CORPUS)) == []


# ---- Word lists of their own (reference §3.5), for the properties -----------------------

SPEC_PHRASES: dict[str, tuple[str, ...]] = {
    "credential": (
        "access_token",
        "auth_token",
        "api_token",
        "bearer_token",
        "refresh_token",
        "id_token",
        "session_token",
        "api_key",
        "private_key",
        "secret_key",
        "access_key",
    ),
    "transcript": ("request_body", "response_body"),
    "raw_output": ("output_text", "tool_output", "tool_result"),
}
SPEC_SUFFIXES = ("id", "ids", "ref", "refs", "count", "at")
# Explicit safe collisions a raw word plus a suffix can spell (reference §3.5 COMPACT_KEYS).
SPEC_COLLISIONS = {
    "trace_id",
    "log_count",
    "conversation_id",
    "prompt_tokens",
    "prompt_token_count",
}
CATEGORY_ORDER = ("credential", "transcript", "log", "local_path", "raw_output")

# Words that are evidence of nothing: in no table, no phrase word, no suffix, and several
# contain a raw word as a substring.
NEUTRAL = (
    "alpha",
    "user",
    "item",
    "chunk",
    "page",
    "color",
    "width",
    "client",
    "server",
    "db",
    "region",
    "name",
    "value",
    "hint",
    "total",
    "catalog",
    "login",
    "tracer",
    "drawer",
    "keyboard",
    "passenger",
    "secretary",
    "author",
    "monkey",
    "compass",
    "dialogue",
    "backlog",
    "rawhide",
    "outputs",
    "contents",
    "pathology",
    "diffuse",
    "dumpling",
    "prompter",
    "tokenizer",
    "identity",
    "counter",
    "reference",
)
neutral_words = st.lists(st.sampled_from(NEUTRAL), max_size=3)


def _key(words: list[str], style: int) -> str:
    if style == 0:
        return "_".join(words)
    if style == 1:
        return "-".join(w.upper() for w in words)
    return words[0] + "".join(w.capitalize() for w in words[1:])


styles = st.integers(min_value=0, max_value=2)


@given(words=st.lists(st.sampled_from(NEUTRAL), min_size=1, max_size=4), style=styles)
def test_neutral_words_are_unclassified(words: list[str], style: int) -> None:
    assert classify_session_runtime_key(_key(words, style)) == (KeyState.UNCLASSIFIED, None)


@given(
    category=st.sampled_from(CATEGORY_ORDER),
    data=st.data(),
    filler=neutral_words,
    style=styles,
)
def test_a_spec_raw_word_anywhere_makes_the_key_raw_of_its_category(
    category: str, data: st.DataObject, filler: list[str], style: int
) -> None:
    word = data.draw(st.sampled_from(SPEC_RAW_WORDS[category]))
    position = data.draw(st.integers(min_value=0, max_value=len(filler)))
    key = _key([*filler[:position], word, *filler[position:]], style)
    assert classify_session_runtime_key(key) == _expected(category)


@given(
    category=st.sampled_from(sorted(SPEC_PHRASES)),
    data=st.data(),
    before=neutral_words,
    after=neutral_words,
    style=styles,
)
def test_a_spec_phrase_anywhere_makes_the_key_raw_of_its_category(
    category: str, data: st.DataObject, before: list[str], after: list[str], style: int
) -> None:
    phrase = data.draw(st.sampled_from(SPEC_PHRASES[category])).split("_")
    key = _key([*before, *phrase, *after], style)
    assert classify_session_runtime_key(key) == _expected(category)


@given(
    data=st.data(),
    filler=neutral_words,
    shortcut=st.sampled_from([*SPEC_SUFFIXES, "tokens"]),
    style=styles,
)
def test_raw_evidence_outranks_the_suffix_and_metric_shortcuts(
    data: st.DataObject, filler: list[str], shortcut: str, style: int
) -> None:
    category = data.draw(st.sampled_from(CATEGORY_ORDER))
    word = data.draw(st.sampled_from(SPEC_RAW_WORDS[category]))
    words = [*filler, word, shortcut]
    result = classify_session_runtime_key(_key(words, style))
    if "_".join(words) in SPEC_COLLISIONS:
        assert result == (KeyState.COMPACT, None)
    else:
        assert result == _expected(category)


@given(
    first=st.sampled_from(CATEGORY_ORDER),
    second=st.sampled_from(CATEGORY_ORDER),
    data=st.data(),
    style=styles,
)
def test_the_earlier_category_wins(
    first: str, second: str, data: st.DataObject, style: int
) -> None:
    words = [
        data.draw(st.sampled_from(SPEC_RAW_WORDS[first])),
        data.draw(st.sampled_from(SPEC_RAW_WORDS[second])),
    ]
    winner = min(first, second, key=CATEGORY_ORDER.index)
    assert classify_session_runtime_key(_key(words, style)) == _expected(winner)


@given(filler=st.lists(st.sampled_from(NEUTRAL), min_size=1, max_size=3), data=st.data())
def test_a_last_suffix_word_or_the_tokens_metric_makes_a_neutral_key_compact(
    filler: list[str], data: st.DataObject
) -> None:
    suffix = data.draw(st.sampled_from(SPEC_SUFFIXES))
    assert classify_session_runtime_key(_key([*filler, suffix], 0)) == (KeyState.COMPACT, None)
    position = data.draw(st.integers(min_value=0, max_value=len(filler)))
    with_metric = [*filler[:position], "tokens", *filler[position:]]
    assert classify_session_runtime_key(_key(with_metric, 0)) == (KeyState.COMPACT, None)


# ---- The cache's stated bounds -----------------------------------------------------------


def test_keys_up_to_256_characters_are_cached_and_longer_ones_are_not() -> None:
    keys_module.clear_key_classification_cache()
    classify_session_runtime_key("a" * 256)
    assert keys_module._classify_name_cached.cache_info().currsize == 1
    classify_session_runtime_key("b" * 257)
    assert keys_module._classify_name_cached.cache_info().currsize == 1


def test_the_cache_holds_at_most_4096_keys() -> None:
    # With the length bound above, this caps what hostile key names can pin in memory.
    keys_module.clear_key_classification_cache()
    for n in range(4097):
        classify_session_runtime_key(f"k{n}")
    assert keys_module._classify_name_cached.cache_info().currsize == 4096


# ---- The id and timestamp tables, as the builder uses them (reference §3.3, §3.4) --------

SPEC_TIMESTAMP_KEYS = ("created_at", "event_at", "updated_at", "timestamp")


def test_a_source_ref_carries_exactly_the_spec_id_keys_in_order() -> None:
    item = {key: f"v-{key}" for key in reversed(SPEC_ID_KEYS)}
    item.update(trace_id="t", catalog_id="c", message_id="m")  # compact ids, but no source ids
    payload = build_session_runtime_readonly_projection(goal_id="g", sessions=[item])
    (ref,) = payload["source"]["source_refs"]["sessions"]
    assert list(ref) == ["kind", *SPEC_ID_KEYS]
    assert ref == {"kind": "session", **{key: f"v-{key}" for key in SPEC_ID_KEYS}}


@pytest.mark.parametrize("first", range(len(SPEC_TIMESTAMP_KEYS)))
def test_the_first_present_timestamp_key_dates_an_item(first: int) -> None:
    item = {key: f"2026-01-0{n + 1}" for n, key in enumerate(SPEC_TIMESTAMP_KEYS) if n >= first}
    payload = build_session_runtime_readonly_projection(goal_id="g", events=[item])
    assert payload["source"]["latest_fact_at"] == f"2026-01-0{first + 1}"

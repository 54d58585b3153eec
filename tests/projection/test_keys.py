"""Key classification: every documented example, substring freedom, precedence, purity."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopx_chat.session_runtime import (
    KeyClassification,
    KeyState,
    RawMaterialCategory,
    classify_session_runtime_key,
    split_key_words,
)
from loopx_chat.session_runtime import keys as keys_module
from loopx_chat.session_runtime.keys import (
    COMPACT_KEYS,
    COMPACT_METRIC_WORDS,
    COMPACT_SUFFIX_WORDS,
    RAW_MATERIAL_CATEGORY_ORDER,
    RAW_MATERIAL_KEY_PHRASES,
    RAW_MATERIAL_KEYS,
    RAW_MATERIAL_WORDS,
    clear_key_classification_cache,
)
from tests.helpers.spec_keys import SPEC_RAW_WORDS

COMPACT = (KeyState.COMPACT, None)
UNCLASSIFIED = (KeyState.UNCLASSIFIED, None)


def raw(category: str) -> tuple[KeyState, RawMaterialCategory]:
    return (KeyState.RAW_MATERIAL, RawMaterialCategory(category))


def rows(expected: object, keys: str) -> list[tuple[str, object]]:
    return [(key, expected) for key in keys.split()]


# The classification table of the reference (§3.6), row by row.
REFERENCE_EXAMPLES = [
    *rows(COMPACT, "kind status actor summary recommended_action created_at session_id"),
    *rows(COMPACT, "artifact_id"),
    *rows(COMPACT, "trace_id message_id conversation_id log_count prompt_tokens"),
    *rows(COMPACT, "prompt_token_count"),
    *rows(COMPACT, "catalog_id dialog_id login_at message_count message_ref token_count"),
    *rows(COMPACT, "tokens_used max_tokens input_tokens output_tokens completion_tokens"),
    *rows(UNCLASSIFIED, "logical_clock backlog changelog drawer content_type message_text"),
    ("", UNCLASSIFIED),
    *rows(raw("credential"), "token access_token auth_token api_token bearer_token"),
    *rows(raw("credential"), "refresh_token id_token accessToken api_key"),
    *rows(raw("credential"), "password secret credential_hint secret_id password_id"),
    *rows(raw("credential"), "tokens_password api_key_id access_token_ref"),
    *rows(raw("transcript"), "raw_transcript transcript_path messages prompt transcript_id"),
    *rows(raw("transcript"), "prompt_id prompt_text_tokens conversation_ref"),
    *rows(raw("transcript"), "conversation_log_count messages_count tokens_transcript"),
    *rows(raw("transcript"), "content body message"),
    *rows(raw("log"), "log logs log_path raw_log trace traces stack_trace trace_path raw_trace"),
    *rows(raw("local_path"), "local_path file_path"),
    *rows(raw("raw_output"), "output_text stdout_tail stderr_tail diff patch raw_id stdout_id"),
    *rows(raw("raw_output"), "raw_tokens tool_result_ref"),
]


@pytest.mark.parametrize(("key", "expected"), REFERENCE_EXAMPLES, ids=lambda v: repr(v))
def test_reference_example(key: str, expected: tuple[object, object]) -> None:
    assert classify_session_runtime_key(key) == expected


SUBSTRING_LOOKALIKES = ("catalog", "dialogue", "backlog", "tokenizer", "tracer", "drawn", "rawhide")
MORE_LOOKALIKES = (
    "changelog",
    "login",
    "keyboard",
    "monkey",
    "passenger",
    "bypass",
    "secretary",
    "author_name",
    "compass",
    "prompter",
    "contents",
    "outputs",
    "bodyguard",
    "tokenization",
    "pathology",
    "diffuse",
    "dumpling",
)


@pytest.mark.parametrize("key", SUBSTRING_LOOKALIKES + MORE_LOOKALIKES)
def test_substring_lookalikes_are_never_raw(key: str) -> None:
    assert classify_session_runtime_key(key).state is not KeyState.RAW_MATERIAL


@pytest.mark.parametrize(
    ("key", "category"),
    [
        ("tokens_password", "credential"),
        ("tokens_transcript", "transcript"),
        ("raw_tokens", "raw_output"),
    ],
)
def test_raw_evidence_outranks_the_token_metric(key: str, category: str) -> None:
    assert classify_session_runtime_key(key) == raw(category)
    assert classify_session_runtime_key(key.replace("_", "-")) == raw(category)


POINTER_SHAPED_RAW = [
    "secret_id",
    "password_id",
    "transcript_id",
    "raw_id",
    "stdout_id",
    "api_key_id",
    "access_token_ref",
    "tool_result_ref",
    "prompt_id",
    "prompt_text_tokens",
    "conversation_ref",
    "conversation_log_count",
    "messages_count",
]


@pytest.mark.parametrize("key", POINTER_SHAPED_RAW)
def test_raw_evidence_outranks_pointer_and_count_suffixes(key: str) -> None:
    assert classify_session_runtime_key(key).state is KeyState.RAW_MATERIAL


@pytest.mark.parametrize(
    ("key", "category"),
    [
        ("prompt_password", "credential"),  # credential before transcript
        ("conversation_secret_log", "credential"),
        ("transcript_path", "transcript"),  # transcript before local_path
        ("raw_transcript", "transcript"),  # transcript before raw_output
        ("log_path", "log"),  # log before local_path
        ("raw_log", "log"),  # log before raw_output
        ("stdout_path", "local_path"),  # local_path before raw_output
        ("diff_patch_dump", "raw_output"),
        ("tool_output_secret", "credential"),  # a credential word beats a raw_output phrase
        ("api_key_transcript", "credential"),  # a credential phrase beats a transcript word
        ("request_body_log", "transcript"),  # a transcript phrase beats a log word
    ],
)
def test_category_precedence(key: str, category: str) -> None:
    assert classify_session_runtime_key(key) == raw(category)


@pytest.mark.parametrize(
    ("compact_key", "raw_twin"),
    [
        ("trace_id", "trace"),
        ("conversation_id", "conversation_ref"),
        ("log_count", "log"),
        ("prompt_tokens", "prompt"),
        ("message_id", "message"),
    ],
)
def test_explicit_safe_collisions_beat_their_raw_words(compact_key: str, raw_twin: str) -> None:
    assert classify_session_runtime_key(compact_key) == COMPACT
    assert classify_session_runtime_key(raw_twin).state is KeyState.RAW_MATERIAL


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("accessToken", ("access", "token")),
        ("APIKey", ("apikey",)),
        ("api-key.ID", ("api", "key", "id")),
        ("HTTP_Log Path", ("http", "log", "path")),
        ("stackTrace2Path", ("stack", "trace2", "path")),
        ("__x__", ("x",)),
        ("", ()),
        ("--", ()),
        ("ünïcode_key", ("n", "code", "key")),
    ],
)
def test_split_key_words(key: str, words: tuple[str, ...]) -> None:
    assert split_key_words(key) == words


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("API_KEY", raw("credential")),
        ("Api-Key", raw("credential")),
        ("apiKey", raw("credential")),
        ("api.key", raw("credential")),
        ("APIKey", raw("credential")),  # no boundary between capitals: the exact key `apikey`
        ("StackTrace", raw("log")),
        ("STACKTRACE", raw("log")),
        ("rawTranscript", raw("transcript")),
        ("Tool.Result.Ref", raw("raw_output")),
        ("catalogId", COMPACT),
        ("SESSION_ID", COMPACT),
        ("maxTokens", COMPACT),
        ("drawerCount", COMPACT),
    ],
)
def test_case_and_separator_variants(key: str, expected: tuple[object, object]) -> None:
    assert classify_session_runtime_key(key) == expected


class _Impostor(str):
    """A str subclass that lies about everything but its characters: it claims to equal (and
    hash like) every other impostor, and prints as ``summary``."""

    def __str__(self) -> str:
        return "summary"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Impostor) or str.__eq__(self, other)

    def __hash__(self) -> int:
        return hash("summary")


@pytest.mark.parametrize(
    "key", [1, 0, -5, 2.5, float("nan"), None, True, b"api_key", ("api", "key"), frozenset()]
)
def test_non_string_keys_are_unclassified_and_never_raise(key: object) -> None:
    assert classify_session_runtime_key(key) == UNCLASSIFIED


def test_str_subclass_is_classified_by_its_characters() -> None:
    # Cached first, so a lookup keyed by the impostor's own __eq__/__hash__ would answer
    # "compact" for every impostor after it; and str() of it would say "summary".
    clear_key_classification_cache()
    assert classify_session_runtime_key(_Impostor("summary")) == COMPACT
    assert classify_session_runtime_key(_Impostor("api_key")) == raw("credential")
    assert classify_session_runtime_key(_Impostor("backlog")) == UNCLASSIFIED


def test_classification_is_a_tuple_of_str_enums() -> None:
    result = classify_session_runtime_key("api_key")
    assert isinstance(result, KeyClassification)
    assert result == ("raw_material", "credential")
    assert result.state == "raw_material" and result.category == "credential"
    assert classify_session_runtime_key("summary") == (KeyState.COMPACT, None)


def test_rule_tables_are_consistent() -> None:
    # The phrases are exactly the underscore-containing raw keys, grouped by category.
    derived: dict[RawMaterialCategory, set[tuple[str, ...]]] = {
        c: set() for c in RawMaterialCategory
    }
    for key, category in RAW_MATERIAL_KEYS.items():
        if "_" in key:
            derived[category].add(tuple(key.split("_")))
    assert {c: set(p) for c, p in RAW_MATERIAL_KEY_PHRASES.items()} == derived
    assert COMPACT_KEYS.isdisjoint(RAW_MATERIAL_KEYS)
    assert tuple(RAW_MATERIAL_WORDS) == RAW_MATERIAL_CATEGORY_ORDER == tuple(RawMaterialCategory)
    assert all(
        key == "_".join(split_key_words(key)) for key in COMPACT_KEYS | set(RAW_MATERIAL_KEYS)
    )


def test_long_keys_bypass_the_cache_but_classify_the_same() -> None:
    long_key = "x_" * 300 + "api_key"
    clear_key_classification_cache()
    assert classify_session_runtime_key(long_key) == raw("credential")
    assert keys_module._classify_name_cached.cache_info().currsize == 0
    assert classify_session_runtime_key("api_key") == raw("credential")
    assert keys_module._classify_name_cached.cache_info().currsize == 1


# ---- Properties ------------------------------------------------------------------------

any_key = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="abcdeklmnoprstuwxyzABKLT_-.0123 ", max_size=40),
    st.sampled_from(sorted(COMPACT_KEYS | set(RAW_MATERIAL_KEYS))),
    st.text(min_size=250, max_size=400),
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(key=any_key, others=st.lists(any_key, max_size=5))
def test_classification_depends_only_on_the_key(key: str, others: list[str]) -> None:
    clear_key_classification_cache()
    cold = classify_session_runtime_key(key)
    for other in others:
        classify_session_runtime_key(other)
    warm = classify_session_runtime_key(key)
    clear_key_classification_cache()
    assert cold == warm == classify_session_runtime_key(key)
    assert cold == keys_module._classify_name(key)
    assert (cold.category is None) == (cold.state is not KeyState.RAW_MATERIAL)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(key=any_key)
def test_classification_depends_only_on_the_words(key: str) -> None:
    words = split_key_words(key)
    expected = classify_session_runtime_key(key)
    assert classify_session_runtime_key("_".join(words)) == expected
    assert classify_session_runtime_key("-".join(words)) == expected
    assert classify_session_runtime_key(" . ".join(words)) == expected


TABLE_WORDS = frozenset(
    {w for key in COMPACT_KEYS | set(RAW_MATERIAL_KEYS) for w in key.split("_")}
    | {w for words in RAW_MATERIAL_WORDS.values() for w in words}
    | COMPACT_SUFFIX_WORDS
    | COMPACT_METRIC_WORDS
)
ALL_RAW_WORDS = sorted({w for words in SPEC_RAW_WORDS.values() for w in words})
letters = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=4)


@st.composite
def lookalike_word(draw: st.DrawFn) -> str:
    """A word that contains a raw word as a substring but is not itself any table word."""
    core = draw(st.sampled_from([*ALL_RAW_WORDS, "token", "key", "content", "output", "body"]))
    prefix = draw(st.one_of(st.just(""), letters))
    suffix = draw(letters if not prefix else st.one_of(st.just(""), letters))
    word = prefix + core + suffix
    if word in TABLE_WORDS:
        word += "zq"
    return word


@given(words=st.lists(lookalike_word(), min_size=1, max_size=3))
def test_raw_words_never_match_as_substrings(words: list[str]) -> None:
    assert classify_session_runtime_key("_".join(words)).state is not KeyState.RAW_MATERIAL


@given(key=st.one_of(st.integers(), st.floats(), st.binary(), st.none(), st.booleans()))
def test_non_string_keys_never_raise(key: object) -> None:
    assert classify_session_runtime_key(key) == UNCLASSIFIED

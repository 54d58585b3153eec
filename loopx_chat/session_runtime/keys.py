"""Key-name classification for session-runtime facts: compact, raw material, or unclassified.

Owns the rule tables of the word-level classifier and the one function that applies them.
It must never read a value, never match by substring, never raise, and never do I/O: the
answer depends on the key alone, so the projection can decide "this item carries raw
material" without ever touching that material.

Theory of operation. A key is split into words (camelCase boundaries, then any run of
characters outside ``[a-z0-9]``). The rules below are applied in strict order and the first
hit wins:

1. no words                                   -> unclassified
2. normalized key in COMPACT_KEYS             -> compact (read by the projection, or a
                                                 deliberately safe collision like trace_id)
3. normalized key in RAW_MATERIAL_KEYS        -> raw material (exact; the only way the
                                                 ambiguous token/key/content/output/body/
                                                 message can match)
4. per category, in RAW_MATERIAL_CATEGORY_ORDER: a whole word in that category's word set,
   or a contiguous word sequence in its phrase set -> raw material of that category
5. last word in COMPACT_SUFFIX_WORDS          -> compact (a pointer or a count)
6. any word in COMPACT_METRIC_WORDS           -> compact (a usage metric)
7. otherwise                                  -> unclassified

Raw evidence (4) outranks the pointer/count and metric shortcuts (5, 6): ``secret_id`` and
``raw_tokens`` are raw, because a generic suffix says nothing about what the value holds.

Open point resolved here: a non-string key is UNCLASSIFIED. The rules are about names, a
JSON document can only carry string keys, and the JSON spelling of a scalar key (``1``,
``true``, ``null``) matches no table anyway, so stringifying would only add a way to raise
(huge ints, recursive reprs). A ``str`` subclass is classified by its characters.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache
from types import MappingProxyType
from typing import NamedTuple


class KeyState(StrEnum):
    COMPACT = "compact"
    RAW_MATERIAL = "raw_material"
    UNCLASSIFIED = "unclassified"


class RawMaterialCategory(StrEnum):
    CREDENTIAL = "credential"
    TRANSCRIPT = "transcript"
    LOG = "log"
    LOCAL_PATH = "local_path"
    RAW_OUTPUT = "raw_output"


class KeyClassification(NamedTuple):
    """An immutable record; a NamedTuple (not a dataclass) because the contract compares
    classifications with plain tuples such as ``(KeyState.UNCLASSIFIED, None)``."""

    state: KeyState
    category: RawMaterialCategory | None = None


_C = RawMaterialCategory

# ---- Rule tables (the whole contract; code below only applies them) -------------------

SOURCE_ID_KEYS: tuple[str, ...] = (
    "session_id",
    "event_id",
    "outcome_id",
    "gate_id",
    "approval_id",
    "artifact_id",
    "tool_call_id",
    "run_id",
    "ref_id",
)
TIMESTAMP_KEYS: tuple[str, ...] = ("created_at", "event_at", "updated_at", "timestamp")

COMPACT_KEYS: frozenset[str] = frozenset(
    {
        *SOURCE_ID_KEYS,
        *TIMESTAMP_KEYS,
        # Explicit safe collisions: they contain raw words but name a pointer or a count.
        "conversation_id",
        "log_count",
        "message_id",
        "prompt_token_count",
        "prompt_tokens",
        "trace_id",
        # Everything the projection reads.
        "kind",
        "type",
        "status",
        "state",
        "actor",
        "required_actor",
        "decision_actor",
        "channel",
        "requires_human_decision",
        "action_required",
        "advisory",
        "blocking",
        "question",
        "requested_decision",
        "title",
        "summary",
        "next_action",
        "recommended_action",
        "agent_next_action",
        "handoff",
        "validation_summary",
        "validated",
        "result",
        "blocker",
        "blocker_summary",
    }
)

RAW_MATERIAL_KEYS: MappingProxyType[str, RawMaterialCategory] = MappingProxyType(
    {
        **dict.fromkeys(
            (
                "token",
                "access_token",
                "auth_token",
                "api_token",
                "bearer_token",
                "refresh_token",
                "id_token",
                "session_token",
                "api_key",
                "apikey",
                "private_key",
                "secret_key",
                "access_key",
                "authorization",
                "cookie",
                "cookies",
            ),
            _C.CREDENTIAL,
        ),
        **dict.fromkeys(
            ("content", "body", "request_body", "response_body", "message"), _C.TRANSCRIPT
        ),
        **dict.fromkeys(("output", "output_text", "tool_output", "tool_result"), _C.RAW_OUTPUT),
    }
)

# Tuple order is category precedence: a key with a credential word and a log word is a
# credential, because leaking a secret is the costlier mistake.
RAW_MATERIAL_CATEGORY_ORDER: tuple[RawMaterialCategory, ...] = (
    _C.CREDENTIAL,
    _C.TRANSCRIPT,
    _C.LOG,
    _C.LOCAL_PATH,
    _C.RAW_OUTPUT,
)

RAW_MATERIAL_WORDS: MappingProxyType[RawMaterialCategory, frozenset[str]] = MappingProxyType(
    {
        _C.CREDENTIAL: frozenset(
            {"credential", "credentials", "secret", "secrets", "password", "passwd", "passphrase"}
        ),
        _C.TRANSCRIPT: frozenset(
            {"transcript", "transcripts", "messages", "prompt", "prompts", "conversation"}
        ),
        _C.LOG: frozenset({"log", "logs", "trace", "traces", "stacktrace", "traceback"}),
        _C.LOCAL_PATH: frozenset({"path", "paths", "cwd", "workdir", "filename", "filepath"}),
        _C.RAW_OUTPUT: frozenset({"raw", "stdout", "stderr", "diff", "patch", "dump"}),
    }
)

# The underscore-containing raw keys, matched anywhere as contiguous word sequences.
RAW_MATERIAL_KEY_PHRASES: MappingProxyType[RawMaterialCategory, frozenset[tuple[str, ...]]] = (
    MappingProxyType(
        {
            _C.CREDENTIAL: frozenset(
                {
                    ("access", "token"),
                    ("auth", "token"),
                    ("api", "token"),
                    ("bearer", "token"),
                    ("refresh", "token"),
                    ("id", "token"),
                    ("session", "token"),
                    ("api", "key"),
                    ("private", "key"),
                    ("secret", "key"),
                    ("access", "key"),
                }
            ),
            _C.TRANSCRIPT: frozenset({("request", "body"), ("response", "body")}),
            _C.LOG: frozenset(),
            _C.LOCAL_PATH: frozenset(),
            _C.RAW_OUTPUT: frozenset({("output", "text"), ("tool", "output"), ("tool", "result")}),
        }
    )
)

COMPACT_SUFFIX_WORDS: frozenset[str] = frozenset({"id", "ids", "ref", "refs", "count", "at"})
COMPACT_METRIC_WORDS: frozenset[str] = frozenset({"tokens"})

# ---- Applying the tables ---------------------------------------------------------------

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SEPARATORS = re.compile(r"[^a-z0-9]+")
_PHRASE_LENGTHS: tuple[int, ...] = tuple(
    sorted({len(p) for phrases in RAW_MATERIAL_KEY_PHRASES.values() for p in phrases})
)

# Keys longer than this are classified without the cache, so one hostile input cannot pin
# megabytes of key text in memory; real key names are far shorter.
_CACHEABLE_KEY_LENGTH = 256
_CACHE_SIZE = 4096

_UNCLASSIFIED = KeyClassification(KeyState.UNCLASSIFIED, None)
_COMPACT = KeyClassification(KeyState.COMPACT, None)
_RAW_BY_CATEGORY: MappingProxyType[RawMaterialCategory, KeyClassification] = MappingProxyType(
    {c: KeyClassification(KeyState.RAW_MATERIAL, c) for c in RawMaterialCategory}
)


def split_key_words(key: str) -> tuple[str, ...]:
    """The lowercase words of a key name: ``"apiKey-ID"`` -> ``("api", "key", "id")``."""
    lowered = _CAMEL_BOUNDARY.sub("_", key).lower()
    return tuple(word for word in _WORD_SEPARATORS.split(lowered) if word)


def _classify_words(words: tuple[str, ...]) -> KeyClassification:
    if not words:
        return _UNCLASSIFIED
    normalized = "_".join(words)
    if normalized in COMPACT_KEYS:
        return _COMPACT
    exact = RAW_MATERIAL_KEYS.get(normalized)
    if exact is not None:
        return _RAW_BY_CATEGORY[exact]
    word_set = frozenset(words)
    sequences = {words[i : i + n] for n in _PHRASE_LENGTHS for i in range(len(words) - n + 1)}
    for category in RAW_MATERIAL_CATEGORY_ORDER:
        if not word_set.isdisjoint(RAW_MATERIAL_WORDS[category]) or not sequences.isdisjoint(
            RAW_MATERIAL_KEY_PHRASES[category]
        ):
            return _RAW_BY_CATEGORY[category]
    if words[-1] in COMPACT_SUFFIX_WORDS:
        return _COMPACT
    if not word_set.isdisjoint(COMPACT_METRIC_WORDS):
        return _COMPACT
    return _UNCLASSIFIED


def _classify_name(key: str) -> KeyClassification:
    return _classify_words(split_key_words(key))


_classify_name_cached = lru_cache(maxsize=_CACHE_SIZE)(_classify_name)


def classify_session_runtime_key(key: object) -> KeyClassification:
    """Classify one key name. Never reads a value, never raises."""
    if type(key) is not str:
        if not isinstance(key, str):
            return _UNCLASSIFIED
        # A str subclass may override __str__/__hash__; classify its plain characters.
        key = str.__str__(key)
    if len(key) > _CACHEABLE_KEY_LENGTH:
        return _classify_name(key)
    return _classify_name_cached(key)


def clear_key_classification_cache() -> None:
    """Forget memoized classifications (benchmarks use it to measure a cold classifier)."""
    _classify_name_cached.cache_clear()

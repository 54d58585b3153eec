"""The OpenViking session-memory adapter's contract: the fixed words of the v0 schema.

Owns what ``openviking_session_memory_adapter_v0`` is made of: the schema version, mode and
specialized schema, every enum, the v0 gate table, the closed field list of each section,
the length and count limits, the default texts the builder writes, the private-value
patterns, and the value rules both the builder and the validator apply
(``private_value_code`` and the id, int, text and flag-name predicates). writeback.py reuses
``private_value_code``, so both contracts reject the same private values.

It must never build or validate a document, never do I/O, read a clock or the environment,
and never import from the rest of ``loopx_chat``.

Open point resolved here (the contract is silent): ``future_gates`` is a list of capability
names (all six, each once), as in the reference shape; the states live in
``retrieval_gates``. The ``status_projection`` enums are those of
``session_runtime_loopx_projection_v0`` (§5.1), which this adapter specializes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from loopx_chat.session_runtime._text import PROJECTED_TEXT_LIMIT, is_public_safe
from loopx_chat.session_runtime.projection import (  # noqa: F401 - re-exported
    RECOMMEND_MONITOR,
    RECOMMEND_WITHOUT_RAW,
)

OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION = "openviking_session_memory_adapter_v0"
OPENVIKING_ADAPTER_MODE = "read_only_projection"
OPENVIKING_ADAPTER_SPECIALIZES = "session_runtime_loopx_projection_v0"
# Where the adapter sits in an attention-queue item.
OPENVIKING_ADAPTER_ITEM_KEY = "openviking_session_memory_adapter"

RETRIEVAL_MODES: tuple[str, ...] = ("preview_only", "disabled", "future_gated")
SOURCE_KINDS: tuple[str, ...] = (
    "prior_issue",
    "session_outcome",
    "operator_note",
    "validation_summary",
    "unknown",
)
SCORE_BUCKETS: tuple[str, ...] = ("high", "medium", "low", "unknown")
RETRIEVAL_CAPABILITIES: tuple[str, ...] = (
    "live_openviking_retrieval",
    "memory_writeback",
    "issue_body_read",
    "comment_body_read",
    "raw_tool_output_ingest",
)
GATE_STATES: tuple[str, ...] = ("future_gated", "blocked_without_authority", "approved")
MEMORY_STATES: tuple[str, ...] = ("preview_only", "future_gated", "blocked", "disabled")
FUTURE_GATE_CAPABILITIES: tuple[str, ...] = (
    *RETRIEVAL_CAPABILITIES,
    "external_issue_comment_or_pr_publish",
)
SOURCE_OF_TRUTH: tuple[str, ...] = (
    "loopx_goal_state",
    "session_runtime_projection",
    "public_issue_metadata",
    "memory_system_refs",
)
# First-screen enums of session_runtime_loopx_projection_v0, which this specializes.
WAITING_ON_VALUES: tuple[str, ...] = (
    "none",
    "user",
    "controller",
    "agent",
    "runtime",
    "external_evidence",
)
GATE_STATE_VALUES: tuple[str, ...] = (
    "clear",
    "user_todo",
    "operator_gate",
    "blocked",
    "deferred",
    "approved",
)
QUOTA_STATE_VALUES: tuple[str, ...] = (
    "eligible",
    "throttled",
    "monitor_quiet_skip",
    "operator_gate",
    "blocked",
)

# v0 gate table: (capability, state, required_authority, blocks). Live retrieval and
# writeback wait for a future contract; reading bodies or raw output needs an authority
# LoopX does not hold at all.
V0_RETRIEVAL_GATES: tuple[tuple[str, str, str, str], ...] = (
    (
        "live_openviking_retrieval",
        "future_gated",
        "live_adapter_contract_and_operator_approval",
        "querying a live OpenViking memory store",
    ),
    (
        "memory_writeback",
        "future_gated",
        "live_adapter_contract_and_operator_approval",
        "writing memory records back to the memory system",
    ),
    (
        "issue_body_read",
        "blocked_without_authority",
        "issue_tracker_read_authority",
        "reading the issue body into LoopX state",
    ),
    (
        "comment_body_read",
        "blocked_without_authority",
        "issue_tracker_read_authority",
        "reading issue comments into LoopX state",
    ),
    (
        "raw_tool_output_ingest",
        "blocked_without_authority",
        "session_runtime_raw_material_authority",
        "ingesting raw tool output or trajectories into LoopX state",
    ),
)

# Values matching any of these are private: home folders, private mounts, internal hosts,
# credentials. The smoke scans the fixture and the docs with the same list.
PRIVATE_VALUE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private_path", re.compile(r"/Users/[^/\s]+/")),
    ("private_path", re.compile(r"/home/[^/\s]+/")),
    ("private_path", re.compile(r"/private/")),
    ("private_path", re.compile(r"(?i:[a-z]:\\Users\\)")),
    ("private_url", re.compile(r"https?://[^\s\"'<>]*(?:corp-only|restricted-host)")),
    ("credential_value", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{4,}")),
    ("credential_value", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("credential_value", re.compile(r"\bsk-[A-Za-z0-9_-]{12,}")),
)

# The contract's public name for the projection core's one text length.
TEXT_LIMIT = PROJECTED_TEXT_LIMIT
# Longer than any text the builder writes (TEXT_LIMIT plus the "..." cap): a longer string
# in a document is a copied body, not a summary.
MAX_STRING_LENGTH = 280
ID_LIMIT = 120
REF_LIST_LIMIT = 16
SOURCE_REF_LIMIT = 32
CANDIDATE_LIMIT = 16
GENERATED_AT_LIMIT = 80
DEFAULT_PROVIDER = "github"
DEFAULT_RUNTIME_ID = "session_runtime"
MEMORY_REF_PREFIX = "mem_"
WITHHELD_SUMMARY = "summary withheld: missing or not public-safe"

FLAG_SUFFIXES: tuple[str, ...] = ("_copied", "_allowed", "_performed")
FLAG_NAMES: frozenset[str] = frozenset({"adapter_is_writable"})

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:#/@+-]*")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")
_REF_KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")
_REPO_SLUG = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_SHOWN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_LINE_BREAK = re.compile(r"[\r\n\u2028\u2029]")

WAITING_ON_ALIASES: Mapping[str, str] = {
    "codex": "agent",
    "human": "user",
    "owner": "user",
    "operator": "controller",
}
GATE_STATE_ALIASES: Mapping[str, str] = {"none": "clear"}
MEMORY_STATE_BY_MODE: Mapping[str, str] = {
    "preview_only": "preview_only",
    "disabled": "disabled",
    "future_gated": "future_gated",
}

ISSUE_FLAGS = ("issue_body_copied", "comment_bodies_copied", "provider_payload_copied")
SESSION_FLAGS = ("raw_trajectory_copied", "raw_transcripts_copied", "raw_tool_outputs_copied")
MEMORY_FLAGS = ("live_retrieval_performed", "writeback_performed")
EVIDENCE_FLAGS = (
    "raw_trajectories_copied",
    "comment_bodies_copied",
    "raw_tool_outputs_copied",
    "credentials_copied",
    "private_paths_copied",
)
TRUTH_FLAGS = (
    "adapter_is_writable",
    "live_retrieval_allowed",
    "memory_writeback_allowed",
    "issue_body_read_allowed",
    "comment_body_read_allowed",
    "tool_output_ingest_allowed",
)

SECTIONS: tuple[str, ...] = (
    "issue_projection",
    "session_projection",
    "memory_projection",
    "retrieval_gates",
    "status_projection",
    "evidence_projection",
    "future_gates",
    "truth_contract",
)
TOP_LEVEL_FIELDS: tuple[str, ...] = ("schema_version", "mode", "specializes", "goal_id")
TOP_LEVEL_OPTIONAL: tuple[str, ...] = ("generated_at",)
ISSUE_REQUIRED = ("provider", "repo", "issue_number", "issue_ref_id", *ISSUE_FLAGS)
ISSUE_OPTIONAL = ("title_summary",)
SESSION_REQUIRED = (
    "runtime_id",
    "session_refs",
    "latest_event_ref",
    "linked_todo_ids",
    "outcome_refs",
    *SESSION_FLAGS,
)
MEMORY_REQUIRED = (
    "namespace",
    "retrieval_mode",
    *MEMORY_FLAGS,
    "top_k_preview",
    "candidate_refs",
)
MEMORY_OPTIONAL = ("query_summary",)
CANDIDATE_REQUIRED = (
    "memory_ref_id",
    "source_kind",
    "score_bucket",
    "summary",
    "raw_memory_copied",
)
GATE_REQUIRED = ("capability", "state", "required_authority", "blocks")
STATUS_REQUIRED = (
    "waiting_on",
    "next_action",
    "user_action_required",
    "agent_can_continue",
    "first_agent_todo",
    "gate_state",
    "quota_state",
    "memory_state",
)
EVIDENCE_REQUIRED = ("source_refs", "validation_refs", *EVIDENCE_FLAGS, "public_safe_summary")
REF_REQUIRED = ("kind", "id")
TRUTH_REQUIRED = ("source_of_truth", *TRUTH_FLAGS)

Doc = Mapping[Any, Any]


# ---- Shared value rules ---------------------------------------------------------------


def private_value_code(value: str) -> str | None:
    """The problem code for a private-looking string (path, URL, credential), else None."""
    for code, pattern in PRIVATE_VALUE_PATTERNS:
        if pattern.search(value):
            return code
    if not is_public_safe(" ".join(value.split())):
        return "unsafe_value"
    return None


def _is_flag_name(key: str) -> bool:
    return key in FLAG_NAMES or key.endswith(FLAG_SUFFIXES)


def _shown(key: object) -> str:
    # A key name can itself be a secret; show only plain identifiers.
    if isinstance(key, str) and _SHOWN_KEY.fullmatch(key) and private_value_code(key) is None:
        return key
    return "<key>"


def _join(path: str, key: object) -> str:
    name = _shown(key)
    return f"{path}.{name}" if path else name


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: object, limit: int = ID_LIMIT) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= limit
        and _ID.fullmatch(value) is not None
        and private_value_code(value) is None
    )

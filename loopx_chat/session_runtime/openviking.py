"""The OpenViking session-memory adapter: a read-only specialization of the projection.

Owns ``openviking_session_memory_adapter_v0``: building it from compact inputs (issue
metadata, session refs, memory refs, a first-screen status, evidence refs) and validating
any document that claims to be one. It must never perform or authorize a live retrieval, a
memory writeback, an issue or comment body read, a raw trajectory or tool-output ingest, or
a publish; it must never copy a value that sits under a raw-material input key, never do
I/O, read a clock or the environment, and never import from the rest of ``loopx_chat``.

Theory of operation. Every input mapping is first reduced to its non-raw keys (keys.py
decides, by name only), and the builder then reads only the keys it names below, always as
scalars, through the public-safe text rules of ``_text.py``. So a raw key can never reach
the output, and neither can an unknown key: the adapter is a closed schema. The builder
ends by running the validator on its own output and raises ``ValueError`` (naming problem
codes and field paths, never values) when the inputs cannot make a valid adapter, so every
document it returns validates.

Open points resolved here (the contract is silent):
- The document is a closed schema: an unknown field anywhere is a problem, reported as
  ``raw_material_key`` when the key classifier calls its name raw, else ``unknown_field``.
  The contract's own flag names (``raw_trajectory_copied``...) are known fields, so the
  classifier's opinion of them does not matter.
- ``future_gates`` is a list of capability names (all six, each once), as in the reference
  shape; the states live in ``retrieval_gates``.
- ``approved`` is a known gate state (not an unknown enum), but v0 rejects it: moving a
  gate needs a separate live adapter contract, and every ``*_allowed`` flag is false.
- ``status_projection`` enums come from ``session_runtime_loopx_projection_v0`` (§5.1):
  ``waiting_on``, ``gate_state`` and ``quota_state`` are checked there too. The builder maps
  the projection builder's words (``codex``/``human``/``owner``/``operator``, gate ``none``)
  onto them. ``user_action_required`` and ``agent_can_continue`` both true is inconsistent.
- Raw keys in the inputs do what they do in the base projection: they never change
  ``waiting_on``, but turn ``agent_can_continue`` off and replace ``next_action``.
- ``generated_at`` is always present (null when not given); the builder never reads a clock.
- Problem strings are ``"<code>: <path>"`` with an optional value-free detail; key names in
  paths are shown only when they look like plain identifiers.
- ``issue_number`` must be a positive int (bool is not an int here).
- Candidate refs without a ``mem_`` id are dropped by the builder (they cannot be joined),
  unknown source kinds and score buckets become ``unknown``, and ``candidate_refs`` keeps at
  most ``top_k_preview`` rows (default: the number of usable candidates, at least 1).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from loopx_chat.session_runtime._text import is_public_safe, public_safe_text, scalar_str
from loopx_chat.session_runtime.keys import KeyState, classify_session_runtime_key

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

TEXT_LIMIT = 180
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
RECOMMEND_WITHOUT_RAW = "provide compact summaries without raw material before projection"
RECOMMEND_MONITOR = "monitor for a material transition"

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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: object, limit: int = ID_LIMIT) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= limit
        and _ID.fullmatch(value) is not None
        and private_value_code(value) is None
    )


def _is_text(value: object) -> bool:
    return (
        isinstance(value, str)
        and bool(value.strip())
        and len(value) <= MAX_STRING_LENGTH
        and _LINE_BREAK.search(value) is None
    )


# ---- Validation ---------------------------------------------------------------------------


class _Problems:
    """An ordered, de-duplicated problem list."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, code: str, path: str, detail: str | None = None) -> None:
        message = f"{code}: {path}" + (f" ({detail})" if detail else "")
        if message not in self.items:
            self.items.append(message)


def _closed(
    obj: Doc,
    path: str,
    required: tuple[str, ...],
    optional: tuple[str, ...],
    problems: _Problems,
    *,
    missing_code: str = "missing_field",
) -> None:
    known = set(required) | set(optional)
    for key in obj:
        if key in known:
            continue
        state, category = classify_session_runtime_key(key)
        if state is KeyState.RAW_MATERIAL and category is not None:
            problems.add("raw_material_key", _join(path, key), category.value)
        else:
            problems.add("unknown_field", _join(path, key))
    for key in required:
        if key not in obj:
            problems.add(missing_code, _join(path, key))


def _enum(obj: Doc, key: str, allowed: tuple[str, ...], path: str, problems: _Problems) -> None:
    if key in obj and obj[key] not in allowed:
        problems.add("unknown_enum", _join(path, key), "expected one of " + ", ".join(allowed))


def _id_field(
    obj: Doc, key: str, path: str, problems: _Problems, *, nullable: bool = False
) -> None:
    if key not in obj:
        return
    value = obj[key]
    if value is None and nullable:
        return
    if not _is_id(value):
        problems.add("invalid_id", _join(path, key))


def _text_field(
    obj: Doc, key: str, path: str, problems: _Problems, *, nullable: bool = False
) -> None:
    if key not in obj:
        return
    value = obj[key]
    if value is None and nullable:
        return
    if not isinstance(value, str) or not value.strip():
        problems.add("invalid_text", _join(path, key))


def _bool_field(obj: Doc, key: str, path: str, problems: _Problems) -> None:
    if key in obj and type(obj[key]) is not bool:
        problems.add("invalid_boolean", _join(path, key))


def _id_list(obj: Doc, key: str, path: str, problems: _Problems) -> None:
    if key not in obj:
        return
    value = obj[key]
    if not isinstance(value, list) or not all(_is_id(item) for item in value):
        problems.add("invalid_ref_list", _join(path, key))


def _section(doc: Doc, name: str, kind: type, problems: _Problems) -> Any:
    value = doc.get(name)
    if name in doc and not isinstance(value, kind):
        problems.add("invalid_section", name)
        return None
    return value


def _check_issue(issue: Doc, problems: _Problems) -> None:
    path = "issue_projection"
    _closed(issue, path, ISSUE_REQUIRED, ISSUE_OPTIONAL, problems)
    if "provider" in issue and not (
        isinstance(issue["provider"], str) and _TOKEN.fullmatch(issue["provider"])
    ):
        problems.add("invalid_value", f"{path}.provider", "a compact provider label")
    repo = issue.get("repo")
    if repo is not None and not (isinstance(repo, str) and _REPO_SLUG.fullmatch(repo)):
        problems.add("invalid_value", f"{path}.repo", "owner/name slug or null")
    if "issue_number" in issue and not (
        _is_int(issue["issue_number"]) and issue["issue_number"] > 0
    ):
        problems.add("invalid_issue_number", f"{path}.issue_number", "a positive int")
    _id_field(issue, "issue_ref_id", path, problems)
    _text_field(issue, "title_summary", path, problems, nullable=True)


def _check_session(session: Doc, problems: _Problems) -> None:
    path = "session_projection"
    _closed(session, path, SESSION_REQUIRED, (), problems)
    _id_field(session, "runtime_id", path, problems)
    _id_field(session, "latest_event_ref", path, problems, nullable=True)
    for key in ("session_refs", "linked_todo_ids", "outcome_refs"):
        _id_list(session, key, path, problems)


def _check_memory(memory: Doc, problems: _Problems) -> None:
    path = "memory_projection"
    _closed(memory, path, MEMORY_REQUIRED, MEMORY_OPTIONAL, problems)
    _id_field(memory, "namespace", path, problems)
    _enum(memory, "retrieval_mode", RETRIEVAL_MODES, path, problems)
    _text_field(memory, "query_summary", path, problems, nullable=True)
    if "top_k_preview" in memory and not (
        _is_int(memory["top_k_preview"]) and memory["top_k_preview"] > 0
    ):
        problems.add("invalid_top_k_preview", f"{path}.top_k_preview", "a positive int")
    candidates = memory.get("candidate_refs")
    if "candidate_refs" in memory and not isinstance(candidates, list):
        problems.add("invalid_section", f"{path}.candidate_refs")
        return
    for index, candidate in enumerate(candidates or []):
        where = f"{path}.candidate_refs[{index}]"
        if not isinstance(candidate, Mapping):
            problems.add("invalid_section", where)
            continue
        _closed(candidate, where, CANDIDATE_REQUIRED, (), problems)
        ref_id = candidate.get("memory_ref_id")
        if "memory_ref_id" in candidate and not (
            _is_id(ref_id) and str(ref_id).startswith(MEMORY_REF_PREFIX)
        ):
            problems.add("invalid_memory_ref_id", f"{where}.memory_ref_id", "needs the mem_ prefix")
        _enum(candidate, "source_kind", SOURCE_KINDS, where, problems)
        _enum(candidate, "score_bucket", SCORE_BUCKETS, where, problems)
        _text_field(candidate, "summary", where, problems)


def _check_gates(gates: list[Any], problems: _Problems) -> None:
    seen: list[str] = []
    for index, gate in enumerate(gates):
        where = f"retrieval_gates[{index}]"
        if not isinstance(gate, Mapping):
            problems.add("invalid_section", where)
            continue
        _closed(gate, where, GATE_REQUIRED, (), problems)
        _enum(gate, "capability", RETRIEVAL_CAPABILITIES, where, problems)
        _enum(gate, "state", GATE_STATES, where, problems)
        if gate.get("state") == "approved":
            problems.add("gate_approved_in_v0", f"{where}.state", "needs a live adapter contract")
        _text_field(gate, "required_authority", where, problems)
        _text_field(gate, "blocks", where, problems)
        capability = gate.get("capability")
        if isinstance(capability, str) and capability in RETRIEVAL_CAPABILITIES:
            if capability in seen:
                problems.add("duplicate_gate", f"{where}.capability", capability)
            seen.append(capability)
    for capability in RETRIEVAL_CAPABILITIES:
        if capability not in seen:
            problems.add("missing_gate", "retrieval_gates", capability)


def _check_status(status: Doc, problems: _Problems) -> None:
    path = "status_projection"
    _closed(status, path, STATUS_REQUIRED, (), problems)
    _enum(status, "waiting_on", WAITING_ON_VALUES, path, problems)
    _enum(status, "gate_state", GATE_STATE_VALUES, path, problems)
    _enum(status, "quota_state", QUOTA_STATE_VALUES, path, problems)
    _enum(status, "memory_state", MEMORY_STATES, path, problems)
    _bool_field(status, "user_action_required", path, problems)
    _bool_field(status, "agent_can_continue", path, problems)
    _text_field(status, "next_action", path, problems)
    _text_field(status, "first_agent_todo", path, problems, nullable=True)
    if status.get("user_action_required") is True and status.get("agent_can_continue") is True:
        problems.add(
            "inconsistent_status", path, "agent_can_continue while user action is required"
        )


def _check_refs(refs: object, path: str, problems: _Problems) -> None:
    if not isinstance(refs, list):
        problems.add("invalid_ref_list", path)
        return
    for index, ref in enumerate(refs):
        where = f"{path}[{index}]"
        if not isinstance(ref, Mapping):
            problems.add("invalid_ref_list", where)
            continue
        _closed(ref, where, REF_REQUIRED, (), problems)
        kind = ref.get("kind")
        if "kind" in ref and not (isinstance(kind, str) and _REF_KIND.fullmatch(kind)):
            problems.add("invalid_value", f"{where}.kind", "a compact ref kind")
        _id_field(ref, "id", where, problems)


def _check_evidence(evidence: Doc, problems: _Problems) -> None:
    path = "evidence_projection"
    _closed(evidence, path, EVIDENCE_REQUIRED, (), problems)
    for key in ("source_refs", "validation_refs"):
        if key in evidence:
            _check_refs(evidence[key], f"{path}.{key}", problems)
    _text_field(evidence, "public_safe_summary", path, problems, nullable=True)


def _check_future_gates(future: list[Any], problems: _Problems) -> None:
    seen: list[str] = []
    for index, capability in enumerate(future):
        where = f"future_gates[{index}]"
        if capability not in FUTURE_GATE_CAPABILITIES:
            problems.add(
                "unknown_enum", where, "expected one of " + ", ".join(FUTURE_GATE_CAPABILITIES)
            )
            continue
        if capability in seen:
            problems.add("duplicate_future_gate", where, capability)
        seen.append(capability)
    for capability in FUTURE_GATE_CAPABILITIES:
        if capability not in seen:
            problems.add("missing_future_gate", "future_gates", capability)


def _check_truth(truth: Doc, problems: _Problems) -> None:
    path = "truth_contract"
    _closed(truth, path, TRUTH_REQUIRED, (), problems)
    sources = truth.get("source_of_truth")
    if "source_of_truth" in truth and not (
        isinstance(sources, list)
        and len(sources) == len(SOURCE_OF_TRUTH)
        and all(isinstance(s, str) for s in sources)
        and set(sources) == set(SOURCE_OF_TRUTH)
    ):
        problems.add(
            "invalid_source_of_truth", f"{path}.source_of_truth", ", ".join(SOURCE_OF_TRUTH)
        )


def _scan(doc: object, problems: _Problems) -> None:
    """Every flag anywhere must be exactly false; every string anywhere must be public-safe.

    Iterative, so a hostile nesting depth cannot raise RecursionError.
    """
    stack: list[tuple[str, object]] = [("", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            for key, child in value.items():
                where = _join(path, key)
                if not isinstance(key, str):
                    problems.add("invalid_key", where)
                elif _is_flag_name(key) and child is not False:
                    problems.add(
                        "forbidden_flag_true" if child is True else "invalid_flag",
                        where,
                        "must be false in v0",
                    )
                stack.append((where, child))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(value))
        elif isinstance(value, str):
            code = private_value_code(value)
            if code is not None:
                problems.add(code, path or "<document>")
            if len(value) > MAX_STRING_LENGTH or _LINE_BREAK.search(value):
                problems.add("raw_text", path or "<document>", "multi-line or over-long text")
        elif isinstance(value, float):
            problems.add("invalid_value", path or "<document>", "no floats in v0")


def validate_openviking_session_memory_adapter(doc: object) -> list[str]:
    """Problems with ``doc`` as an ``openviking_session_memory_adapter_v0``; [] if valid.

    Never raises and never quotes a value: each problem is ``"<code>: <path>"``.
    """
    problems = _Problems()
    if not isinstance(doc, Mapping):
        problems.add("not_an_object", "<document>")
        return problems.items
    _closed(doc, "", TOP_LEVEL_FIELDS, (*TOP_LEVEL_OPTIONAL, *SECTIONS), problems)
    for key in SECTIONS:
        if key not in doc:
            problems.add("missing_section", key)
    for key, wanted, code in (
        (
            "schema_version",
            OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
            "wrong_schema_version",
        ),
        ("mode", OPENVIKING_ADAPTER_MODE, "wrong_mode"),
        ("specializes", OPENVIKING_ADAPTER_SPECIALIZES, "wrong_specializes"),
    ):
        if key in doc and doc[key] != wanted:
            problems.add(code, key, f"expected {wanted}")
    if "goal_id" in doc and not _is_id(doc["goal_id"]):
        problems.add("invalid_id", "goal_id")
    generated_at = doc.get("generated_at")
    if generated_at is not None and not (
        isinstance(generated_at, str) and 0 < len(generated_at) <= GENERATED_AT_LIMIT
    ):
        problems.add("invalid_value", "generated_at", "a short timestamp or null")

    checks: tuple[tuple[str, type, Any], ...] = (
        ("issue_projection", Mapping, _check_issue),
        ("session_projection", Mapping, _check_session),
        ("memory_projection", Mapping, _check_memory),
        ("retrieval_gates", list, _check_gates),
        ("status_projection", Mapping, _check_status),
        ("evidence_projection", Mapping, _check_evidence),
        ("future_gates", list, _check_future_gates),
        ("truth_contract", Mapping, _check_truth),
    )
    for name, kind, check in checks:
        section = _section(doc, name, kind, problems)
        if section is not None:
            check(section, problems)
    _scan(doc, problems)
    return problems.items


def assert_valid_openviking_session_memory_adapter(doc: object) -> None:
    """Raise ``ValueError`` listing the problems (codes and paths only) unless ``doc`` is valid."""
    problems = validate_openviking_session_memory_adapter(doc)
    if problems:
        raise ValueError("invalid openviking_session_memory_adapter_v0: " + "; ".join(problems))


# ---- Building -----------------------------------------------------------------------------


class _Inputs:
    """Input mappings reduced to their non-raw keys, remembering whether any raw key was seen."""

    def __init__(self) -> None:
        self.raw_detected = False

    def compact(self, value: object) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            return {}
        kept: dict[Any, Any] = {}
        for key, child in value.items():
            if classify_session_runtime_key(key).state is KeyState.RAW_MATERIAL:
                self.raw_detected = True
            else:
                kept[key] = child
        return kept

    def items(self, value: object) -> list[dict[Any, Any]]:
        # Like the base projection: a lone mapping is a one-item list; text is not a list.
        if value is None or isinstance(value, str | bytes | bytearray):
            return []
        if isinstance(value, Mapping):
            return [self.compact(value)]
        if not isinstance(value, Iterable):
            return []
        return [self.compact(item) for item in value if isinstance(item, Mapping)]


def _read_id(value: object, limit: int = ID_LIMIT) -> str | None:
    raw = scalar_str(value) if not isinstance(value, bool) else None
    if raw is None:
        return None
    found = raw.strip()
    return found if _is_id(found, limit) else None


def _read_text(value: object, limit: int = TEXT_LIMIT) -> str | None:
    found = public_safe_text(value, limit)
    if found is None or private_value_code(found) is not None:
        return None
    return found


def _read_generated_at(value: object) -> str | None:
    # Copied only when it is already a short, single-line, public-safe stamp: the builder
    # never reads a clock and never invents or truncates one.
    if not isinstance(value, str):
        return None
    stamp = value.strip()
    if not (0 < len(stamp) <= GENERATED_AT_LIMIT) or " " in stamp or not _is_text(stamp):
        return None
    return stamp if private_value_code(stamp) is None else None


def _read_word(value: object, aliases: Mapping[str, str] | None = None) -> str | None:
    if not isinstance(value, str):
        return None
    word = value.strip().lower()
    return (aliases or {}).get(word, word) or None


def _read_ids(
    item: Mapping[Any, Any], single: tuple[str, ...], plural: tuple[str, ...]
) -> list[str]:
    found: list[str | None] = [_read_id(item.get(key)) for key in single]
    for key in plural:
        values = item.get(key)
        if isinstance(values, list | tuple):
            found.extend(_read_id(value) for value in values)
    return [ref for ref in found if ref is not None]


def _unique(values: Iterable[Any], limit: int) -> list[Any]:
    kept: list[Any] = []
    for value in values:
        if value not in kept:
            kept.append(value)
            if len(kept) >= limit:
                break
    return kept


def _timestamp(item: Mapping[Any, Any]) -> str:
    for key in ("updated_at", "event_at", "created_at", "timestamp"):
        value = item.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _issue_projection(issue: Mapping[Any, Any]) -> dict[str, Any]:
    provider_in = issue.get("provider")
    provider = _read_word(provider_in) if provider_in is not None else DEFAULT_PROVIDER
    if provider is None or not _TOKEN.fullmatch(provider):
        provider = "unknown"
    repo = issue.get("repo")
    repo = repo.strip() if isinstance(repo, str) and _REPO_SLUG.fullmatch(repo.strip()) else None
    number = issue.get("issue_number")
    if isinstance(number, str) and number.strip().isdigit() and len(number.strip()) <= 12:
        number = int(number.strip())
    if not (_is_int(number) and 0 < number < 10**12):
        number = None
    ref_id = _read_id(issue.get("issue_ref_id"))
    if ref_id is None and number is not None:
        ref_id = f"{provider}:{repo}#{number}" if repo else f"{provider}:issue#{number}"
    title = _read_text(issue.get("title_summary")) or _read_text(issue.get("title"))
    return {
        "provider": provider,
        "repo": repo,
        "issue_number": number,
        "issue_ref_id": ref_id,
        "title_summary": title,
        **dict.fromkeys(ISSUE_FLAGS, False),
    }


def _session_projection(sessions: list[dict[Any, Any]]) -> dict[str, Any]:
    runtime_id = next(
        (rid for s in sessions if (rid := _read_id(s.get("runtime_id"))) is not None),
        DEFAULT_RUNTIME_ID,
    )
    latest_ref: str | None = None
    latest_at = ""
    for session in sessions:
        ref = _read_id(session.get("latest_event_ref")) or _read_id(session.get("event_id"))
        at = _timestamp(session)
        # ">=" so that, among equal (or absent) timestamps, the later input wins.
        if ref is not None and (latest_ref is None or at >= latest_at):
            latest_ref, latest_at = ref, at
    return {
        "runtime_id": runtime_id,
        "session_refs": _unique(
            (r for s in sessions for r in _read_ids(s, ("session_id", "session_ref"), ())),
            REF_LIST_LIMIT,
        ),
        "latest_event_ref": latest_ref,
        "linked_todo_ids": _unique(
            (
                r
                for s in sessions
                for r in _read_ids(s, ("todo_id",), ("linked_todo_ids", "todo_ids"))
            ),
            REF_LIST_LIMIT,
        ),
        "outcome_refs": _unique(
            (
                r
                for s in sessions
                for r in _read_ids(s, ("outcome_id", "outcome_ref"), ("outcome_refs",))
            ),
            REF_LIST_LIMIT,
        ),
        **dict.fromkeys(SESSION_FLAGS, False),
    }


def _candidate(item: Mapping[Any, Any]) -> dict[str, Any] | None:
    ref_id = _read_id(item.get("memory_ref_id"))
    if ref_id is None or not ref_id.startswith(MEMORY_REF_PREFIX):
        return None
    source_kind = _read_word(item.get("source_kind"))
    score_bucket = _read_word(item.get("score_bucket"))
    return {
        "memory_ref_id": ref_id,
        "source_kind": source_kind if source_kind in SOURCE_KINDS else "unknown",
        "score_bucket": score_bucket if score_bucket in SCORE_BUCKETS else "unknown",
        "summary": _read_text(item.get("summary")) or WITHHELD_SUMMARY,
        "raw_memory_copied": False,
    }


def _memory_projection(memory: Mapping[Any, Any], inputs: _Inputs) -> dict[str, Any]:
    mode_in = memory.get("retrieval_mode")
    mode = _read_word(mode_in) if mode_in is not None else "preview_only"
    raw_candidates = memory.get("candidate_refs")
    if raw_candidates is None:
        raw_candidates = memory.get("candidates")
    candidates: list[dict[str, Any]] = []
    for item in inputs.items(raw_candidates):
        found = _candidate(item)
        if found is not None and all(
            c["memory_ref_id"] != found["memory_ref_id"] for c in candidates
        ):
            candidates.append(found)
    top_k = memory.get("top_k_preview")
    if top_k is None:
        top_k = max(1, len(candidates))
    kept = candidates[: min(top_k, CANDIDATE_LIMIT)] if _is_int(top_k) and top_k > 0 else []
    return {
        "namespace": _read_id(memory.get("namespace")),
        "retrieval_mode": mode,
        "live_retrieval_performed": False,
        "writeback_performed": False,
        "query_summary": _read_text(memory.get("query_summary")),
        "top_k_preview": top_k,
        "candidate_refs": kept,
    }


def _status_projection(
    status: Mapping[Any, Any], retrieval_mode: object, raw_detected: bool
) -> dict[str, Any]:
    user_action = status.get("user_action_required") is True
    first_agent_todo = _read_text(status.get("first_agent_todo"))
    given_can = status.get("agent_can_continue")
    can_continue = given_can if type(given_can) is bool else first_agent_todo is not None
    # The base projection's rule: an open user gate or raw input stops the agent.
    can_continue = can_continue and not user_action and not raw_detected
    waiting_in = status.get("waiting_on")
    if waiting_in is not None:
        waiting_on = _read_word(waiting_in, WAITING_ON_ALIASES)
    elif user_action:
        waiting_on = "user"
    elif first_agent_todo is not None or can_continue:
        waiting_on = "agent"
    else:
        waiting_on = "none"
    if raw_detected:
        next_action: str | None = RECOMMEND_WITHOUT_RAW
    else:
        next_action = _read_text(status.get("next_action")) or first_agent_todo or RECOMMEND_MONITOR
    gate_in = status.get("gate_state")
    quota_in = status.get("quota_state")
    memory_in = status.get("memory_state")
    default_memory = MEMORY_STATE_BY_MODE.get(str(retrieval_mode), "disabled")
    return {
        "waiting_on": waiting_on,
        "next_action": next_action,
        "user_action_required": user_action,
        "agent_can_continue": can_continue,
        "first_agent_todo": first_agent_todo,
        "gate_state": (
            _read_word(gate_in, GATE_STATE_ALIASES)
            if gate_in is not None
            else ("user_todo" if user_action else "clear")
        ),
        "quota_state": _read_word(quota_in) if quota_in is not None else "eligible",
        "memory_state": _read_word(memory_in) if memory_in is not None else default_memory,
    }


def _refs_from(value: object, inputs: _Inputs) -> list[dict[str, str]]:
    refs: list[dict[str, str]] = []
    for item in inputs.items(value):
        kind = _read_word(item.get("kind"))
        ref_id = _read_id(item.get("id"))
        if kind is not None and _REF_KIND.fullmatch(kind) and ref_id is not None:
            refs.append({"kind": kind, "id": ref_id})
    return refs


def _evidence_projection(
    goal_id: str | None,
    issue: Mapping[str, Any],
    session: Mapping[str, Any],
    memory: Mapping[str, Any],
    run_ids: list[str],
    evidence: Mapping[Any, Any],
    inputs: _Inputs,
) -> dict[str, Any]:
    derived: list[dict[str, str]] = []

    def add(kind: str, ref_id: object) -> None:
        if isinstance(ref_id, str):
            derived.append({"kind": kind, "id": ref_id})

    add("goal", goal_id)
    add("issue", issue["issue_ref_id"])
    for ref in session["session_refs"]:
        add("session", ref)
    for ref in session["linked_todo_ids"]:
        add("todo", ref)
    for ref in run_ids:
        add("run", ref)
    for candidate in memory["candidate_refs"]:
        add("memory", candidate["memory_ref_id"])
    derived.extend(_refs_from(evidence.get("source_refs"), inputs))
    return {
        "source_refs": _unique(derived, SOURCE_REF_LIMIT),
        "validation_refs": _unique(
            _refs_from(evidence.get("validation_refs"), inputs), SOURCE_REF_LIMIT
        ),
        **dict.fromkeys(EVIDENCE_FLAGS, False),
        "public_safe_summary": _read_text(evidence.get("public_safe_summary"))
        or _read_text(evidence.get("summary")),
    }


def build_openviking_session_memory_adapter(
    *,
    goal_id: str,
    issue: Mapping[str, Any],
    sessions: Iterable[Mapping[str, Any]],
    memory: Mapping[str, Any],
    status: Mapping[str, Any],
    evidence: Mapping[str, Any],
    generated_at: str | None = None,
) -> dict[str, Any]:
    """The read-only adapter for one goal and issue, from compact inputs.

    Reads only the named compact keys of each input (raw keys are dropped by name, before
    anything is read) and never mutates the inputs. Raises ``ValueError`` (codes and field
    paths only, never values) when the inputs cannot make a valid adapter.
    """
    inputs = _Inputs()
    issue_in = inputs.compact(issue)
    sessions_in = inputs.items(sessions)
    memory_in = inputs.compact(memory)
    status_in = inputs.compact(status)
    evidence_in = inputs.compact(evidence)

    issue_out = _issue_projection(issue_in)
    session_out = _session_projection(sessions_in)
    memory_out = _memory_projection(memory_in, inputs)
    run_ids = _unique(
        (r for s in sessions_in for r in _read_ids(s, ("run_id",), ("run_ids",))),
        REF_LIST_LIMIT,
    )
    run_ids += [r for r in _read_ids(evidence_in, ("run_id",), ("run_ids",)) if r not in run_ids]
    goal = _read_id(goal_id)
    evidence_out = _evidence_projection(
        goal, issue_out, session_out, memory_out, run_ids, evidence_in, inputs
    )
    # Read last: nested candidate and ref items may still reveal raw keys.
    status_out = _status_projection(status_in, memory_out["retrieval_mode"], inputs.raw_detected)
    document: dict[str, Any] = {
        "schema_version": OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
        "mode": OPENVIKING_ADAPTER_MODE,
        "specializes": OPENVIKING_ADAPTER_SPECIALIZES,
        "goal_id": goal,
        "generated_at": _read_generated_at(generated_at),
        "issue_projection": issue_out,
        "session_projection": session_out,
        "memory_projection": memory_out,
        "retrieval_gates": [
            {"capability": c, "state": s, "required_authority": a, "blocks": b}
            for c, s, a, b in V0_RETRIEVAL_GATES
        ],
        "status_projection": status_out,
        "evidence_projection": evidence_out,
        "future_gates": list(FUTURE_GATE_CAPABILITIES),
        "truth_contract": {
            "source_of_truth": list(SOURCE_OF_TRUTH),
            **dict.fromkeys(TRUTH_FLAGS, False),
        },
    }
    assert_valid_openviking_session_memory_adapter(document)
    return document

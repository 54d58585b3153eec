"""The OpenViking session-memory adapter's validator.

Owns deciding whether any document is a valid ``openviking_session_memory_adapter_v0``:
``validate_openviking_session_memory_adapter`` lists the problems and
``assert_valid_openviking_session_memory_adapter`` raises on them. It must never build or
repair a document, never quote a value in a problem (codes and field paths only), never
raise from the validator itself, never do I/O, read a clock or the environment, and never
import from the rest of ``loopx_chat``. The schema words it checks against live in
openviking_contract.py.

Open points resolved here (the contract is silent):
- The document is a closed schema: an unknown field anywhere is a problem, reported as
  ``raw_material_key`` when the key classifier calls its name raw, else ``unknown_field``.
  The contract's own flag names (``raw_trajectory_copied``...) are known fields, so the
  classifier's opinion of them does not matter.
- ``approved`` is a known gate state (not an unknown enum), but v0 rejects it: moving a
  gate needs a separate live adapter contract, and every ``*_allowed`` flag is false.
- ``waiting_on``, ``gate_state`` and ``quota_state`` are checked against the enums of
  ``session_runtime_loopx_projection_v0``; ``user_action_required`` and
  ``agent_can_continue`` both true is inconsistent.
- Problem strings are ``"<code>: <path>"`` with an optional value-free detail; key names in
  paths are shown only when they look like plain identifiers.
- ``issue_number`` must be a positive int (bool is not an int here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopx_chat.session_runtime.keys import KeyState, classify_session_runtime_key
from loopx_chat.session_runtime.openviking_contract import (
    _LINE_BREAK,
    _REF_KIND,
    _REPO_SLUG,
    _TOKEN,
    CANDIDATE_REQUIRED,
    EVIDENCE_REQUIRED,
    FUTURE_GATE_CAPABILITIES,
    GATE_REQUIRED,
    GATE_STATE_VALUES,
    GATE_STATES,
    GENERATED_AT_LIMIT,
    ISSUE_OPTIONAL,
    ISSUE_REQUIRED,
    MAX_STRING_LENGTH,
    MEMORY_OPTIONAL,
    MEMORY_REF_PREFIX,
    MEMORY_REQUIRED,
    MEMORY_STATES,
    OPENVIKING_ADAPTER_MODE,
    OPENVIKING_ADAPTER_SPECIALIZES,
    OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
    QUOTA_STATE_VALUES,
    REF_REQUIRED,
    RETRIEVAL_CAPABILITIES,
    RETRIEVAL_MODES,
    SCORE_BUCKETS,
    SECTIONS,
    SESSION_REQUIRED,
    SOURCE_KINDS,
    SOURCE_OF_TRUTH,
    STATUS_REQUIRED,
    TOP_LEVEL_FIELDS,
    TOP_LEVEL_OPTIONAL,
    TRUTH_REQUIRED,
    WAITING_ON_VALUES,
    Doc,
    _is_flag_name,
    _is_id,
    _is_int,
    _join,
    private_value_code,
)


class _Problems:
    """An ordered, de-duplicated problem list."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._seen: set[str] = set()  # membership in O(1): a hostile document has many

    def add(self, code: str, path: str, detail: str | None = None) -> None:
        message = f"{code}: {path}" + (f" ({detail})" if detail else "")
        if message not in self._seen:
            self._seen.add(message)
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

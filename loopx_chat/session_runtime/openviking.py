"""The OpenViking session-memory adapter: a read-only specialization of the projection.

Owns building ``openviking_session_memory_adapter_v0`` from compact inputs (issue metadata,
session refs, memory refs, a first-screen status, evidence refs). The schema words live in
openviking_contract.py and the validator in openviking_validate.py; this module re-exports
their public names, so every name importable from here before the split still is. It must
never perform or authorize a live retrieval, a memory writeback, an issue or comment body
read, a raw trajectory or tool-output ingest, or a publish; it must never copy a value that
sits under a raw-material input key, never do I/O, read a clock or the environment, and
never import from the rest of ``loopx_chat``.

Theory of operation. Every input mapping is first reduced to its non-raw keys (keys.py
decides, by name only), and the builder then reads only the keys it names below, always as
scalars, through the public-safe text rules of ``_text.py``. So a raw key can never reach
the output, and neither can an unknown key: the adapter is a closed schema. The builder
ends by running the validator on its own output and raises ``ValueError`` (naming problem
codes and field paths, never values) when the inputs cannot make a valid adapter, so every
document it returns validates.

Open points resolved here (the contract is silent; the validator's own are in
openviking_validate.py):
- The builder maps the projection builder's words (``codex``/``human``/``owner``/
  ``operator``, gate ``none``) onto the ``session_runtime_loopx_projection_v0`` enums.
- Raw keys in the inputs do what they do in the base projection: they never change
  ``waiting_on``, but turn ``agent_can_continue`` off and replace ``next_action``.
- ``generated_at`` is always present (null when not given); the builder never reads a clock.
- Candidate refs without a ``mem_`` id are dropped by the builder (they cannot be joined),
  unknown source kinds and score buckets become ``unknown``, and ``candidate_refs`` keeps at
  most ``top_k_preview`` rows (default: the number of usable candidates, at least 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from loopx_chat.session_runtime._text import public_safe_text, scalar_str
from loopx_chat.session_runtime.keys import KeyState, classify_session_runtime_key
from loopx_chat.session_runtime.openviking_contract import (
    _REF_KIND,
    _REPO_SLUG,
    _TOKEN,
    CANDIDATE_LIMIT,
    CANDIDATE_REQUIRED,
    DEFAULT_PROVIDER,
    DEFAULT_RUNTIME_ID,
    EVIDENCE_FLAGS,
    EVIDENCE_REQUIRED,
    FLAG_NAMES,
    FLAG_SUFFIXES,
    FUTURE_GATE_CAPABILITIES,
    GATE_REQUIRED,
    GATE_STATE_ALIASES,
    GATE_STATE_VALUES,
    GATE_STATES,
    GENERATED_AT_LIMIT,
    ID_LIMIT,
    ISSUE_FLAGS,
    ISSUE_OPTIONAL,
    ISSUE_REQUIRED,
    MAX_STRING_LENGTH,
    MEMORY_FLAGS,
    MEMORY_OPTIONAL,
    MEMORY_REF_PREFIX,
    MEMORY_REQUIRED,
    MEMORY_STATE_BY_MODE,
    MEMORY_STATES,
    OPENVIKING_ADAPTER_ITEM_KEY,
    OPENVIKING_ADAPTER_MODE,
    OPENVIKING_ADAPTER_SPECIALIZES,
    OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
    PRIVATE_VALUE_PATTERNS,
    QUOTA_STATE_VALUES,
    RECOMMEND_MONITOR,
    RECOMMEND_WITHOUT_RAW,
    REF_LIST_LIMIT,
    REF_REQUIRED,
    RETRIEVAL_CAPABILITIES,
    RETRIEVAL_MODES,
    SCORE_BUCKETS,
    SECTIONS,
    SESSION_FLAGS,
    SESSION_REQUIRED,
    SOURCE_KINDS,
    SOURCE_OF_TRUTH,
    SOURCE_REF_LIMIT,
    STATUS_REQUIRED,
    TEXT_LIMIT,
    TOP_LEVEL_FIELDS,
    TOP_LEVEL_OPTIONAL,
    TRUTH_FLAGS,
    TRUTH_REQUIRED,
    V0_RETRIEVAL_GATES,
    WAITING_ON_ALIASES,
    WAITING_ON_VALUES,
    WITHHELD_SUMMARY,
    Doc,
    _is_flag_name,
    _is_id,
    _is_int,
    private_value_code,
)
from loopx_chat.session_runtime.openviking_validate import (
    assert_valid_openviking_session_memory_adapter,
    validate_openviking_session_memory_adapter,
)
from loopx_chat.session_runtime.projection import _items

__all__ = [
    "CANDIDATE_LIMIT",
    "CANDIDATE_REQUIRED",
    "DEFAULT_PROVIDER",
    "DEFAULT_RUNTIME_ID",
    "EVIDENCE_FLAGS",
    "EVIDENCE_REQUIRED",
    "FLAG_NAMES",
    "FLAG_SUFFIXES",
    "FUTURE_GATE_CAPABILITIES",
    "GATE_REQUIRED",
    "GATE_STATES",
    "GATE_STATE_ALIASES",
    "GATE_STATE_VALUES",
    "GENERATED_AT_LIMIT",
    "ID_LIMIT",
    "ISSUE_FLAGS",
    "ISSUE_OPTIONAL",
    "ISSUE_REQUIRED",
    "MAX_STRING_LENGTH",
    "MEMORY_FLAGS",
    "MEMORY_OPTIONAL",
    "MEMORY_REF_PREFIX",
    "MEMORY_REQUIRED",
    "MEMORY_STATES",
    "MEMORY_STATE_BY_MODE",
    "OPENVIKING_ADAPTER_ITEM_KEY",
    "OPENVIKING_ADAPTER_MODE",
    "OPENVIKING_ADAPTER_SPECIALIZES",
    "OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION",
    "PRIVATE_VALUE_PATTERNS",
    "QUOTA_STATE_VALUES",
    "RECOMMEND_MONITOR",
    "RECOMMEND_WITHOUT_RAW",
    "REF_LIST_LIMIT",
    "REF_REQUIRED",
    "RETRIEVAL_CAPABILITIES",
    "RETRIEVAL_MODES",
    "SCORE_BUCKETS",
    "SECTIONS",
    "SESSION_FLAGS",
    "SESSION_REQUIRED",
    "SOURCE_KINDS",
    "SOURCE_OF_TRUTH",
    "SOURCE_REF_LIMIT",
    "STATUS_REQUIRED",
    "TEXT_LIMIT",
    "TOP_LEVEL_FIELDS",
    "TOP_LEVEL_OPTIONAL",
    "TRUTH_FLAGS",
    "TRUTH_REQUIRED",
    "V0_RETRIEVAL_GATES",
    "WAITING_ON_ALIASES",
    "WAITING_ON_VALUES",
    "WITHHELD_SUMMARY",
    "Doc",
    "assert_valid_openviking_session_memory_adapter",
    "build_openviking_session_memory_adapter",
    "private_value_code",
    "validate_openviking_session_memory_adapter",
]


class _Inputs:
    """Input mappings reduced to their non-raw keys, remembering whether any raw key was seen."""

    def __init__(self) -> None:
        self.raw_detected = False

    def compact(self, value: object) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            return {}
        kept: dict[Any, Any] = {}
        for key, child in value.items():
            if isinstance(key, str) and _is_flag_name(key):
                # The contract's own boundary flags (`raw_memory_copied`...) name raw words
                # but carry no material: `false` is the adapter's own promise, so its output
                # can be fed back in. Any other value claims something was copied or done.
                if child is not False:
                    self.raw_detected = True
            elif classify_session_runtime_key(key).state is KeyState.RAW_MATERIAL:
                self.raw_detected = True
            else:
                kept[key] = child
        return kept

    def items(self, value: object) -> list[dict[Any, Any]]:
        # The base projection's reading: a lone mapping is a one-item list; text is not a list.
        return [self.compact(item) for item in _items(value)]


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
    # Copied only when it is already a short, public-safe stamp: one run of printable
    # characters (a space, tab, line break or control character inside is not a stamp). The
    # builder never reads a clock and never invents or truncates one.
    if not isinstance(value, str):
        return None
    stamp = value.strip()
    if not (0 < len(stamp) <= GENERATED_AT_LIMIT) or " " in stamp or not stamp.isprintable():
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
            (
                r
                for s in sessions
                for r in _read_ids(s, ("session_id", "session_ref"), ("session_refs",))
            ),
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
    # A run among the given source refs is a run id too: the adapter's own evidence, fed back
    # in, then derives the same refs in the same order.
    given = _refs_from(evidence_in.get("source_refs"), inputs)
    run_ids += _unique(
        (r["id"] for r in given if r["kind"] == "run" and r["id"] not in run_ids), REF_LIST_LIMIT
    )
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

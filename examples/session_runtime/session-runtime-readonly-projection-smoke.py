"""Smoke: the read-only session-runtime projection on the documented scenarios.

Run from the repo root:
    python examples/session_runtime/session-runtime-readonly-projection-smoke.py
Prints `session-runtime-readonly-projection-smoke: ok` only when every check holds; otherwise
names the failing scenario and check on stderr and exits 1. Pure: no files, no network.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run from a checkout, test the checkout: an installed (maybe older) package must not win.
REPO_ROOT = Path(__file__).resolve().parents[2]
if (REPO_ROOT / "loopx_chat" / "session_runtime").is_dir() and str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
if str(REPO_ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "examples"))

from smoke_support import SmokeFailure, check, expect  # noqa: E402

from loopx_chat.session_runtime import (  # noqa: E402
    SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION,
    build_session_runtime_readonly_projection,
    compact_session_runtime_readonly_projection,
    session_runtime_projection_attention,
)

OK_LINE = "session-runtime-readonly-projection-smoke: ok"


def operator_gate() -> None:
    question = "Approve read-only evidence import?"
    payload = build_session_runtime_readonly_projection(
        goal_id="goal-smoke",
        gates=[
            {
                "gate_id": "gate-1",
                "status": "pending",
                "actor": "operator",
                "question": question,
                "blocking": True,
            }
        ],
        sessions=[{"session_id": "sess-1", "summary": "session advanced one bounded segment"}],
        decision_results=[{"ref_id": "dec-1", "recommended_action": "import evidence next"}],
    )
    expect(payload["schema_version"], SESSION_RUNTIME_READONLY_PROJECTION_SCHEMA_VERSION, "schema")
    expect(payload["mode"], "read_only", "mode")
    expect(payload["boundary"]["runtime_writeback_allowed"], False, "writeback")
    expect(payload["boundary"]["runtime_mutation_allowed"], False, "mutation")
    screen = payload["first_screen"]
    expect(screen["waiting_on"], "operator", "waiting_on")
    expect(screen["user_action_required"], True, "user_action_required")
    expect(screen["agent_can_continue"], False, "agent_can_continue")
    expect(screen["first_user_todo"], question, "first_user_todo")
    expect(screen["first_agent_todo"], None, "first_agent_todo")
    expect(screen["gate_state"], "pending", "gate_state")
    expect(payload["work_lane_contract"]["lane"], "user_gate", "lane")
    expect(payload["attention_item"]["priority"], "P0", "priority")
    expect(payload["attention_item"]["title"], question, "title")


def agent_advancement() -> None:
    decision = "wire adapter into status projection"
    payload = build_session_runtime_readonly_projection(
        goal_id="goal-smoke",
        sessions=[
            {
                "session_id": "sess-1",
                "next_action": "continue the bounded segment",
                "created_at": "2026-01-01T00:00:00Z",
            }
        ],
        events=[
            {
                "event_id": "evt-1",
                "kind": "validation",
                "status": "passed",
                "summary": "unit tests passed",
                "event_at": "2026-01-01T00:01:00Z",
            }
        ],
        outcomes=[
            {
                "outcome_id": "out-1",
                "status": "validated",
                "validation_summary": "projection is public-safe",
                "created_at": "2026-01-01T00:02:00Z",
            }
        ],
        decision_results=[{"ref_id": "dec-1", "recommended_action": decision}],
    )
    screen = payload["first_screen"]
    expect(screen["waiting_on"], "agent", "waiting_on")
    expect(screen["agent_can_continue"], True, "agent_can_continue")
    expect(screen["first_agent_todo"], decision, "first_agent_todo (decisions beat sessions)")
    expect(screen["latest_validation"], "projection is public-safe", "latest_validation")
    expect(screen["recommended_action"], decision, "recommended_action")
    expect(payload["work_lane_contract"]["lane"], "advancement_task", "lane")
    expect(payload["work_lane_contract"]["must_attempt_work"], True, "must_attempt_work")
    expect(payload["source"]["latest_fact_at"], "2026-01-01T00:02:00Z", "latest_fact_at")


def raw_flagged_not_copied() -> None:
    markers = {
        "raw_transcript": "SMOKE-MARKER-transcript-0b7e",
        "credential_hint": "SMOKE-MARKER-credential-51c2",
        "local_path": "SMOKE-MARKER-path-9d04",
        "secret": "SMOKE-MARKER-secret-e3a8",
    }
    payload = build_session_runtime_readonly_projection(
        goal_id="goal-smoke",
        sessions=[{"session_id": "sess-1", "next_action": "advance", **markers}],
    )
    boundary = payload["boundary"]
    expect(boundary["raw_material_detected"], True, "raw_material_detected")
    expect(boundary["raw_material_key_names"], sorted(markers), "raw_material_key_names")
    expect(
        boundary["raw_material_categories"],
        ["credential", "local_path", "transcript"],
        "raw_material_categories",
    )
    expect(payload["first_screen"]["agent_can_continue"], False, "agent_can_continue")
    expect(payload["work_lane_contract"]["must_attempt_work"], False, "must_attempt_work")
    expect(
        payload["first_screen"]["recommended_action"],
        "provide compact summaries without raw material before projection",
        "recommended_action",
    )
    dumped = json.dumps(payload)
    for key, marker in markers.items():
        check(marker not in dumped, f"the value under {key!r} was copied into the projection")


def lookalike_compact_keys() -> None:
    lookalikes = ("catalog_id", "login_at", "dialog_id", "trace_id", "message_id", "token_count")
    session: dict[str, Any] = {"session_id": "sess-1", "next_action": "advance bounded segment"}
    session.update((key, f"value-{key}") for key in lookalikes)
    session.update(tokens_used=1200, log_count=3)
    session.update((key, "x") for key in ("logical_clock", "backlog", "changelog", "drawer"))
    payload = build_session_runtime_readonly_projection(goal_id="goal-smoke", sessions=[session])
    boundary = payload["boundary"]
    expect(boundary["raw_material_detected"], False, "raw_material_detected")
    expect(boundary["raw_material_key_names"], [], "raw_material_key_names")
    expect(
        boundary["unclassified_key_names"],
        ["backlog", "changelog", "drawer", "logical_clock"],
        "unclassified_key_names",
    )
    expect(payload["first_screen"]["agent_can_continue"], True, "agent_can_continue")
    expect(
        payload["first_screen"]["recommended_action"], "advance bounded segment", "recommendation"
    )


RAW_KEYS = (
    "messages",
    "content",
    "prompt",
    "api_key",
    "password",
    "body",
    "output_text",
    "file_path",
    "diff",
    "patch",
    "stdout_tail",
    "stderr_tail",
    "log_path",
    "transcript_path",
    "access_token",
    "auth_token",
    "secret_id",
    "password_id",
    "transcript_id",
    "raw_id",
    "stdout_id",
    "api_key_id",
    "access_token_ref",
    "tool_result_ref",
)


def each_raw_key_alone() -> None:
    for key in RAW_KEYS:
        marker = f"SMOKE-MARKER-{key}"
        payload = build_session_runtime_readonly_projection(
            goal_id="goal-smoke",
            sessions=[{"session_id": "sess-1", "next_action": "advance", key: marker}],
        )
        expect(payload["boundary"]["raw_material_key_names"], [key], f"{key}: raw names")
        expect(payload["boundary"]["unclassified_key_names"], [], f"{key}: unclassified")
        expect(payload["first_screen"]["agent_can_continue"], False, f"{key}: can_continue")
        check(marker not in json.dumps(payload), f"{key}: value copied")


def status_ingest() -> None:
    decision = "wire adapter into status projection"
    payload = build_session_runtime_readonly_projection(
        goal_id="goal-smoke",
        sessions=[{"session_id": "sess-1", "next_action": "continue"}],
        decision_results=[{"recommended_action": decision}],
    )
    item = session_runtime_projection_attention({"session_runtime_readonly_projection": payload})
    check(item is not None, "no attention item for a run carrying a projection")
    assert item is not None  # for type checkers; `check` above already failed loudly
    expect(item["source"], "session_runtime_projection", "attention source")
    expect(item["waiting_on"], "codex", "status waiting_on (agent -> codex)")
    expect(item["recommended_action"], decision, "attention recommended_action")
    projection = item["session_runtime_projection"]
    check("source_refs" not in json.dumps(projection), "compact projection kept source_refs")
    expect(projection["source"]["source_ref_counts"].get("sessions"), 1, "session ref count")
    compact = compact_session_runtime_readonly_projection(payload)
    expect(compact and compact["mode"], "read_only", "compact mode")


SCENARIOS: tuple[tuple[str, Callable[[], None]], ...] = (
    ("operator gate", operator_gate),
    ("agent advancement", agent_advancement),
    ("raw flagged and not copied", raw_flagged_not_copied),
    ("lookalike compact keys", lookalike_compact_keys),
    ("each raw key alone", each_raw_key_alone),
    ("status ingest", status_ingest),
)


def main() -> int:
    for name, scenario in SCENARIOS:
        try:
            scenario()
        except SmokeFailure as failure:
            print(
                f"session-runtime-readonly-projection-smoke: FAILED [{name}] {failure}",
                file=sys.stderr,
            )
            return 1
    print(OK_LINE)
    return 0


if __name__ == "__main__":
    sys.exit(main())

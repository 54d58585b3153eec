"""Smoke: the public openviking_session_memory_adapter_v0 fixture, builder and docs.

Run from the repo root:
    python examples/openviking-session-memory-adapter-smoke.py [--fixture PATH]
Prints `openviking-session-memory-adapter-smoke ok` only when every check holds; otherwise
names the failing check on stderr and exits 1. Reads the fixture and the two contract docs;
writes nothing and opens no network connection.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run from a checkout, test the checkout: an installed (maybe older) package must not win.
REPO_ROOT = Path(__file__).resolve().parents[1]
if (REPO_ROOT / "loopx_chat" / "session_runtime").is_dir() and str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
if str(REPO_ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "examples"))

from smoke_support import SmokeFailure, check, expect  # noqa: E402

from loopx_chat.session_runtime import session_runtime_status_waiting_on  # noqa: E402
from loopx_chat.session_runtime.openviking import (  # noqa: E402
    FUTURE_GATE_CAPABILITIES,
    MEMORY_STATES,
    OPENVIKING_ADAPTER_ITEM_KEY,
    OPENVIKING_ADAPTER_MODE,
    OPENVIKING_ADAPTER_SPECIALIZES,
    OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
    PRIVATE_VALUE_PATTERNS,
    RETRIEVAL_CAPABILITIES,
    RETRIEVAL_MODES,
    SCORE_BUCKETS,
    SOURCE_KINDS,
    SOURCE_OF_TRUTH,
    build_openviking_session_memory_adapter,
    validate_openviking_session_memory_adapter,
)

OK_LINE = "openviking-session-memory-adapter-smoke ok"
FIXTURE_PATH = REPO_ROOT / "examples" / "fixtures" / "openviking-session-memory-adapter.public.json"
CONTRACTS = REPO_ROOT / "docs" / "contracts"
CONTRACT_PATH = CONTRACTS / "openviking-session-memory-adapter-v0.md"
WRITEBACK_CONTRACT_PATH = CONTRACTS / "session-runtime-controlled-writeback-v0.md"

FORBIDDEN_SAMPLE_STRINGS = (
    "full transcript body",
    "raw trajectory line",
    "comment body text",
    "tool output text",
    "credential-value",
    "secret-value",
)
CONTRACT_PHRASES = (
    OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION,
    OPENVIKING_ADAPTER_SPECIALIZES,
    "read-only",
    "no live retrieval",
    "no memory writeback",
    "no issue or comment body read",
    "no raw trajectory or raw tool-output ingest",
)
WRITEBACK_CONTRACT_PHRASES = (
    "session_runtime_controlled_writeback_v0",
    "dry_run",
    "idempotency_key",
    "fails closed",
    "never changes the LoopX decision",
)
EXPECTED_GATE_STATES = {
    "live_openviking_retrieval": "future_gated",
    "memory_writeback": "future_gated",
    "issue_body_read": "blocked_without_authority",
    "comment_body_read": "blocked_without_authority",
    "raw_tool_output_ingest": "blocked_without_authority",
}

# The compact inputs the fixture's adapter is built from: ids, refs and short summaries.
COMPACT_INPUTS: dict[str, Any] = {
    "goal_id": "loopx-meta",
    "generated_at": "2026-01-01T00:00:00Z",
    "issue": {
        "provider": "github",
        "repo": "OpenViking/Viking",
        "issue_number": 2792,
        "title_summary": "public issue-fix goal: preview session memory for one retrieval bug",
    },
    "sessions": [
        {
            "session_id": "sess_public_2792_a",
            "runtime_id": "codex_app_server",
            "latest_event_ref": "evt_public_0007",
            "todo_id": "todo_public_2792_repro",
            "outcome_id": "out_public_0003",
            "run_id": "run_public_0011",
            "updated_at": "2026-01-01T00:00:00Z",
        },
        {
            "session_id": "sess_public_2792_b",
            "runtime_id": "codex_app_server",
            "latest_event_ref": "evt_public_0012",
            "todo_id": "todo_public_2792_fix",
            "run_id": "run_public_0012",
            "updated_at": "2026-01-01T01:00:00Z",
        },
    ],
    "memory": {
        "namespace": "openviking_issue_fix_public_preview",
        "retrieval_mode": "preview_only",
        "query_summary": "prior public fixes and validated outcomes on the same retrieval path",
        "top_k_preview": 3,
        "candidate_refs": [
            {
                "memory_ref_id": "mem_prior_issue_2791",
                "source_kind": "prior_issue",
                "score_bucket": "high",
                "summary": "an earlier public issue fixed a similar retrieval ordering bug",
            },
            {
                "memory_ref_id": "mem_session_outcome_0003",
                "source_kind": "session_outcome",
                "score_bucket": "medium",
                "summary": "the first session reproduced the bug with a public test case",
            },
            {
                "memory_ref_id": "mem_validation_summary_0001",
                "source_kind": "validation_summary",
                "score_bucket": "low",
                "summary": "a public smoke check already covers retrieval ordering",
            },
        ],
    },
    "status": {
        "waiting_on": "agent",
        "user_action_required": False,
        "agent_can_continue": True,
        "first_agent_todo": "write a failing public test for the retrieval ordering bug",
        "gate_state": "clear",
        "quota_state": "eligible",
        "memory_state": "preview_only",
    },
    "evidence": {
        "validation_refs": [
            {"kind": "smoke", "id": "openviking-session-memory-adapter-smoke"},
            {"kind": "check", "id": "chk_public_2792_repro"},
        ],
        "public_safe_summary": (
            "compact issue, session and memory refs only; bodies, trajectories and tool "
            "results stay with their owners"
        ),
    },
}
# Raw material a careless caller might pass: it must never reach the adapter.
RAW_CANARIES: dict[str, dict[str, str]] = {
    "issue": {"body": "CANARY-issue-body-4c1e", "comment_bodies": "CANARY-comments-77aa"},
    "memory": {"raw_memory": "CANARY-raw-memory-19d0", "api_key": "CANARY-api-key-5b2f"},
    "status": {"transcript": "CANARY-transcript-e3a8"},
    "evidence": {"tool_output": "CANARY-tool-output-0f6c", "log_path": "CANARY-log-path-8d41"},
}


class Smoke:
    def __init__(self, fixture_path: Path) -> None:
        self.fixture_path = fixture_path
        self.fixture_text = ""
        self.item: dict[str, Any] = {}
        self.adapter: dict[str, Any] = {}

    def load_fixture(self) -> None:
        try:
            self.fixture_text = self.fixture_path.read_text(encoding="utf-8")
            payload = json.loads(self.fixture_text)
            self.item = payload["attention_queue"]["items"][0]
            self.adapter = self.item[OPENVIKING_ADAPTER_ITEM_KEY]
        except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
            raise SmokeFailure(f"cannot read the fixture's first attention item: {error}") from None
        check(isinstance(self.adapter, dict), "the adapter is not an object")

    def validator_accepts_fixture(self) -> None:
        problems = validate_openviking_session_memory_adapter(self.adapter)
        check(not problems, "validator rejected the fixture: " + "; ".join(problems))

    def attention_item(self) -> None:
        expect(self.item.get("goal_id"), "loopx-meta", "item goal_id")
        expect(self.item.get("waiting_on"), "codex", "item waiting_on")
        expect(self.item.get("severity"), "action", "item severity")
        expect(self.adapter.get("goal_id"), self.item.get("goal_id"), "adapter goal_id")
        # The adapter speaks the projection's vocabulary; the queue speaks status words.
        status_word = session_runtime_status_waiting_on(
            self.adapter["status_projection"]["waiting_on"]
        )
        expect(status_word, self.item.get("waiting_on"), "status mapping of waiting_on")

    def contract_constraints(self) -> None:
        a = self.adapter
        expect(a["schema_version"], OPENVIKING_SESSION_MEMORY_ADAPTER_SCHEMA_VERSION, "schema")
        expect(a["mode"], OPENVIKING_ADAPTER_MODE, "mode")
        expect(a["specializes"], OPENVIKING_ADAPTER_SPECIALIZES, "specializes")

        issue = a["issue_projection"]
        expect(issue["provider"], "github", "issue provider")
        expect(issue["repo"], "OpenViking/Viking", "issue repo")
        expect(issue["issue_number"], 2792, "issue number")
        check(type(issue["issue_number"]) is int, "issue_number is not an int")
        check(bool(issue["issue_ref_id"]), "issue_ref_id is empty")
        for flag in ("issue_body_copied", "comment_bodies_copied", "provider_payload_copied"):
            check(issue[flag] is False, f"issue_projection.{flag} is not false")

        session = a["session_projection"]
        check(bool(session["runtime_id"]), "session runtime_id is empty")
        check(bool(session["session_refs"]), "no session refs")
        check(bool(session["linked_todo_ids"]), "no linked todo ids")
        for flag in ("raw_trajectory_copied", "raw_transcripts_copied", "raw_tool_outputs_copied"):
            check(session[flag] is False, f"session_projection.{flag} is not false")

        memory = a["memory_projection"]
        expect(memory["namespace"], "openviking_issue_fix_public_preview", "namespace")
        check(memory["retrieval_mode"] in RETRIEVAL_MODES, "unknown retrieval_mode")
        check(memory["live_retrieval_performed"] is False, "live retrieval performed")
        check(memory["writeback_performed"] is False, "memory writeback performed")
        top_k = memory["top_k_preview"]
        check(type(top_k) is int and top_k > 0, "top_k_preview is not a positive int")
        candidates = memory["candidate_refs"]
        check(len(candidates) >= 2, "fewer than two candidate refs")
        for candidate in candidates:
            check(candidate["memory_ref_id"].startswith("mem_"), "memory_ref_id without mem_")
            check(candidate["source_kind"] in SOURCE_KINDS, "unknown source_kind")
            check(candidate["score_bucket"] in SCORE_BUCKETS, "unknown score_bucket")
            check(bool(candidate["summary"]), "empty candidate summary")
            check(candidate["raw_memory_copied"] is False, "raw memory copied")

        gates = {gate["capability"]: gate for gate in a["retrieval_gates"]}
        expect(sorted(gates), sorted(RETRIEVAL_CAPABILITIES), "retrieval gate capabilities")
        for capability, state in EXPECTED_GATE_STATES.items():
            expect(gates[capability]["state"], state, f"{capability} gate state")
            check(bool(gates[capability]["required_authority"]), f"{capability}: no authority")
            check(bool(gates[capability]["blocks"]), f"{capability}: no blocks text")
        expect(sorted(a["future_gates"]), sorted(FUTURE_GATE_CAPABILITIES), "future gates")

        status = a["status_projection"]
        expect(status["waiting_on"], "agent", "status waiting_on")
        expect(status["user_action_required"], False, "user_action_required")
        expect(status["agent_can_continue"], True, "agent_can_continue")
        expect(status["memory_state"], "preview_only", "memory_state")
        check(status["memory_state"] in MEMORY_STATES, "unknown memory_state")

        evidence = a["evidence_projection"]
        check(bool(evidence["source_refs"]), "no evidence source refs")
        check(bool(evidence["validation_refs"]), "no evidence validation refs")
        for flag in (
            "raw_trajectories_copied",
            "comment_bodies_copied",
            "raw_tool_outputs_copied",
            "credentials_copied",
            "private_paths_copied",
        ):
            check(evidence[flag] is False, f"evidence_projection.{flag} is not false")

        truth = a["truth_contract"]
        expect(sorted(truth["source_of_truth"]), sorted(SOURCE_OF_TRUTH), "source_of_truth")
        for flag in (
            "adapter_is_writable",
            "live_retrieval_allowed",
            "memory_writeback_allowed",
            "issue_body_read_allowed",
            "comment_body_read_allowed",
            "tool_output_ingest_allowed",
        ):
            check(truth[flag] is False, f"truth_contract.{flag} is not false")

    def builder_rebuilds_fixture(self) -> None:
        rebuilt = build_openviking_session_memory_adapter(**copy.deepcopy(COMPACT_INPUTS))
        problems = validate_openviking_session_memory_adapter(rebuilt)
        check(not problems, "validator rejected the built adapter: " + "; ".join(problems))
        check(rebuilt == self.adapter, "the fixture drifted from what the builder produces")

    def builder_drops_raw_keys(self) -> None:
        inputs = copy.deepcopy(COMPACT_INPUTS)
        for section, raw in RAW_CANARIES.items():
            inputs[section].update(raw)
        built = build_openviking_session_memory_adapter(**inputs)
        problems = validate_openviking_session_memory_adapter(built)
        check(not problems, "validator rejected an adapter built from raw input")
        text = json.dumps(built)
        leaked = [v for raw in RAW_CANARIES.values() for v in raw.values() if v in text]
        check(not leaked, f"raw input values reached the adapter: {leaked}")
        status = built["status_projection"]
        expect(status["agent_can_continue"], False, "agent_can_continue with raw input")
        expect(status["waiting_on"], "agent", "waiting_on with raw input (unchanged)")

    def public_safe_texts(self) -> None:
        texts = {"fixture": self.fixture_text}
        for path in (CONTRACT_PATH, WRITEBACK_CONTRACT_PATH):
            try:
                texts[path.name] = path.read_text(encoding="utf-8")
            except OSError as error:
                raise SmokeFailure(f"cannot read {path.name}: {error}") from None
        for label, text in texts.items():
            for code, pattern in PRIVATE_VALUE_PATTERNS:
                check(not pattern.search(text), f"{label} matches a {code} pattern")
        leaked = [s for s in FORBIDDEN_SAMPLE_STRINGS if s in self.fixture_text]
        check(not leaked, f"fixture contains forbidden sample strings: {leaked}")
        # Phrases may wrap across lines in Markdown, so compare with whitespace collapsed.
        for path, phrases in (
            (CONTRACT_PATH, CONTRACT_PHRASES),
            (WRITEBACK_CONTRACT_PATH, WRITEBACK_CONTRACT_PHRASES),
        ):
            flat = " ".join(texts[path.name].split())
            missing = [p for p in phrases if p not in flat]
            check(not missing, f"{path.name} misses required phrases: {missing}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fixture", type=Path, default=FIXTURE_PATH, help="fixture to check")
    args = parser.parse_args(argv)
    smoke = Smoke(args.fixture)
    steps: tuple[tuple[str, Callable[[], None]], ...] = (
        ("load fixture", smoke.load_fixture),
        ("validator accepts fixture", smoke.validator_accepts_fixture),
        ("attention item", smoke.attention_item),
        ("contract constraints", smoke.contract_constraints),
        ("builder rebuilds fixture", smoke.builder_rebuilds_fixture),
        ("builder drops raw keys", smoke.builder_drops_raw_keys),
        ("public-safe texts", smoke.public_safe_texts),
    )
    for name, step in steps:
        try:
            step()
        except SmokeFailure as failure:
            print(
                f"openviking-session-memory-adapter-smoke: FAILED [{name}] {failure}",
                file=sys.stderr,
            )
            return 1
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            # A malformed fixture must fail the smoke with a message, not a traceback.
            print(
                f"openviking-session-memory-adapter-smoke: FAILED [{name}] "
                f"{type(error).__name__}: {error}",
                file=sys.stderr,
            )
            return 1
    print(OK_LINE)
    return 0


if __name__ == "__main__":
    sys.exit(main())

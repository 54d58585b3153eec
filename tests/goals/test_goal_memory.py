"""A goal's OpenViking memory input: set through `goal memory`, shown as the attention row's
`memory` in `status --json` and `/status.json`, refused when raw, and its own output accepted."""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from loopx_chat.cli import main
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.service.app import ServiceApp
from loopx_chat.service.server import LoopbackServer
from tests.helpers.real_codex import make_controller

SECRET = "s" * 43  # a stand-in owner secret: this test is about the memory, not access

MEMORY_INPUT = {
    "issue": {"repo": "OpenViking/Viking", "issue_number": 2792, "title_summary": "a crash"},
    "memory": {
        "namespace": "openviking_issue_fix_public_preview",
        "query_summary": "similar crash fixes",
        "candidate_refs": [
            {
                "memory_ref_id": "mem_one",
                "source_kind": "prior_issue",
                "score_bucket": "high",
                "summary": "a prior public fix",
            },
            {
                "memory_ref_id": "mem_two",
                "source_kind": "chat",
                "score_bucket": "medium",
                "summary": "see /Users/alice/private/notes.txt",
            },
        ],
    },
}


def cli(state: Path, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["--state-dir", str(state), *args], input=stdin)


def known_goal(state: Path, goal_id: str) -> None:
    GoalLedger(GateStore(state)).set_goal_state(
        goal_id, {"objective": "fix the crash", "acceptance": ["the smoke passes"]}
    )


def row(state: Path, goal_id: str) -> dict[str, Any]:
    result = cli(state, "status", "--json")
    assert result.exit_code == 0, result.output
    queue = json.loads(result.stdout)["attention_queue"]
    return next(r for r in queue if r["goal_id"] == goal_id)


def test_memory_input_shows_as_the_rows_memory_and_clears(tmp_path: Path) -> None:
    state = tmp_path / "state"
    known_goal(state, "g-mem")
    assert "memory" not in row(state, "g-mem")  # none set: no field at all
    done = cli(state, "goal", "memory", "g-mem", "--input", "-", stdin=json.dumps(MEMORY_INPUT))
    assert done.exit_code == 0, done.output
    memory = row(state, "g-mem")["memory"]
    assert memory["schema_version"] == "openviking_session_memory_adapter_v0"
    assert memory["issue_ref_id"] == "github:OpenViking/Viking#2792"
    assert memory["namespace"] == "openviking_issue_fix_public_preview"
    assert memory["memory_state"] == "preview_only"
    assert memory["live_retrieval_performed"] is False and memory["writeback_performed"] is False
    refs = {c["memory_ref_id"]: c for c in memory["candidate_refs"]}
    assert refs["mem_one"]["summary"] == "a prior public fix"
    assert refs["mem_two"]["summary"] != MEMORY_INPUT["memory"]["candidate_refs"][1]["summary"]
    folder = state / "goals" / "g-mem"
    assert "/Users/alice" not in (folder / "openviking_memory.jsonl").read_text()
    assert "/Users/alice" not in json.dumps(memory)
    shown = cli(state, "goal", "memory", "g-mem", "--json")
    assert json.loads(shown.stdout)["memory"] == memory

    cleared = cli(state, "goal", "memory", "g-mem", "--clear")
    assert cleared.exit_code == 0, cleared.output
    assert "memory" not in row(state, "g-mem")
    history = (folder / "openviking_memory.jsonl").read_text().splitlines()
    assert len(history) == 2  # the earlier input is kept as history


def test_its_own_stored_output_is_accepted_as_input(tmp_path: Path) -> None:
    """The stored record is the adapter's own sections, with `raw_memory_copied: false` on
    every candidate: given back, it is input, not raw material."""
    state = tmp_path / "state"
    known_goal(state, "g-own")
    first = cli(state, "goal", "memory", "g-own", "--input", "-", stdin=json.dumps(MEMORY_INPUT))
    assert first.exit_code == 0 and "2 refs" in first.output
    record = json.loads(
        (state / "goals" / "g-own" / "openviking_memory.jsonl").read_text().splitlines()[-1]
    )
    assert record["memory"]["candidate_refs"][0]["raw_memory_copied"] is False
    own = {"issue": record["issue"], "memory": record["memory"]}
    again = cli(state, "goal", "memory", "g-own", "--input", "-", "--json", stdin=json.dumps(own))
    assert again.exit_code == 0, again.output
    entry = json.loads(again.stdout)["memory_input"]
    assert (entry["issue"], entry["memory"]) == (record["issue"], record["memory"])


def test_raw_or_claimed_or_unknown_input_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    known_goal(state, "g-raw")
    path = state / "goals" / "g-raw" / "openviking_memory.jsonl"
    nested_raw = json.loads(json.dumps(MEMORY_INPUT))
    nested_raw["memory"]["candidate_refs"][0]["transcript"] = "CANARY-raw-9d1"
    claimed = json.loads(json.dumps(MEMORY_INPUT))
    claimed["memory"]["live_retrieval_performed"] = True
    no_issue = {"issue": {}, "memory": MEMORY_INPUT["memory"]}
    cases = [
        (nested_raw, "raw_material_refused"),
        (claimed, "raw_material_refused"),
        (no_issue, "input_invalid"),
        ({"memory": MEMORY_INPUT["memory"]}, "input_invalid"),
        ([1, 2], "input_invalid"),
    ]
    for doc, code in cases:
        result = cli(
            state, "goal", "memory", "g-raw", "--input", "-", "--json", stdin=json.dumps(doc)
        )
        assert result.exit_code != 0
        out = json.loads(result.stdout)
        assert out["error_code"] == code, out
        assert "CANARY" not in result.output
        assert not path.exists()
    unknown = cli(
        state, "goal", "memory", "g-none", "--input", "-", "--json", stdin=json.dumps(MEMORY_INPUT)
    )
    assert json.loads(unknown.stdout)["error_code"] == "goal_not_found"
    assert not (state / "goals" / "g-none").exists()


def test_status_json_over_http_carries_the_memory(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    known_goal(state, "g-http")
    assert (
        cli(
            state, "goal", "memory", "g-http", "--input", "-", stdin=json.dumps(MEMORY_INPUT)
        ).exit_code
        == 0
    )
    controller = make_controller(state, bound_home, base_env, codex_bin)
    server = LoopbackServer(
        "127.0.0.1",
        0,
        lambda port: ServiceApp(
            controller, GateStore(state), port=port, work_dir=tmp_path, secret=SECRET
        ),
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request(
            "GET",
            "/status.json",
            headers={"Host": f"127.0.0.1:{server.port}", "Authorization": f"Bearer {SECRET}"},
        )
        doc = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        server.shutdown()
        controller.close()
        server.server_close()
        thread.join(timeout=10)
    served = next(r for r in doc["attention_queue"] if r["goal_id"] == "g-http")
    assert served["memory"] == row(state, "g-http")["memory"]
    assert served["memory"]["candidate_refs"][0]["memory_ref_id"] == "mem_one"

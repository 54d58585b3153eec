"""Raw material on a goal's record files: found by key name at any depth, named by path,
never by value; flags that carry nothing are not material."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.raw_audit import MAX_FOUND, raw_key_paths


def test_a_raw_key_is_found_at_any_depth_and_named_by_its_path() -> None:
    records = [
        {"gate_id": "g1", "status": "pending"},
        {"host": {"facts": [{"program": "npm", "stdout": "CANARY output"}]}},
        {"nested": {"api_key": "CANARY-sk"}},
    ]
    found = raw_key_paths(records)
    assert found == ["host.facts[].stdout", "nested.api_key"]
    assert "CANARY" not in json.dumps(found)


def test_a_flag_that_carries_nothing_is_not_material() -> None:
    # The host gate's `secret` says whether a question was secret; the OpenViking contract
    # promises `raw_memory_copied: false`. Neither carries what its name names.
    records = [{"host": {"secret": True}}, {"raw_memory_copied": False, "transcript": ""}]
    assert raw_key_paths(records) == []
    assert raw_key_paths([{"transcript": "words"}]) == ["transcript"]


@settings(max_examples=60, deadline=None)
@given(count=st.integers(min_value=0, max_value=12))
def test_it_stops_at_enough_to_name_what_to_fix(count: int) -> None:
    records = [{f"k{i}": {"transcript": "x"}} for i in range(count)]
    assert len(raw_key_paths(records)) == min(count, MAX_FOUND)


def test_the_ledger_reads_every_record_file_of_the_goal_and_skips_one_that_does_not_parse(
    tmp_path: Path,
) -> None:
    goals = GateStore(tmp_path)
    ledger = GoalLedger(goals)
    goals.request_gate("g", "Ship it?")
    assert ledger.raw_material("g") == []
    folder = goals.goal_dir("g")
    (folder / "rewards.jsonl").write_text('{"label": "good", "session_log": "CANARY"}\n')
    (folder / "runs.jsonl").write_text("not json\n")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert ledger.raw_material("g") == ["rewards.jsonl: session_log"]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert ledger.raw_material("unknown-goal") == []

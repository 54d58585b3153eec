"""Nothing vanishes: an unreadable session stays on the goal the control log names it with
(a problem in words and a fail-closed owner gate), one no goal claims is listed on its own,
and a goal none of whose records can be read still has a fail-closed public contract."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.goals.contract_view import collect_contracts
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.status import collect_status
from loopx_chat.goals.unreadable import WHAT_TO_DO, Unreadable, attribute
from loopx_chat.service.page import render_first_screen
from loopx_chat.session_runtime._text import LOCAL_PATH_PATTERNS
from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore, StoreProblem

HOME = "/h"


def _session(root: Path, sid: str, goal: str, *, opened: bool = True) -> None:
    SessionStore(root).create(
        SessionRecord(session_id=sid, goal_id=goal, created_at="t", updated_at="t", codex_home=HOME)
    )
    if opened:  # what `chat new --goal` records when the session opens
        GateStore(root).control.record(
            "session_opened", goal_id=goal, session_id=sid, open_gate_ids=[], shown_gate_ids=[]
        )


def _tear(root: Path, sid: str) -> None:
    path = root / "sessions" / sid / "session.json"
    path.write_bytes(path.read_bytes()[:20])


def _status(root: Path) -> dict[str, Any]:
    return collect_status(SessionStore(root), GateStore(root), HOME)


def test_the_control_log_names_the_goal_of_an_unreadable_session(tmp_path: Path) -> None:
    GateStore(tmp_path).control.record(
        "session_opened", goal_id="g1", session_id="s1", open_gate_ids=[], shown_gate_ids=[]
    )
    problems = [StoreProblem("s1", "state_corrupt", "x"), StoreProblem("s2", "state_corrupt", "y")]
    found = attribute(problems, GateStore(tmp_path))
    assert [r.session_id for r in found.by_goal["g1"]] == ["s1"]
    assert [r.session_id for r in found.unattributed] == ["s2"]


def test_an_unreadable_control_log_leaves_every_record_unattributed(tmp_path: Path) -> None:
    log = tmp_path / "events" / "control.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"not json\n")
    found = attribute([StoreProblem("s1", "state_corrupt", "x")], GateStore(tmp_path))
    assert found.by_goal == {} and [r.session_id for r in found.unattributed] == ["s1"]


def test_a_goal_keeps_its_own_gate_and_shows_its_unreadable_session(tmp_path: Path) -> None:
    _session(tmp_path, "s-good", "g")
    _session(tmp_path, "s-torn", "g")
    GateStore(tmp_path).request_gate("g", "Merge now?", actor="owner")
    _tear(tmp_path, "s-torn")
    (row,) = _status(tmp_path)["attention_queue"]
    assert row["goal_id"] == "g" and row["severity"] == "high"
    (problem,) = row["problems"]
    assert (problem["session_id"], problem["error_code"]) == ("s-torn", "state_corrupt")
    first = row["projection"]["first_screen"]
    # The person's own gate stays the question; the unreadable record holds the agent too.
    assert first["first_user_todo"] == "Merge now?"
    assert first["agent_can_continue"] is False
    assert row["quota"]["reason_code"] == "open_blocking_gate"  # the person's gate comes first
    assert row["shown_blocker_refs"] and "unreadable-s-torn" not in row["shown_blocker_refs"]


def test_a_goal_known_only_through_its_unreadable_session_is_still_listed(
    tmp_path: Path,
) -> None:
    _session(tmp_path, "s-only", "lonely")
    _tear(tmp_path, "s-only")
    (row,) = _status(tmp_path)["attention_queue"]
    assert row["goal_id"] == "lonely"
    assert row["waiting_on"] == "user_or_controller"
    assert "s-only cannot be read (state_corrupt)" in row["answers"]["gate_or_evidence_required"]
    # The scheduler hint says why in its own words: no automatic turn while it is unreadable.
    assert (row["quota"]["decision"], row["quota"]["reason_code"]) == (
        "blocked",
        "record_unreadable",
    )
    assert row["answers"]["agent_can_continue"].startswith("no: session s-only cannot be read")
    for extra in ([], ["--contract"]):
        one = CliRunner().invoke(
            main,
            ["--state-dir", str(tmp_path), "status", "--goal", "lonely", *extra, "--json"],
            env={"LOOPX_CHAT_CODEX_HOME": HOME},
        )
        assert one.exit_code == 0, one.output  # never goal_not_found
        doc = json.loads(one.stdout)
        assert [g["goal_id"] for g in doc.get("attention_queue", doc.get("contracts"))] == [
            "lonely"
        ]


def test_a_record_no_goal_claims_is_listed_in_every_view(tmp_path: Path) -> None:
    _session(tmp_path, "s-orphan", "g", opened=False)
    _tear(tmp_path, "s-orphan")
    doc = _status(tmp_path)
    assert doc["attention_queue"] == []
    (record,) = doc["unreadable_records"]
    assert record["session_id"] == "s-orphan" and record["what_to_do"]
    text = CliRunner().invoke(
        main, ["--state-dir", str(tmp_path), "status"], env={"LOOPX_CHAT_CODEX_HOME": HOME}
    )
    assert text.exit_code == 0, text.output
    assert "UNREADABLE session s-orphan cannot be read (state_corrupt)" in text.stdout
    assert WHAT_TO_DO["state_corrupt"] in text.stdout
    as_json = CliRunner().invoke(
        main,
        ["--state-dir", str(tmp_path), "status", "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": HOME},
    )
    assert json.loads(as_json.stdout)["unreadable_records"] == [record]
    page = render_first_screen(
        doc, {}, codex_home_source="env", csrf_token="t", generated_at="now"
    ).decode()
    assert "Records of no known goal" in page and "s-orphan" in page
    assert "What to do: its session.json is damaged" in page


def test_a_goal_whose_records_cannot_be_read_has_a_fail_closed_contract(tmp_path: Path) -> None:
    GateStore(tmp_path).request_gate("g", "Q?")
    (tmp_path / "goals" / "g" / "gates.jsonl").write_bytes(b"not json\n")
    (contract,) = collect_contracts(SessionStore(tmp_path), GateStore(tmp_path), HOME)
    assert contract["goal_id"] == "g"
    assert contract["session_facts"]["approval_state"] == "pending"
    assert contract["goal_projection"]["waiting_on"] == "user_or_controller"
    assert contract["goal_projection"]["agent_can_continue"] is False
    assert "cannot be read (state_corrupt)" in contract["goal_projection"]["first_user_todo"]
    assert str(tmp_path) not in json.dumps(contract)


@pytest.mark.parametrize("code", [*WHAT_TO_DO, "state_something_new"])
def test_each_problem_says_what_to_do_without_a_path_and_fits_the_first_screen(
    code: str,
) -> None:
    record = Unreadable("0123456789abcdef0123456789abcdef", code)
    question = record.gate("t")["question"]
    assert len(question) <= 180  # the projection's text limit: the advice is never cut
    assert record.what_to_do and record.what_to_do in question
    for pattern in LOCAL_PATH_PATTERNS:
        assert re.search(pattern, question) is None

"""Records that cannot be fooled: no goal created by a side record, rewards bound to a real
turn of the goal and replaced rather than counted twice, one writer per proposal decision,
and one text filter (the compact filter's patterns) for everything a person or agent writes."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.errors import LoopxChatError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.session_runtime._text import public_safe_text
from tests.helpers.goals import goal_with_turns


def run(root: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(root), *args, "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(root / "home")},
    )
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"
    }


@pytest.mark.parametrize(
    "args",
    [
        ["quota", "--goal", "ghost"],
        ["reward", "record", "--goal", "ghost", "--turn", "t1", "--label", "good",
         "--reason", "ok"],
        ["dream", "record", "--goal", "ghost", "--title", "t", "--rationale", "r",
         "--next-action", "n"],
        ["goal", "stop", "ghost"],
    ],
)  # fmt: skip
def test_side_records_never_create_a_goal(tmp_path: Path, args: list[str]) -> None:
    goal_with_turns(tmp_path, "real", "t1")
    before = files(tmp_path)
    assert run(tmp_path, *args, code=1)["error_code"] == "goal_not_found"
    assert files(tmp_path) == before
    assert not (tmp_path / "goals" / "ghost").exists()
    goals = run(tmp_path, "status")["attention_queue"]
    assert [g["goal_id"] for g in goals] == ["real"]


def test_reward_needs_a_turn_of_that_goal_and_replaces_the_earlier_one(tmp_path: Path) -> None:
    goal_with_turns(tmp_path, "g", "t1")
    goal_with_turns(tmp_path, "other", "t9")
    reward = ["reward", "record", "--goal", "g", "--label"]
    for turn in ("t9", "nope"):  # another goal's turn, or no turn at all
        doc = run(tmp_path, *reward, "good", "--reason", "ok", "--turn", turn, code=1)
        assert doc["error_code"] == "turn_not_found"
    first = run(tmp_path, *reward, "good", "--reason", "looked fine", "--turn", "t1")["reward"]
    second = run(tmp_path, *reward, "bad", "--reason", "broke later", "--turn", "t1")["reward"]
    assert second["replaces"] == first["reward_id"]
    row = run(tmp_path, "status", "--goal", "g")["attention_queue"][0]
    assert row["human_rewards"] == {"good": 0, "bad": 1, "mixed": 0}  # counted once
    listed = run(tmp_path, "reward", "list", "--goal", "g")["rewards"]
    assert [(r["label"], r["current"]) for r in listed] == [("good", False), ("bad", True)]


def _promote(args: tuple[str, str]) -> str:
    root, proposal_id = args
    try:
        _, packet = GoalLedger(GateStore(Path(root))).promote(
            "g", proposal_id, stop_condition="done"
        )
    except LoopxChatError as exc:
        return exc.error_code
    return packet.handoff_id


def test_eight_parallel_promotes_write_exactly_one_handoff(tmp_path: Path) -> None:
    records = GoalLedger(GateStore(tmp_path))
    proposal = records.record_proposal("g", title="t", rationale="r", next_action="do it")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(8) as pool:
        results = pool.map(_promote, [(str(tmp_path), proposal["proposal_id"])] * 8)
    winners = [r for r in results if r.startswith("handoff-")]
    assert len(winners) == 1, results
    assert sorted(set(results) - set(winners)) == ["proposal_already_closed"]
    assert [h.handoff_id for h in GateStore(tmp_path).handoffs("g")] == winners
    history = records.proposal("g", proposal["proposal_id"])["history"]
    assert [e["event"] for e in history] == ["recorded", "promoted"]


def test_dismiss_and_close_are_checked_under_the_lock(tmp_path: Path) -> None:
    run(tmp_path, "goal", "set", "g", "--objective", "o", "--acceptance", "a")
    ids = [
        run(tmp_path, "dream", "record", "--goal", "g", "--title", f"t{i}", "--rationale", "r",
            "--next-action", "n")["proposal"]["proposal_id"]
        for i in range(2)
    ]  # fmt: skip
    assert run(tmp_path, "dream", "close", ids[0], "--goal", "g")["proposal"]["status"] == "closed"
    again = run(tmp_path, "dream", "dismiss", ids[0], "--goal", "g", code=1)
    assert again["error_code"] == "proposal_already_closed"
    assert run(tmp_path, "dream", "dismiss", ids[1], "--goal", "g")["proposal"]["status"] == (
        "dismissed"
    )


SECRET = "key sk-proj" + "A1b2C3d4E5f6G7h8I9"
PATH = "see /Users/alice/notes.txt"


@pytest.mark.parametrize(
    "args",
    [
        ["gate", "request", "--goal", "g", "--question"],
        ["handoff", "record", "--goal", "g", "--stop-condition", "done", "--next-action"],
        ["goal", "set", "g", "--acceptance", "a", "--objective"],
        ["dream", "record", "--goal", "g", "--title", "t", "--rationale", "r", "--next-action"],
    ],
)  # fmt: skip
@pytest.mark.parametrize(("value", "klass"), [(SECRET, "secret"), (PATH, "local_path")])
def test_one_text_filter_for_every_record(
    tmp_path: Path, args: list[str], value: str, klass: str
) -> None:
    """A text the first screen's compact filter would drop is refused at the door, naming the
    pattern class (and never echoing the text)."""
    assert public_safe_text(value, 200) is None  # the compact filter drops it
    run(tmp_path, "goal", "set", "g", "--objective", "o", "--acceptance", "a")
    before = files(tmp_path)
    doc = run(tmp_path, *args, value, code=1)
    assert doc["error_code"] == "unsafe_text" and f"({klass})" in doc["error"]
    assert "sk-proj" not in doc["error"] and "/Users" not in doc["error"]
    assert files(tmp_path) == before


def test_control_characters_refused_on_input_and_escaped_on_output(tmp_path: Path) -> None:
    run(tmp_path, "goal", "set", "g", "--objective", "o", "--acceptance", "a")
    for bad in ("ring \x07 the bell", "red \x1b[31m text", "rtl \u202e evil", "nul \x00"):
        doc = run(tmp_path, "gate", "request", "--goal", "g", "--question", bad, code=1)
        assert doc["error_code"] == "unsafe_text" and "(control_character)" in doc["error"]
    # A record written by an older version (or by hand) still prints escaped, never raw.
    store = GateStore(tmp_path)
    with store.locked("g") as folder, (folder / "gates.jsonl").open("a") as fh:
        fh.write(json.dumps({
            "schema_version": "loopx_chat_gate_event_v1", "event": "requested",
            "gate_id": "gate-old", "goal_id": "g", "question": "old \x1b[2J wipe",
            "actor": "operator", "blocking": True, "at": "2026-01-01T00:00:00Z",
        }) + "\n")  # fmt: skip
    human = CliRunner().invoke(main, ["--state-dir", str(tmp_path), "gate", "list"])
    assert human.exit_code == 0 and "\x1b" not in human.output
    assert "old \\x1b[2J wipe" in human.output


def test_the_filter_matches_what_the_first_screen_keeps(tmp_path: Path) -> None:
    """Whatever a gate accepts, the compact projection shows unchanged: nothing accepted is
    silently dropped later."""
    for text in ("Merge PR 12?", "token budget at 80%", "path a/b/c ok", "sk-short"):
        run(tmp_path, "gate", "request", "--goal", "g", "--question", text)
        row = run(tmp_path, "status", "--goal", "g")["attention_queue"][0]
        assert row["projection"]["first_screen"]["first_user_todo"] == text
        gate_id = run(tmp_path, "gate", "list", "--goal", "g")["gates"][-1]["gate_id"]
        run(tmp_path, "gate", "resolve", gate_id, "--goal", "g", "--decision", "approve")

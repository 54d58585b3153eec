"""A committed record is never lost: full disk (a real tmpfs), short writes, failed fsyncs,
torn tails, and one corrupt goal among healthy ones."""

from __future__ import annotations

import errno
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from loopx_chat.cli import main
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.state import jsonl
from loopx_chat.state.jsonl import append_record, read_records
from loopx_chat.state.session_records import SessionRecord, TurnRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.conditions import free_bytes, small_tmpfs


def run(root: Path, *args: str) -> Result:
    return CliRunner().invoke(
        main,
        ["--state-dir", str(root), *args],
        env={"LOOPX_CHAT_CODEX_HOME": str(root.parent / "no-home")},
    )


def snapshot(root: Path) -> dict[str, bytes]:
    """Every record file (logs and their .torn companions) under the state dir."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and (p.suffix in (".jsonl", ".torn") or p.name == "session.json")
    }


COMMANDS: list[tuple[str, list[str], str]] = [
    ("reward", ["reward", "record", "--goal", "g1", "--turn", "t-1", "--label", "good",
                "--reason", "fine work"], "reward_id"),
    ("handoff", ["handoff", "record", "--goal", "g1", "--next-action", "write the tests",
                 "--stop-condition", "tests pass"], "handoff_id"),
    ("goal", ["goal", "set", "g1", "--objective", "ship the durable append",
              "--acceptance", "done"], "record_id"),
    ("gate", ["gate", "request", "--goal", "g1", "--question", "may it merge?"], "gate_id"),
]  # fmt: skip


def _id(doc: dict[str, Any], key: str) -> str:
    for value in doc.values():
        if isinstance(value, dict) and key in value:
            return str(value[key])
    return str(doc[key])


def test_full_disk_rounds_never_lose_a_committed_record(tmp_path: Path) -> None:
    rng = random.Random(16)
    with small_tmpfs(tmp_path / "disk", "192k") as disk:
        root = disk / "state"
        filler = disk / "filler"
        # The goal's session and the turn the rewards judge (a reward needs an existing turn).
        store = SessionStore(root)
        store.create(SessionRecord(session_id="s1", goal_id="g1", created_at="t", updated_at="t"))
        store.save_turn(
            TurnRecord(
                turn_id="t-1", session_id="s1", status="completed", created_at="t", updated_at="t"
            )
        )
        committed: dict[str, set[str]] = {name: set() for name, _, _ in COMMANDS}
        failures = 0
        for _round in range(50):
            filler.unlink(missing_ok=True)
            # Mostly a full or nearly full disk: an append fails when it needs a new page.
            leave = rng.choice([0, 0, 0, 0, 1, 2]) * 4096 + rng.randrange(0, 4096)
            with open(filler, "wb") as handle:
                handle.write(b"\0" * max(0, free_bytes(disk) - leave))
            name, args, key = rng.choice(COMMANDS)
            # Long records of varying size: an append to a nearly full last page crosses into
            # a page the disk does not have, which is where a short write happens.
            args = [a + " " + "y" * rng.randrange(150, 270) if " " in a else a for a in args]
            before = snapshot(root) if root.exists() else {}
            result = run(root, *args, "--json")
            assert "Traceback" not in result.output
            doc = json.loads(result.stdout)  # exactly one document, ok or not
            if doc["ok"]:
                assert result.exit_code == 0
                committed[name].add(_id(doc, key))
            else:
                failures += 1
                assert result.exit_code == 1
                assert doc["error_code"] == "state_unwritable", doc
                after = snapshot(root) if root.exists() else {}
                # A log the failed append created stays empty: no record, same as absent.
                assert {k: v for k, v in after.items() if k in before} == before
                assert all(after[k] == b"" for k in set(after) - set(before)), after
        assert failures >= 5, "the fill levels never filled the disk: the test proves nothing"
        assert sum(map(len, committed.values())) >= 5
        filler.unlink()
        status = run(root, "status", "--json")
        assert status.exit_code == 0, status.output
        assert json.loads(status.stdout)["goal_count"] == 1
        read = {
            "reward": {r["reward_id"] for r in json.loads(
                run(root, "reward", "list", "--goal", "g1", "--json").stdout)["rewards"]},
            "handoff": {h["handoff_id"] for h in json.loads(
                run(root, "handoff", "list", "--goal", "g1", "--json").stdout)["handoffs"]},
            "gate": {g["gate_id"] for g in json.loads(
                run(root, "gate", "list", "--goal", "g1", "--json").stdout)["gates"]},
            "goal": {h["record_id"] for h in json.loads(
                run(root, "goal", "show", "g1", "--history", "--json").stdout).get("history", [])},
        }  # fmt: skip
        for name, ids in committed.items():
            assert ids <= read[name], name


def test_gate_request_on_a_full_disk_is_state_unwritable(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        root = disk / "state"
        assert run(root, "gate", "request", "--goal", "g", "--question", "first?").exit_code == 0
        (disk / "filler").write_bytes(b"\0" * free_bytes(disk))
        before = snapshot(root)
        # Enough questions that one of them needs a new page the disk no longer has.
        codes = set()
        for n in range(40):
            result = run(
                root, "gate", "request", "--goal", "g", "--question", f"q {n} " + "x" * 200
            )
            assert "Traceback" not in result.output
            if result.exit_code:
                codes.add(result.output.split("]")[0])
                break
            before = snapshot(root)
        assert codes == {"error [state_unwritable"}
        assert snapshot(root) == before


def test_a_short_write_is_completed_and_a_failed_fsync_is_not_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    append_record(path, {"n": 1})
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    append_record(path, {"n": 2, "pad": "x" * 50})
    monkeypatch.undo()
    assert [r["n"] for r in read_records(path)] == [1, 2]
    before = path.read_bytes()

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(jsonl.os, "fsync", failing_fsync)
    with pytest.raises(Exception) as caught:
        append_record(path, {"n": 3})
    assert getattr(caught.value, "error_code", None) == "state_unwritable"
    assert "EIO" in str(caught.value)
    monkeypatch.undo()
    assert path.read_bytes() == before


def test_a_torn_tail_is_moved_aside_once_and_never_spreads(tmp_path: Path) -> None:
    root = tmp_path / "state"
    assert run(root, "gate", "request", "--goal", "g", "--question", "one?").exit_code == 0
    assert run(root, "gate", "request", "--goal", "other", "--question", "two?").exit_code == 0
    log = root / "goals" / "g" / "gates.jsonl"
    torn = b'{"schema_version":"loopx_chat_gate_ev'
    with open(log, "ab") as handle:
        handle.write(torn)
    # Readers skip the partial line.
    listed = run(root, "gate", "list", "--json")
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)["gates"]) == 2
    second = run(root, "gate", "request", "--goal", "g", "--question", "three?", "--json")
    assert second.exit_code == 0, second.output
    assert second.stderr.count("note:") == 1 and "gates.jsonl.torn" in second.stderr
    assert (root / "goals" / "g" / "gates.jsonl.torn").read_bytes() == torn + b"\n"
    assert log.read_bytes().endswith(b"\n") and torn not in log.read_bytes()
    third = run(root, "gate", "request", "--goal", "g", "--question", "four?", "--json")
    assert third.exit_code == 0 and "note:" not in third.stderr  # reported once
    assert len(GateStore(root).gates("g")) == 3
    status = run(root, "status", "--json")
    assert status.exit_code == 0, status.output


def test_a_corrupt_goal_is_a_problem_entry_while_others_render(tmp_path: Path) -> None:
    root = tmp_path / "state"
    for goal in ("good", "bad"):
        assert run(root, "gate", "request", "--goal", goal, "--question", "q?").exit_code == 0
    bad = root / "goals" / "bad" / "gates.jsonl"
    bad.write_bytes(bad.read_bytes() + b"not json at all\n")
    before = bad.read_bytes()
    status = run(root, "status", "--json")
    assert status.exit_code == 0, status.output
    queue = {g["goal_id"]: g for g in json.loads(status.stdout)["attention_queue"]}
    assert queue["bad"]["status"] == "problem"
    assert queue["bad"]["error_code"] == "state_corrupt"
    assert queue["good"]["status"] != "problem" and queue["good"]["answers"]["waiting_on"]
    human = run(root, "status")
    assert human.exit_code == 0 and "goal bad" in human.stdout and "goal good" in human.stdout
    gates = json.loads(run(root, "gate", "list", "--json").stdout)
    assert [g["goal_id"] for g in gates["gates"]] == ["good"]
    assert [p["goal_id"] for p in gates["problems"]] == ["bad"]
    assert bad.read_bytes() == before


def test_an_unexpected_exception_is_internal_error_with_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fault no real state can produce (a bug): monkeypatched in.
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("loopx_chat.cli.status_cmd.collect_status", broken)
    root = tmp_path / "state"
    as_json = run(root, "status", "--json")
    doc = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and doc["error_code"] == "internal_error"
    assert "RuntimeError: boom" in doc["error"] and "second line" not in doc["error"]
    log = root / "logs" / "internal-errors.log"
    assert str(log) in doc["error"] and "Traceback" in log.read_text()
    human = run(root, "status")
    assert human.exit_code == 1 and human.stderr.startswith("error [internal_error]: ")
    assert "Traceback" not in human.output
    assert oct(log.stat().st_mode & 0o777) == "0o600"

"""The incremental status (goals/status_index.py) against a full recomputation.

After every change of a random sequence (gate, goal_state, lifecycle, handoff, session,
turn and run records through the project's writers; appends and rewrites by another
process; a torn line; an unreadable line; a session.json truncated by another process and
written back whole; the control log naming a session's goal, or torn), the rows an index
kept across the sequence gives equal those of a fresh index and those the stores' own
readers give goal by goal (an unreadable session on the goal the control log names it
with, one no event names in `unreadable_records`), and so does a persisted index loaded
from disk as the CLI loads it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopx_chat.errors import StateError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_facts import facts_from_state, known_goal_ids
from loopx_chat.goals.goal_ledger import REWARD_SCHEMA, GoalLedger
from loopx_chat.goals.goal_runs import RUN_SCHEMA
from loopx_chat.goals.status import collect_status, goal_record_summary, waits_on_owner
from loopx_chat.goals.status_index import StatusIndex, index_path
from loopx_chat.goals.status_row import displayed_blocker_refs, goal_problem, goal_status
from loopx_chat.goals.unreadable import attribute, unreadable_fields, with_unreadable
from loopx_chat.state.jsonl import append_record
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.row_size import own_bytes

HOME = "/home/owner/.codex"
# The most one session's (key, row) pair in the index may hold on its own: its session.json's
# inode, size and mtime, its creation time (the goal's name is shared), measured 393.
SESSION_ROW_BYTES = 420
GOALS = ("a", "b", "c")


def reference_rows(store: SessionStore, goals: GateStore) -> list[dict[str, Any]]:
    """Each goal's row as the stores' readers give it, file by file, with no index: an
    unreadable session on the goal the control log names it with (goals/unreadable.py)."""
    listing = store.list()
    sessions = listing.sessions
    unreadable = attribute(listing.problems, goals).by_goal
    rows = []
    for g in sorted({*known_goal_ids(sessions, goals), *unreadable}):
        try:
            facts = facts_from_state(
                g, store=store, goals=goals, codex_home=HOME, all_sessions=sessions
            )
            facts = with_unreadable(facts, unreadable.get(g, ()))
            row = goal_status(facts)
            row.update(goal_record_summary(facts, GoalLedger(goals)))
            row.update(unreadable_fields(unreadable.get(g, ())))
        except StateError as exc:
            rows.append(goal_problem(g, exc))
            continue
        row["shown_blocker_refs"] = displayed_blocker_refs(
            facts, row["projection"].get("first_screen", {})
        )
        rows.append(row)
    return sorted(rows, key=lambda r: r["goal_id"])


def reference_unattributed(store: SessionStore, goals: GateStore) -> list[dict[str, str]]:
    """The unreadable sessions no event names with a goal, as the stores' readers say."""
    return [r.to_dict() for r in attribute(store.list().problems, goals).unattributed]


def rows_of(doc: dict[str, Any], *, archive: bool = True) -> str:
    rows = [*doc["attention_queue"], *doc["archive"].get("goals", ())]
    if not archive:  # the stores' readers know no archive
        rows = [{k: v for k, v in r.items() if k != "archived_because"} for r in rows]
    return json.dumps(sorted(rows, key=lambda r: r["goal_id"]), sort_keys=True)


def archived_rows(world: World, index: StatusIndex, doc: dict[str, Any]) -> list[dict]:  # type: ignore[type-arg]
    """The rows of the goals `doc` only counts in its archive."""
    shown = {r["goal_id"] for r in doc["attention_queue"]}
    rows = [e.row for g, e in index.entries.items() if g not in shown]
    assert len(rows) == doc["archive"]["count"]
    return rows


class World:
    """A state dir and the writers a test step drives."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = SessionStore(root)
        self.goals = GateStore(root)
        self.ledger = GoalLedger(self.goals)
        self.n = 0
        self.whole: dict[str, bytes] = {}  # a truncated session.json's bytes, to restore

    def tick(self) -> str:
        self.n += 1
        return f"2026-01-01T00:00:{self.n:02d}.000000Z"

    def folder(self, goal: str) -> Path:
        return self.root / "goals" / goal

    def apply(self, op: str, goal: str, k: int) -> None:
        sid = f"s-{goal}-{k % 2}"
        if op == "gate":
            self.goals.request_gate(goal, f"Approve step {k}?", blocking=k % 3 != 0)
        elif op == "resolve":
            pending = [g for g in self.goals.gates(goal) if g.status == "pending"]
            if pending:
                decision = "approve" if k % 2 else "reject"
                self.goals.resolve_gate(goal, pending[0].gate_id, decision, None)
        elif op == "goal_state":
            self.ledger.set_goal_state(
                goal,
                {"objective": f"Ship {k}", "acceptance": ["it ships"], "token_budget": 10 + k},
            )
        elif op == "stop":
            self.ledger.set_stopped(goal, k % 2 == 0)
        elif op == "handoff":
            self.goals.record_handoff(goal, f"do step {k}", "tests pass", ())
        elif op == "session":
            if not self._session(goal, sid, k):
                self.store.update(sid, status="busy" if k % 2 else "ready")
        elif op == "turn":
            # A turn record alone (no session write), as another process may leave it.
            self._session(goal, sid, k)
            at = self.tick()
            status = ("completed", "failed", "interrupted", "running")[k % 4]
            self.store.save_turn(
                TurnRecord(
                    turn_id=f"t{k}",
                    session_id=sid,
                    status=status,  # type: ignore[arg-type]
                    created_at=at,
                    updated_at=at,
                    completed_at=at if status != "running" else None,
                    error_code="turn_failed" if status == "failed" else None,
                    upstream_turn_id=f"u{k}",
                    tokens=TokenCounts(k, 1, k + 1),
                )
            )
        elif op == "run":
            self._run_event(goal, k)
        elif op == "foreign_append":
            # Another process appends a record with raw material, bypassing our writers.
            path = self.folder(goal) / "rewards.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(json.dumps({"schema_version": "x", "transcript": f"raw {k}"}) + "\n")
        elif op == "foreign_rewrite":
            # Another process rewrites the gate log (a new file renamed over it).
            path = self.folder(goal) / "gates.jsonl"
            if path.exists():
                lines = path.read_bytes().splitlines(keepends=True)
                tmp = path.with_name(".rewrite")
                tmp.write_bytes(b"".join(lines[: max(0, len(lines) - 1)]))
                os.replace(tmp, path)
        elif op == "torn":
            path = self.folder(goal) / "gates.jsonl"
            if path.exists():
                with open(path, "ab") as f:
                    f.write(b'{"schema_version":"loopx_chat_gate_event_v1","ev')
        elif op == "corrupt":
            path = self.folder(goal) / "handoffs.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(b"[1, 2]\n")
        elif op == "repair":
            (self.folder(goal) / "handoffs.jsonl").unlink(missing_ok=True)
        elif op == "truncate_session":
            # Another process leaves a session.json cut short: it can no longer say its goal.
            self._session(goal, sid, k)
            path = self.root / "sessions" / sid / "session.json"
            body = path.read_bytes()
            if sid not in self.whole:
                self.whole[sid] = body
            path.write_bytes(body[: 10 + k])
        elif op == "restore_session":
            whole = self.whole.pop(sid, None)
            if whole is not None:
                tmp = self.root / "sessions" / sid / ".restore"
                tmp.write_bytes(whole)
                os.replace(tmp, self.root / "sessions" / sid / "session.json")
        elif op == "orphan_session":
            # A session.json that cannot be read and that no event names (no goal claims it).
            folder = self.root / "sessions" / f"s-orphan-{k % 3}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "session.json").write_bytes(b'{"schema_version": "loop'[: 5 + k])
        elif op == "log_open":
            # The control log names the session with its goal (what `chat new --goal` does),
            # or with another goal: the log's last word wins.
            owner = goal if k % 4 else GOALS[(GOALS.index(goal) + 1) % len(GOALS)]
            self.goals.control.record(
                "session_opened", goal_id=owner, session_id=sid, open_gate_ids=[], shown_gate_ids=[]
            )
        elif op == "log_orphan":
            self.goals.control.record(
                "session_opened",
                goal_id=goal,
                session_id=f"s-orphan-{k % 3}",
                open_gate_ids=[],
                shown_gate_ids=[],
            )
        elif op == "log_torn":
            # The control log torn (a line cut short): nothing can be attributed until repaired.
            path = self.root / "events" / "control.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(b'{"schema_version":"x", "ki\n' if k % 2 else b'{"schema_ver')
        elif op == "log_repair":
            # The owner drops the control log's unreadable lines (a new file renamed over it).
            path = self.root / "events" / "control.jsonl"
            if path.exists():
                kept = []
                for line in path.read_bytes().splitlines(keepends=True):
                    with contextlib.suppress(ValueError):
                        if line.endswith(b"\n") and isinstance(json.loads(line), dict):
                            kept.append(line)
                tmp = path.with_name(".repair")
                tmp.write_bytes(b"".join(kept))
                os.replace(tmp, path)

    def _session(self, goal: str, sid: str, k: int) -> bool:
        """Create the session when it does not exist yet; whether it was created."""
        if (self.root / "sessions" / sid / "session.json").exists():
            return False
        self.store.create(
            SessionRecord(
                session_id=sid,
                goal_id=goal,
                created_at=self.tick(),
                updated_at=self.tick(),
                codex_home=HOME if k % 5 else "/elsewhere/.codex",
                upstream_thread_id=f"thread-{sid}",
            )
        )
        return True

    def _run_event(self, goal: str, k: int) -> None:
        path = self.folder(goal) / "runs.jsonl"
        base = {"schema_version": RUN_SCHEMA, "goal_id": goal, "run_id": "run-1", "at": self.tick()}
        step = k % 4
        if step == 0 or not path.exists():
            event = {
                **base,
                "event": "run_authorized",
                "session_id": f"s-{goal}-0",
                "actor": "owner-cli",
                "surface": "cli",
                "token_budget": 100,
                "objective_source": "goal_state",
                "objective_source_id": "x",
            }
        elif step == 1:
            event = {**base, "event": "ended", "host_status": "complete", "by": "codex"}
        elif step == 2:
            event = {**base, "event": "accepted"}
        else:
            event = {**base, "event": "host_loop_seen", "session_id": "s", "thread_id": "t"}
        append_record(path, event)


OPS = st.sampled_from(
    [
        "gate",
        "resolve",
        "goal_state",
        "stop",
        "handoff",
        "session",
        "turn",
        "run",
        "foreign_append",
        "foreign_rewrite",
        "torn",
        "corrupt",
        "repair",
        "truncate_session",
        "restore_session",
        "orphan_session",
        "log_open",
        "log_orphan",
        "log_torn",
        "log_repair",
    ]
)
STEPS = st.lists(st.tuples(OPS, st.sampled_from(GOALS), st.integers(0, 11)), max_size=14)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_incremental_status_equals_a_full_recomputation(steps: list[tuple[str, str, int]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="loopx-index-"))
    try:
        world = World(root)
        kept = StatusIndex(world.store, world.goals, HOME)
        now = time.time_ns()
        for op, goal, k in steps:
            # A writer may refuse (an unreadable log takes no record): the state stays as it is.
            with contextlib.suppress(StateError):
                world.apply(op, goal, k)
            incremental = collect_status(
                world.store, world.goals, HOME, index=kept, include_archived=True, now_ns=now
            )
            fresh = collect_status(
                world.store, world.goals, HOME, include_archived=True, now_ns=now
            )
            persisted = StatusIndex(world.store, world.goals, HOME, path=index_path(root))
            from_disk = collect_status(
                world.store,
                world.goals,
                HOME,
                index=persisted,
                include_archived=True,
                now_ns=now,
            )
            persisted.save()
            # Sixty days on, every goal is idle: only those that wait on nobody step aside.
            later = collect_status(
                world.store, world.goals, HOME, index=kept, now_ns=now + 60 * 86400 * 10**9
            )
            assert all(not waits_on_owner(r) for r in archived_rows(world, kept, later))
            assert not any(r.get("archived_because") for r in later["attention_queue"])
            expected = json.dumps(reference_rows(world.store, world.goals), sort_keys=True)
            assert rows_of(incremental) == rows_of(fresh) == rows_of(from_disk), (op, goal, k)
            assert rows_of(fresh, archive=False) == expected, (op, goal, k)
            unattributed = reference_unattributed(world.store, world.goals)
            assert incremental["unreadable_records"] == unattributed, (op, goal, k)
            assert fresh["unreadable_records"] == from_disk["unreadable_records"] == unattributed
    finally:
        shutil.rmtree(root)


def test_a_look_with_nothing_changed_folds_nothing_and_a_change_folds_its_goal(
    tmp_path: Path,
) -> None:
    goals = GateStore(tmp_path)
    for g in GOALS:
        goals.request_gate(g, "Q?")
    index = StatusIndex(SessionStore(tmp_path), goals, HOME)
    index.refresh()
    assert index.folded == 3
    generation = index.refresh()
    assert index.folded == 0 and index.generation == generation
    goals.request_gate("b", "Q2?")
    index.refresh()
    assert index.folded == 1 and index.generation == generation + 1


def test_the_persisted_index_is_private_checked_and_rebuilt_when_torn(tmp_path: Path) -> None:
    store, goals = SessionStore(tmp_path), GateStore(tmp_path)
    goals.request_gate("a", "Q?")
    path = index_path(tmp_path)
    first = StatusIndex(store, goals, HOME, path=path)
    first.refresh()
    first.save()
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    again = StatusIndex(store, goals, HOME, path=path)
    again.refresh()
    assert again.folded == 0  # unchanged goal: its row from the index
    # A row someone edited in the index is not trusted once the goal's files moved.
    data = json.loads(path.read_text())
    data["goals"]["a"]["row"]["severity"] = "made-up"
    path.write_text(json.dumps(data))
    goals.request_gate("a", "Q2?")
    checked = StatusIndex(store, goals, HOME, path=path)
    checked.refresh()
    assert checked.folded == 1 and checked.entries["a"].row["severity"] != "made-up"
    for broken in (path.read_bytes()[:50], b"\x00garbage", b"[]"):
        path.write_bytes(broken)
        rebuilt = StatusIndex(store, goals, HOME, path=path)
        rebuilt.refresh()
        assert rebuilt.folded == 1
        rebuilt.save()
        assert json.loads(path.read_text())["goals"]["a"]["row"]["goal_id"] == "a"
    other_home = StatusIndex(store, goals, "/another/home", path=path)
    other_home.refresh()
    assert other_home.folded == 1


def test_the_archive_never_hides_a_goal_that_waits_on_the_owner(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from loopx_chat.cli import main

    world = World(tmp_path)
    for goal in ("done", "asks", "idle", "stopped"):
        world.ledger.set_goal_state(goal, {"objective": "Ship", "acceptance": ["it ships"]})
    for goal in ("done", "asks"):
        for k in range(3):  # authorized, ended complete, accepted
            world._run_event(goal, k)
    world.goals.request_gate("asks", "Deploy now?")  # accepted, then a new question
    world.ledger.set_stopped("stopped", True)
    index = StatusIndex(world.store, world.goals, HOME)
    now = time.time_ns()
    today = collect_status(world.store, world.goals, HOME, index=index, now_ns=now)
    assert today["archive"] == {"count": 0}  # accepted just now: still on the first screen
    day = 86400 * 10**9
    tomorrow = collect_status(world.store, world.goals, HOME, index=index, now_ns=now + 2 * day)
    assert [r["goal_id"] for r in tomorrow["attention_queue"]] == ["asks", "stopped", "idle"]
    assert tomorrow["archive"] == {"count": 1}
    listed = collect_status(
        world.store, world.goals, HOME, index=index, now_ns=now + 2 * day, include_archived=True
    )
    assert [(r["goal_id"], r["archived_because"]) for r in listed["archive"]["goals"]] == [
        ("done", "accepted")
    ]
    later = collect_status(world.store, world.goals, HOME, index=index, now_ns=now + 60 * day)
    assert sorted(r["goal_id"] for r in later["attention_queue"]) == ["asks", "stopped"]
    assert all(waits_on_owner(r) for r in later["attention_queue"])
    assert later["archive"] == {"count": 2}
    # The CLI: the first screen counts them, `--all` lists them.
    env = {"LOOPX_CHAT_STATE_DIR": str(tmp_path), "LOOPX_CHAT_CODEX_HOME": str(tmp_path / "h")}
    (tmp_path / "h").mkdir()
    old = now - 40 * day
    for path in (tmp_path / "goals").rglob("*.jsonl"):
        os.utime(path, ns=(old, old))
    for path in (tmp_path / "goals" / "asks").glob("*.jsonl"):
        os.utime(path, ns=(now, now))
    runner = CliRunner()
    text = runner.invoke(main, ["status"], env=env)
    assert text.exit_code == 0, text.output
    assert "goal asks" in text.output and "goal stopped" in text.output
    assert "goal done" not in text.output and "goal idle" not in text.output
    assert "2 finished goal(s) archived: `loopx-chat status --all` lists them" in text.output
    every = runner.invoke(main, ["status", "--all", "--json"], env=env)
    doc = json.loads(every.output)
    assert sorted(r["goal_id"] for r in doc["archive"]["goals"]) == ["done", "idle"]
    assert (
        "goals"
        not in json.loads(runner.invoke(main, ["status", "--json"], env=env).output)["archive"]
    )


def test_the_raw_material_audit_reads_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import loopx_chat.goals.raw_audit as raw_audit

    world = World(tmp_path)
    world.ledger.set_goal_state("a", {"objective": "Ship", "acceptance": ["it ships"]})
    world.goals.request_gate("a", "Q?", blocking=False)
    with open(world.folder("a") / "rewards.jsonl", "a") as f:
        reward = {"schema_version": REWARD_SCHEMA, "run_ref": "t", "label": "good"}
        f.write(json.dumps({**reward, "api_key": "raw"}) + "\n")
    audited: list[int] = []
    real = raw_audit.raw_key_paths

    def counting(records: Any) -> list[str]:
        records = list(records)
        audited.append(len(records))
        return real(records)

    monkeypatch.setattr(raw_audit, "raw_key_paths", counting)
    index = StatusIndex(world.store, world.goals, HOME)
    index.refresh()
    assert sorted(audited) == [1, 1, 1]  # gates, goal_state, rewards
    assert index.entries["a"].row["quota"]["reason_code"] == "raw_material_detected"
    audited.clear()
    world.goals.request_gate("a", "Q2?", blocking=False)
    index.refresh()
    assert audited == [2]  # the gate log alone: two records now
    assert index.entries["a"].row["quota"]["reason_code"] == "raw_material_detected"


def test_an_unreadable_sessions_goal_is_folded_again_when_its_file_or_the_log_moves(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    world.apply("gate", "a", 1)
    world.apply("truncate_session", "b", 0)  # s-b-0: unreadable, no event names it yet
    index = StatusIndex(world.store, world.goals, HOME)
    doc = collect_status(world.store, world.goals, HOME, index=index)
    assert [r["session_id"] for r in doc["unreadable_records"]] == ["s-b-0"]
    assert [r["goal_id"] for r in doc["attention_queue"]] == ["a"]
    world.apply("log_open", "b", 2)  # the control log names s-b-0 with goal b
    doc = collect_status(world.store, world.goals, HOME, index=index)
    assert index.folded == 1 and doc["unreadable_records"] == []
    (row,) = [r for r in doc["attention_queue"] if r["goal_id"] == "b"]
    assert [p["session_id"] for p in row["problems"]] == ["s-b-0"]
    assert row["severity"] == "high" and waits_on_owner(row)
    first = row["projection"]["first_screen"]
    assert first["user_action_required"] and not first["agent_can_continue"]
    # A look with nothing changed folds nothing; the session cut shorter folds its goal.
    collect_status(world.store, world.goals, HOME, index=index)
    assert index.folded == 0
    world.apply("truncate_session", "b", 2)
    collect_status(world.store, world.goals, HOME, index=index)
    assert index.folded == 1
    # Another event in the log: the attributed goal is looked at again, alone.
    world.apply("gate", "a", 2)
    world.goals.control.record("handoff_recorded", goal_id="a", handoff_id="h")
    collect_status(world.store, world.goals, HOME, index=index)
    assert index.folded == 2  # a (its gate) and b (the log its attribution is read from)
    # The session written back whole: b is a readable goal again.
    world.apply("restore_session", "b", 0)
    doc = collect_status(world.store, world.goals, HOME, index=index)
    (row,) = [r for r in doc["attention_queue"] if r["goal_id"] == "b"]
    assert "problems" not in row
    assert rows_of(doc) == rows_of(collect_status(world.store, world.goals, HOME))


def test_status_goal_accepts_a_goal_known_only_through_a_broken_session(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.apply("truncate_session", "b", 0)
    world.apply("log_open", "b", 2)
    path = index_path(tmp_path)
    index = StatusIndex(world.store, world.goals, HOME, path=path)
    doc = collect_status(world.store, world.goals, HOME, "b", index=index)
    index.save()
    (row,) = doc["attention_queue"]
    assert row["goal_id"] == "b" and row["problems"][0]["error_code"] == "state_corrupt"
    again = StatusIndex(world.store, world.goals, HOME, path=path)
    assert collect_status(world.store, world.goals, HOME, "b", index=again)["attention_queue"] == [
        row
    ]
    assert again.folded == 0  # the persisted row, its signature unchanged


def test_what_the_index_keeps_does_not_grow_with_a_goals_sessions(tmp_path: Path) -> None:
    # Issue 37: a long-running service opens sessions on a goal for months. The goal's entry
    # keeps a digest of its files' stats, not the stats (a session.json and a turn file more
    # with each session), and each session's row is a few words.
    store = SessionStore(tmp_path)
    goals = GateStore(tmp_path)
    index = StatusIndex(store, goals, HOME)
    kept: dict[int, tuple[int, int]] = {}
    for n in range(1, 41):
        sid = f"session-{n:04d}-{'0' * 27}"
        at = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000000Z"
        store.create(
            SessionRecord(
                session_id=sid,
                goal_id="long",
                created_at=at,
                updated_at=at,
                upstream_thread_id=f"thread-{n:04d}-{'0' * 24}",
            )
        )
        with store.lock(sid):
            store.save_turn(
                TurnRecord(
                    turn_id=f"turn-{n:04d}-{'0' * 27}",
                    session_id=sid,
                    status="completed",  # type: ignore[arg-type]
                    created_at=at,
                    updated_at=at,
                    completed_at=at,
                    upstream_turn_id=f"u{n}",
                    tokens=TokenCounts(1, 1, 2),
                )
            )
        if n in (4, 40):
            index.refresh()
            rows = list(index._sessions.items())
            session_row = max(
                own_bytes(row, rows[:i] + rows[i + 1 :]) for i, row in enumerate(rows)
            )
            kept[n] = (own_bytes(index.entries["long"].signature), session_row)
    assert kept[40][0] == kept[4][0], kept  # before: 23,400 bytes at 40 sessions
    assert kept[40][1] <= SESSION_ROW_BYTES, kept  # before: 551 bytes a session

"""Every state-touching CLI command under every hostile condition of the state dir.

Conditions: a read-only dir (a read-only bind mount: root ignores mode bits), unreadable as
another user (run as `nobody`), the state path is a file, a symlinked folder, symlinked
files, FIFOs, a deeply nested file, a full disk (a real tmpfs). Each cell asserts the exit
code and the documented error code, exactly one JSON document on stdout, no traceback, and
that every file that existed before is byte-for-byte the same afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.state.session_records import SessionRecord, TurnRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.conditions import (
    as_nobody_prefix,
    free_bytes,
    nobody_runtime,
    read_only_bind,
    small_tmpfs,
)

READS: dict[str, list[str]] = {
    "sessions list": ["sessions", "list"],
    "sessions show": ["sessions", "show", "s1"],
    "status": ["status"],
    "gate list": ["gate", "list"],
    "gate list --goal": ["gate", "list", "--goal", "g"],
    "handoff list": ["handoff", "list", "--goal", "g"],
    "goal show": ["goal", "show", "g", "--history"],
    "goal list": ["goal", "list"],
    "reward list": ["reward", "list", "--goal", "g"],
    "dream list": ["dream", "list", "--goal", "g"],
    "metrics": ["metrics"],
}
WRITES: dict[str, list[str]] = {
    "gate request": ["gate", "request", "--goal", "g", "--question", "ok?"],
    "handoff record": [
        "handoff", "record", "--goal", "g", "--next-action", "go", "--stop-condition", "done",
    ],
    "goal set": ["goal", "set", "g", "--objective", "new objective", "--acceptance", "done"],
    "reward record": [
        "reward", "record", "--goal", "g", "--turn", "t1", "--label", "good", "--reason", "ok",
    ],
    "dream record": [
        "dream", "record", "--goal", "g", "--title", "t", "--rationale", "r", "--next-action", "n",
    ],
    "quota": ["quota", "--goal", "g"],
}  # fmt: skip
# Listings report an unreadable item as a problem entry and still succeed.
LISTINGS = {"sessions list", "status", "gate list", "goal list"}
# Reads only the control-event log, never a goal's or a session's files.
LOG_ONLY = {"metrics"}
# Writes that read the goal's records first (to fold them, or to refuse a bad log before
# appending to it): they fail as the read does. The others are bare appends.
# reward, dream and quota first check that the goal exists (and reward that its turn does).
READ_FIRST = {"gate request", "goal set", "dream record", "quota", "reward record"}
READ_BEFORE_LOCK = {"goal set", "quota", "reward record", "dream record"}
# `status` records which blockers it showed in the metrics log: it only ever grows.
GROWS = "events/control.jsonl"
# The documented caches `status` may (re)write: they hold no record (the status index holds
# each goal's status row, rebuilt from the records whenever they change).
CACHES = ("events/control.reported.json", "/host/rollouts-", "/index/status.json")
GOAL_FILES = ("gates", "handoffs", "goal_state", "rewards", "proposals")


def populate(root: Path) -> None:
    # The goal and its turn exist first: a reward judges an existing turn of the goal.
    store = SessionStore(root)
    store.create(SessionRecord(session_id="s1", goal_id="g", created_at="t", updated_at="t"))
    store.save_turn(
        TurnRecord(
            turn_id="t1", session_id="s1", status="completed", created_at="t", updated_at="t"
        )
    )
    for args in WRITES.values():
        result = CliRunner().invoke(main, ["--state-dir", str(root), *args, "--json"])
        assert result.exit_code == 0, result.output


def snapshot(*roots: Path) -> dict[str, bytes]:
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if p.is_file() and not p.is_symlink() and p.name != ".lock":
                out[str(p)] = p.read_bytes()
    return out


def run(
    root: Path,
    args: list[str],
    prefix: list[str] | None = None,
    runtime: tuple[list[str], dict[str, str]] | None = None,
) -> tuple[int, str, str]:
    env = {
        **os.environ,
        "LOOPX_CHAT_STATE_DIR": str(root),
        "LOOPX_CHAT_CODEX_HOME": str(root.parent / "no-home"),
    }
    if prefix is None:
        result = CliRunner().invoke(main, [*args, "--json"], env=env)
        return result.exit_code, result.stdout, result.stderr
    command, extra_env = runtime or ([sys.executable, "-m", "loopx_chat"], {})
    done = subprocess.run(
        [*prefix, *command, *args, "--json"],
        capture_output=True,
        text=True,
        env={**env, **extra_env, "HOME": "/tmp"},
        cwd="/tmp",
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def check(root: Path, name: str, args: list[str], expect: str | None, **kw: object) -> None:
    """`expect`: None for success, else the documented error code."""
    code, out, err = run(root, args, **kw)  # type: ignore[arg-type]
    assert "Traceback" not in out + err, (name, err)
    doc = json.loads(out)  # exactly one document
    if expect is None:
        assert code == 0 and doc["ok"] is True, (name, doc)
    else:
        assert code == 1 and doc["error_code"] == expect, (name, doc)


@contextmanager
def condition(kind: str, tmp: Path) -> Iterator[tuple[Path, Callable[[str, bool], str | None]]]:
    """A populated state dir under `kind`, and the expected code for (command, is_write)."""
    root = tmp / "state"
    populate(root)
    goal = root / "goals" / "g"
    if kind == "read_only":
        with read_only_bind(root):
            yield root, lambda name, write: "state_unwritable" if write else None
        return
    if kind == "path_is_file":
        shutil.rmtree(root)
        root.write_bytes(b"not a folder\n")
        yield (
            root,
            lambda name, write: (
                "state_unwritable" if write and name not in READ_BEFORE_LOCK else "state_unreadable"
            ),
        )
        return
    if kind == "symlinked_folder":
        elsewhere = tmp / "elsewhere-goal"
        goal.rename(elsewhere)
        goal.symlink_to(elsewhere, target_is_directory=True)
        # Reading through it is allowed; writing through it never is.
        yield root, lambda name, write: "state_unsafe" if write else None
        return
    if kind in ("symlinked_file", "fifo", "deep"):
        targets = [goal / f"{n}.jsonl" for n in GOAL_FILES] + [root / "sessions/s1/session.json"]
        for path in targets:
            if kind == "symlinked_file":
                copy = tmp / f"elsewhere-{path.name}"
                path.rename(copy)
                path.symlink_to(copy)
            elif kind == "fifo":
                path.unlink()
                os.mkfifo(path, 0o600)
            else:
                deep = b"[" * 5000 + b"]" * 5000
                if path.suffix == ".jsonl":
                    path.write_bytes(path.read_bytes() + deep + b"\n")
                else:
                    path.write_bytes(b'{"a":' + deep + b"}")
        read_code = "state_unsafe" if kind == "symlinked_file" else "state_corrupt"
        # A write that reads its log first refuses; a bare append refuses only a path it
        # cannot append to (a symlink, a FIFO), and appends after a bad line otherwise.
        write_code = {"symlinked_file": "state_unsafe", "fifo": "state_unsafe"}.get(kind)

        def expected(name: str, write: bool) -> str | None:
            if not write:
                if name in LISTINGS or name in LOG_ONLY:
                    return None
                return read_code
            if name in READ_FIRST:
                return read_code
            return write_code  # None for "deep": an append never reads what it appends to

        yield root, expected
        return
    raise AssertionError(kind)


KINDS = ["read_only", "path_is_file", "symlinked_folder", "symlinked_file", "fifo", "deep"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_command_under_a_hostile_state_dir(tmp_path: Path, kind: str) -> None:
    with condition(kind, tmp_path) as (root, expected):
        outside = [p for p in tmp_path.iterdir() if p.name.startswith("elsewhere")]
        before = snapshot(root, *outside)
        for name, args in {**READS, **WRITES}.items():
            check(root, name, args, expected(name, name in WRITES))
        unchanged(before, snapshot(root, *outside))


def unchanged(before: dict[str, bytes], after: dict[str, bytes]) -> None:
    """Every file that was there is as it was; a file that grew (an append the condition
    allows, the metrics log) kept every byte it had; a new file holds no record."""
    for path, data in before.items():
        if path.endswith(GROWS) or after[path] != data:
            assert after[path].startswith(data), path
    new = {
        k
        for k, v in after.items()
        if v and k not in before and not k.endswith(GROWS) and not any(c in k for c in CACHES)
    }
    assert not new


def test_every_command_as_another_user_is_unreadable_or_unwritable() -> None:
    prefix = as_nobody_prefix()
    base = Path(tempfile.mkdtemp(prefix="loopx-matrix-"))
    try:
        base.chmod(0o755)  # nobody may reach the state dir, not into it (it is 0700)
        root = base / "state"
        populate(root)
        runtime = nobody_runtime(base)
        before = snapshot(root)
        # The state dir is not theirs: refused as `foreign_owner` before anything is read
        # (issue 33), where the OS refusal (unreadable, unwritable) came first before.
        for name, args in {**READS, **WRITES}.items():
            check(root, name, args, "foreign_owner", prefix=prefix, runtime=runtime)
        assert snapshot(root) == before
    finally:
        shutil.rmtree(base)


def test_every_write_on_a_full_disk_is_unwritable_and_reads_still_work(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "128k") as disk:
        root = disk / "state"
        populate(root)
        (disk / "filler").write_bytes(b"\0" * free_bytes(disk))
        fresh = {name: [a if a != "g" else "fresh" for a in args] for name, args in WRITES.items()}
        before = snapshot(root)
        for name, args in READS.items():
            check(root, name, args, None)
        for name, args in fresh.items():
            # A new goal's first record needs a page the disk does not have; the records
            # that never create a goal refuse it before they would need one.
            never_create = name in ("quota", "reward record", "dream record")
            check(root, name, args, "goal_not_found" if never_create else "state_unwritable")
        unchanged(before, snapshot(root))

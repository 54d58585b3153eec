"""Ownership is checked (issue 33, finding 8): a state dir, a folder in it, a record file in
it, or the internal error log's fallback folder that belongs to another local user is
refused with `foreign_owner`, and nothing there is read, written or tightened.

The other user is `nobody` (uid 65534): the test runs as root (CI does) and gives the
planted folders and files to it with `os.chown`, as another user's `mkdir -m 0777` or
`umask 0; touch` would leave them; without root it skips locally and fails under CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from loopx_chat.goals.gate_store import GateStore
from tests.helpers.conditions import as_nobody_prefix, unavailable

NOBODY = 65534


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        unavailable("giving a file to another user needs root")


def _cli(state: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "--direct", *words],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _planted_dir(path: Path) -> None:
    path.mkdir()
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o777)


def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    return {
        str(p): (p.stat().st_uid, p.stat().st_mode, p.read_bytes() if p.is_file() else None)
        for p in sorted([root, *root.rglob("*")])
        if p.name != ".lock"  # a goal's lock file, in a folder of ours
    }


def _refused(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    doc = json.loads(done.stdout)
    assert doc["error_code"] == "foreign_owner", doc
    assert "belongs to another user (uid 65534)" in str(doc["error"])
    return doc


def test_a_state_dir_of_another_user_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _planted_dir(state)
    _planted_dir(state / "goals")  # what they could rename away once we had written there
    before = _snapshot(state)
    for words in (
        ("gate", "request", "--goal", "g", "--question", "Ship it?", "--json"),
        ("gate", "list", "--json"),
        ("goal", "set", "g", "--objective", "x", "--acceptance", "y", "--json"),
        ("sessions", "list", "--json"),
    ):
        _refused(_cli(state, *words))
        assert _snapshot(state) == before  # 0777 and theirs still: nothing tightened or made


def test_a_folder_or_record_of_another_user_inside_ours_is_refused_not_listed(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    GateStore(state).request_gate("mine", "Ship mine?", actor="operator", blocking=True)
    # Their goal folder (0777) and a world-writable gate log of theirs in a folder of ours.
    _planted_dir(state / "goals" / "theirs")
    planted = state / "goals" / "planted"
    planted.mkdir(mode=0o700)
    line = {
        "schema_version": "loopx_chat_gate_event_v1",
        "event": "requested",
        "gate_id": "gate-0123456789ab",
        "goal_id": "planted",
        "question": "Approve the planted gate?",
        "actor": "operator",
        "blocking": True,
        "at": "2026-01-01T00:00:00Z",
    }
    (planted / "gates.jsonl").write_text(json.dumps(line) + "\n")
    os.chown(planted / "gates.jsonl", NOBODY, NOBODY)
    (planted / "gates.jsonl").chmod(0o666)
    before = _snapshot(state / "goals")

    listed = _cli(state, "gate", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert [g["goal_id"] for g in doc["gates"]] == ["mine"]
    assert {p["goal_id"]: p["error_code"] for p in doc["problems"]} == {"planted": "foreign_owner"}
    _refused(_cli(state, "gate", "list", "--goal", "planted", "--json"))
    _refused(_cli(state, "gate", "request", "--goal", "theirs", "--question", "Q?", "--json"))
    _refused(_cli(state, "gate", "request", "--goal", "planted", "--question", "Q?", "--json"))
    assert _snapshot(state / "goals") == before


def test_the_error_logs_fallback_folder_of_another_user_is_not_adopted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from loopx_chat.cli.context import _internal_log

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    folder = tmp_path / f"loopx-chat-{os.getuid()}"
    _planted_dir(folder)
    where = _internal_log(RuntimeError("boom"))
    assert where == "the details could not be logged"
    assert list(folder.iterdir()) == []
    assert folder.stat().st_uid == NOBODY and folder.stat().st_mode & 0o777 == 0o777
    # A folder of ours there is used as before.
    folder.rmdir()
    assert _internal_log(RuntimeError("boom")) == f"details in {folder / 'internal-errors.log'}"
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_state_dir_made_by_another_users_process_is_refused() -> None:
    """The same, with the folder made by a real process of `nobody` (setpriv), as another
    user who guessed the path would: `mkdir -m 0777` before the owner's first command."""
    prefix = as_nobody_prefix()
    base = Path(tempfile.mkdtemp(prefix="loopx-foreign-"))
    try:
        base.chmod(0o777)  # a shared folder both users can create in (like /tmp)
        state = base / "state"
        made = subprocess.run([*prefix, "mkdir", "-m", "0777", str(state)], check=False)
        assert made.returncode == 0 and state.stat().st_uid == NOBODY
        before = _snapshot(state)
        _refused(_cli(state, "gate", "request", "--goal", "g", "--question", "Q?", "--json"))
        assert _snapshot(state) == before
    finally:
        shutil.rmtree(base)

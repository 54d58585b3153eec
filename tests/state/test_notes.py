"""The state layer's notes for the owner reach stderr as `note: ...`, and only there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loopx_chat.state.jsonl import append_record


def _loopx(state: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_loosened_state_folder_is_tightened_and_said_once(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    args = ("goal", "set", "g", "--objective", "ship", "--acceptance", "tests pass", "--json")
    assert _loopx(state, home, *args).returncode == 0
    goals = state / "goals"
    goals.chmod(0o755)
    loosened = _loopx(state, home, *args)
    assert loosened.returncode == 0, loosened.stderr
    assert json.loads(loosened.stdout)  # stdout stays the document alone
    notes = [line for line in loosened.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {goals} had mode 0755; tightened to 0700"]
    assert goals.stat().st_mode & 0o777 == 0o700
    again = _loopx(state, home, *args)
    assert again.returncode == 0 and again.stderr == ""


def test_a_repaired_torn_line_is_said_without_a_logging_setup(
    tmp_path: Path, capsys: object
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(b'{"a": 1}\n{"torn')
    append_record(log, {"b": 2})
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.startswith("note: ") and str(log) in err
    lines = log.read_bytes().splitlines()
    assert json.loads(lines[-1]) == {"b": 2}

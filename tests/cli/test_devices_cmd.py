"""`devices` over a devices file it must not read: a specific error, exit non-zero, no
traceback, and the file (or what it points at) left as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _devices(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "devices", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return state


def test_a_symlink_in_place_of_the_devices_file_is_state_unsafe_and_not_followed(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"schema_version": 1, "devices": []}')
    state = _state(tmp_path)
    (state / "devices.json").symlink_to(elsewhere)
    done = _devices(state, "--json")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    answer = json.loads(done.stdout)
    assert answer["error_code"] == "state_unsafe", answer
    assert "move it aside" in answer["error"]
    assert os.path.islink(state / "devices.json")
    assert elsewhere.read_text() == '{"schema_version": 1, "devices": []}'


def test_a_devices_file_that_is_a_folder_is_refused_by_name(tmp_path: Path) -> None:
    state = _state(tmp_path)
    (state / "devices.json").mkdir(mode=0o700)
    done = _devices(state, "--json")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    answer = json.loads(done.stdout)
    assert answer["error_code"] in ("state_unsafe", "state_unreadable"), answer
    assert answer["error_code"] != "internal_error"
    assert (state / "devices.json").is_dir()

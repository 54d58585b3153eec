"""`devices` over a devices file it must not read: a specific error, exit non-zero, no
traceback, and the file (or what it points at) left as it was."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.owner_cli import OwnerCli


def _owner(tmp_path: Path) -> OwnerCli:
    cli = OwnerCli(tmp_path, tmp_path / "home", dict(os.environ), "codex")  # codex is not run
    cli.state.mkdir(mode=0o700)
    return cli


def test_a_symlink_in_place_of_the_devices_file_is_state_unsafe_and_not_followed(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"schema_version": 1, "devices": []}')
    cli = _owner(tmp_path)
    state = cli.state
    (state / "devices.json").symlink_to(elsewhere)
    code, answer = cli.json("devices")
    assert code != 0
    assert answer["error_code"] == "state_unsafe", answer
    assert "move it aside" in answer["error"]
    assert os.path.islink(state / "devices.json")
    assert elsewhere.read_text() == '{"schema_version": 1, "devices": []}'


def test_a_devices_file_that_is_a_folder_is_refused_by_name(tmp_path: Path) -> None:
    cli = _owner(tmp_path)
    state = cli.state
    (state / "devices.json").mkdir(mode=0o700)
    code, answer = cli.json("devices")
    assert code != 0
    assert answer["error_code"] in ("state_unsafe", "state_unreadable"), answer
    assert answer["error_code"] != "internal_error"
    assert (state / "devices.json").is_dir()

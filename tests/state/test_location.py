"""Where state lives when the command line does not say: `state/location.default_state_dir`."""

from __future__ import annotations

from pathlib import Path

import platformdirs

from loopx_chat.state.location import default_state_dir


def test_an_empty_variable_counts_as_unset_like_an_empty_codex_home() -> None:
    platform_dir = Path(platformdirs.user_state_dir("loopx-chat", appauthor=False)).resolve()
    assert default_state_dir({"LOOPX_CHAT_STATE_DIR": ""}) == platform_dir
    assert default_state_dir({}) == platform_dir


def test_a_named_folder_is_used_resolved(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    named = default_state_dir({"LOOPX_CHAT_STATE_DIR": str(tmp_path / "link" / "state")})
    assert named == (tmp_path / "real" / "state").resolve()

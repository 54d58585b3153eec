"""`ensure_private_dir`: what it polices inside the state root, and what it leaves above it."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from loopx_chat.errors import StateError
from loopx_chat.state.private_files import ensure_private_dir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_missing_root_and_its_missing_parents_are_created_private(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "state"
    ensure_private_dir(root / "sessions" / "s1", within=root)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", root, root / "sessions"):
        assert _mode(folder) == 0o700, folder


def test_every_looser_folder_from_the_root_down_is_tightened_and_none_above(
    tmp_path: Path,
) -> None:
    above = tmp_path / "shared"
    root = above / "state"
    (root / "sessions").mkdir(parents=True)
    for folder in (above, root, root / "sessions"):
        folder.chmod(0o755)
    ensure_private_dir(root / "sessions" / "s1", within=root)
    assert [_mode(f) for f in (root, root / "sessions", root / "sessions" / "s1")] == [0o700] * 3
    assert _mode(above) == 0o755  # not the state dir's: a parent the user chose


def test_a_symlink_inside_the_root_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "sessions").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "sessions" / "s1").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(StateError) as refused:
        ensure_private_dir(root / "sessions" / "s1" / "turns", within=root)
    assert refused.value.error_code == "state_unsafe"
    assert list(elsewhere.iterdir()) == []


def test_a_root_reached_through_a_symlinked_parent_is_used_as_resolved_at_startup(
    tmp_path: Path,
) -> None:
    """Roots are resolved when chosen, so the folders above one are not walked on every write
    (macOS reaches /tmp through a symlink); the root itself and what is inside still are."""
    real = tmp_path / "real"
    (real / "state").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    ensure_private_dir(link / "state" / "sessions", within=link / "state")
    assert (real / "state" / "sessions").is_dir()
    with pytest.raises(StateError) as refused:
        ensure_private_dir(link / "sessions", within=link)  # the root itself is a symlink
    assert refused.value.error_code == "state_unsafe"


def test_without_a_root_every_component_is_walked(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    with pytest.raises(StateError) as refused:
        ensure_private_dir(link / "folder")
    assert refused.value.error_code == "state_unsafe"


def test_a_file_where_a_folder_belongs_is_unwritable(tmp_path: Path) -> None:
    root = tmp_path / "state"
    root.mkdir()
    (root / "sessions").write_text("")
    with pytest.raises(StateError) as refused:
        ensure_private_dir(root / "sessions" / "s1", within=root)
    assert refused.value.error_code == "state_unwritable"


def test_folders_it_creates_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)  # would make a new folder 0500: not even writable by its owner
    try:
        ensure_private_dir(tmp_path / "state" / "sessions", within=tmp_path / "state")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "state") == _mode(tmp_path / "state" / "sessions") == 0o700


def test_a_new_root_under_a_shared_parent_leaves_the_parent_alone_and_says_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(0o755)
    root = parent / "state"
    ensure_private_dir(root / "sessions", within=root)  # the root does not exist yet
    assert _mode(parent) == 0o755
    assert _mode(root) == _mode(root / "sessions") == 0o700
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        (0o701, "had mode 0701; tightened to 0700\n"),  # others could reach it: said
        (0o500, ""),  # only its owner lacked a right: nobody else could ever read it
    ],
)
def test_a_folder_not_exactly_private_is_made_so_and_said_only_if_others_could_reach_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], mode: int, said: str
) -> None:
    root = tmp_path / "state"
    (root / "sessions").mkdir(parents=True)
    root.chmod(0o700)
    (root / "sessions").chmod(mode)
    ensure_private_dir(root / "sessions", within=root)
    assert _mode(root / "sessions") == 0o700
    err = capfd.readouterr().err
    assert (said in err) if said else err == ""


def test_a_folder_already_private_is_not_touched(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "sessions").mkdir(parents=True)
    for folder in (root, root / "sessions"):
        folder.chmod(0o700)
    before = [f.stat().st_ctime_ns for f in (root, root / "sessions")]
    time.sleep(0.01)
    ensure_private_dir(root / "sessions", within=root)
    assert [f.stat().st_ctime_ns for f in (root, root / "sessions")] == before


def test_a_leaf_outside_the_root_is_still_tightened(tmp_path: Path) -> None:
    root = tmp_path / "state"
    root.mkdir()
    other = tmp_path / "logs"
    other.mkdir()
    other.chmod(0o755)
    ensure_private_dir(other, within=root)
    assert _mode(other) == 0o700

"""The home resolver's rules that nothing else pins: how config.toml can fail (unreadable, not
UTF-8, not TOML), which `sqlite_home` values count, the record's dictionary form, and the
shape of `home_key` that lock, index and marker names are built from."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from loopx_chat.home import CodexHomeBinding, home_key, read_config_sqlite_home, resolve_codex_home


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "codex-home"
    path.mkdir()
    return path.resolve()


def _resolve(home: Path, **env: str) -> CodexHomeBinding:
    return resolve_codex_home({"CODEX_HOME": str(home), **env}, home.parent)


def test_an_unreadable_config_is_reported_and_the_environment_still_applies(
    home: Path, tmp_path: Path
) -> None:
    # A folder where the file should be: reading it fails with a real OSError even as root.
    (home / "config.toml").mkdir()
    binding = _resolve(home, CODEX_SQLITE_HOME=str(tmp_path / "sq"))
    assert binding.config_error == "config.toml unreadable (Is a directory)"
    assert (binding.sqlite_home, binding.sqlite_source) == (
        (tmp_path / "sq").resolve(),
        "CODEX_SQLITE_HOME",
    )


def test_an_unreadable_config_without_an_errno_text_names_the_error_type() -> None:
    class _Unreadable:
        def read_bytes(self) -> bytes:
            raise PermissionError  # no errno, so no strerror: the type name stands in

    value, error = read_config_sqlite_home(_Unreadable())  # type: ignore[arg-type]
    assert (value, error) == (None, "config.toml unreadable (PermissionError)")


def test_an_unreadable_config_keeps_the_os_reason() -> None:
    class _Unreadable:
        def read_bytes(self) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

    assert read_config_sqlite_home(_Unreadable()) == (  # type: ignore[arg-type]
        None,
        "config.toml unreadable (Input/output error)",
    )


def test_a_missing_config_is_no_error(home: Path) -> None:
    assert read_config_sqlite_home(home / "config.toml") == (None, None)
    binding = _resolve(home)
    assert (binding.sqlite_home, binding.sqlite_source, binding.config_error) == (
        home,
        "home",
        None,
    )


def test_a_config_that_is_not_utf8_is_reported_as_not_parsing(home: Path) -> None:
    (home / "config.toml").write_bytes(b'sqlite_home = "\xff\xfe"\n')
    binding = _resolve(home)
    assert binding.sqlite_source == "home"
    assert binding.config_error is not None
    assert binding.config_error.startswith("config.toml does not parse: ")


def test_a_parse_error_stays_reported_when_the_environment_names_the_sqlite_home(
    home: Path, tmp_path: Path
) -> None:
    (home / "config.toml").write_text("sqlite_home = \n")
    binding = _resolve(home, CODEX_SQLITE_HOME=str(tmp_path / "sq"))
    assert binding.sqlite_source == "CODEX_SQLITE_HOME"
    assert binding.config_error is not None
    assert binding.config_error.startswith("config.toml does not parse: ")


@pytest.mark.parametrize(
    "line",
    ["sqlite_home = 5", "sqlite_home = true", 'sqlite_home = ["db"]', 'sqlite_home = ""'],
    ids=["int", "bool", "list", "empty"],
)
def test_a_sqlite_home_that_is_not_a_non_empty_string_is_ignored_without_error(
    home: Path, tmp_path: Path, line: str
) -> None:
    (home / "config.toml").write_text(line + "\n")
    assert read_config_sqlite_home(home / "config.toml") == (None, None)
    assert _resolve(home).sqlite_home == home
    binding = _resolve(home, CODEX_SQLITE_HOME=str(tmp_path / "sq"))
    assert (binding.sqlite_source, binding.config_error) == ("CODEX_SQLITE_HOME", None)


def test_a_config_without_sqlite_home_is_no_error(home: Path) -> None:
    (home / "config.toml").write_text('model = "gpt"\n')
    assert read_config_sqlite_home(home / "config.toml") == (None, None)


def test_a_string_sqlite_home_is_read_as_written(home: Path) -> None:
    (home / "config.toml").write_text('sqlite_home = "~/db"\n')
    assert read_config_sqlite_home(home / "config.toml") == ("~/db", None)
    binding = resolve_codex_home({"CODEX_HOME": str(home), "HOME": str(home.parent)}, Path("/"))
    assert (binding.sqlite_home, binding.sqlite_source) == (home.parent / "db", "config")
    assert binding.config_error is None


def test_tilde_alone_is_the_user_home(home: Path) -> None:
    binding = resolve_codex_home({"CODEX_HOME": "~", "HOME": str(home)}, Path("/"))
    assert binding.path == home
    # A tilde that is not a whole first component is a plain folder name.
    binding = resolve_codex_home({"CODEX_HOME": "~x", "HOME": str(home)}, home)
    assert binding.path == home / "~x"


def test_the_dictionary_form_names_every_field(home: Path) -> None:
    (home / "config.toml").mkdir()
    binding = _resolve(home)
    assert binding.to_dict() == {
        "path": str(home),
        "source": "CODEX_HOME",
        "sqlite_home": str(home),
        "sqlite_source": "home",
        "config_error": "config.toml unreadable (Is a directory)",
    }


def test_home_key_is_sixteen_hex_characters_and_stable() -> None:
    # Lock folders, the rollout index and the ownership markers on disk are named by this key:
    # a different length or digest would orphan every file an earlier version wrote.
    key = home_key(Path("/Users/ada/.codex"))
    assert key == "08709ddbadda8e44"
    assert len(home_key(Path("/"))) == 16
    assert all(c in "0123456789abcdef" for c in home_key(Path("/x/y")))
    assert home_key(Path("/x/y")) != home_key(Path("/x/z"))

"""Codex home resolution: precedence, empty values, relative paths, symlinks, sqlite home,
and the binding rules the store enforces (cannot rebind, same value is fine, absolute only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopx_chat.errors import StateError
from loopx_chat.home import resolve_codex_home
from loopx_chat.records import SessionRecord
from loopx_chat.store import SessionStore


@pytest.fixture
def homes(tmp_path: Path) -> dict[str, Path]:
    names = ("loopx", "codex", "user", "cwd")
    paths = {name: tmp_path / name for name in names}
    for path in paths.values():
        path.mkdir()
    return paths


def test_loopx_variable_wins_over_codex_home(homes: dict[str, Path]) -> None:
    env = {"LOOPX_CHAT_CODEX_HOME": str(homes["loopx"]), "CODEX_HOME": str(homes["codex"])}
    binding = resolve_codex_home(env, homes["cwd"])
    assert binding.path == homes["loopx"].resolve()
    assert binding.source == "LOOPX_CHAT_CODEX_HOME"


def test_codex_home_used_when_loopx_variable_unset(homes: dict[str, Path]) -> None:
    binding = resolve_codex_home({"CODEX_HOME": str(homes["codex"])}, homes["cwd"])
    assert (binding.path, binding.source) == (homes["codex"].resolve(), "CODEX_HOME")


def test_default_is_dot_codex_under_home(homes: dict[str, Path]) -> None:
    binding = resolve_codex_home({"HOME": str(homes["user"])}, homes["cwd"])
    assert (binding.path, binding.source) == (homes["user"].resolve() / ".codex", "default")


@pytest.mark.parametrize(
    ("env", "expected_source"),
    [
        ({"LOOPX_CHAT_CODEX_HOME": "", "CODEX_HOME": "CODEX"}, "CODEX_HOME"),
        ({"LOOPX_CHAT_CODEX_HOME": "", "CODEX_HOME": ""}, "default"),
        ({"CODEX_HOME": ""}, "default"),
    ],
)
def test_empty_values_count_as_unset(
    homes: dict[str, Path], env: dict[str, str], expected_source: str
) -> None:
    env = {k: (str(homes["codex"]) if v == "CODEX" else v) for k, v in env.items()}
    binding = resolve_codex_home({**env, "HOME": str(homes["user"])}, homes["cwd"])
    assert binding.source == expected_source
    if expected_source == "default":
        assert binding.path == homes["user"].resolve() / ".codex"


def test_relative_value_resolves_against_given_cwd(homes: dict[str, Path]) -> None:
    binding = resolve_codex_home({"LOOPX_CHAT_CODEX_HOME": "rel/home"}, homes["cwd"])
    assert binding.path == (homes["cwd"] / "rel" / "home").resolve()
    assert binding.path.is_absolute()


def test_tilde_expands_with_the_given_home(homes: dict[str, Path]) -> None:
    env = {"CODEX_HOME": "~/alt", "HOME": str(homes["user"])}
    assert resolve_codex_home(env, homes["cwd"]).path == homes["user"].resolve() / "alt"


def test_symlinks_are_resolved(homes: dict[str, Path], tmp_path: Path) -> None:
    link = tmp_path / "link-to-codex"
    link.symlink_to(homes["codex"])
    binding = resolve_codex_home({"LOOPX_CHAT_CODEX_HOME": str(link)}, homes["cwd"])
    assert binding.path == homes["codex"].resolve()
    assert binding.path != link


def test_resolution_never_mutates_environment(homes: dict[str, Path]) -> None:
    env = {"LOOPX_CHAT_CODEX_HOME": str(homes["loopx"])}
    before_os = dict(os.environ)
    resolve_codex_home(env, homes["cwd"])
    assert env == {"LOOPX_CHAT_CODEX_HOME": str(homes["loopx"])}
    assert dict(os.environ) == before_os


def test_sqlite_home_defaults_to_the_home(homes: dict[str, Path]) -> None:
    binding = resolve_codex_home({"CODEX_HOME": str(homes["codex"])}, homes["cwd"])
    assert (binding.sqlite_home, binding.sqlite_source) == (homes["codex"].resolve(), "home")


def test_sqlite_home_from_environment(homes: dict[str, Path], tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(homes["codex"]), "CODEX_SQLITE_HOME": str(tmp_path / "sq")}
    binding = resolve_codex_home(env, homes["cwd"])
    assert (binding.sqlite_home, binding.sqlite_source) == (
        (tmp_path / "sq").resolve(),
        "CODEX_SQLITE_HOME",
    )


def test_sqlite_home_from_config_beats_environment(homes: dict[str, Path], tmp_path: Path) -> None:
    (homes["codex"] / "config.toml").write_text(f'sqlite_home = "{tmp_path / "fromcfg"}"\n')
    env = {"CODEX_HOME": str(homes["codex"]), "CODEX_SQLITE_HOME": str(tmp_path / "fromenv")}
    binding = resolve_codex_home(env, homes["cwd"])
    assert (binding.sqlite_home, binding.sqlite_source) == (
        (tmp_path / "fromcfg").resolve(),
        "config",
    )


def test_relative_sqlite_home_in_config_is_relative_to_the_home(homes: dict[str, Path]) -> None:
    (homes["codex"] / "config.toml").write_text('sqlite_home = "db"\n')
    binding = resolve_codex_home({"CODEX_HOME": str(homes["codex"])}, homes["cwd"])
    assert binding.sqlite_home == homes["codex"].resolve() / "db"


def test_unparsable_config_is_reported_and_falls_back(homes: dict[str, Path]) -> None:
    (homes["codex"] / "config.toml").write_text("sqlite_home = \n")
    binding = resolve_codex_home({"CODEX_HOME": str(homes["codex"])}, homes["cwd"])
    assert binding.sqlite_source == "home"
    assert binding.config_error is not None and "does not parse" in binding.config_error


@given(
    loopx=st.sampled_from(["", "L", None]),
    codex=st.sampled_from(["", "C", None]),
)
def test_precedence_property(loopx: str | None, codex: str | None) -> None:
    env: dict[str, str] = {"HOME": "/home/u"}
    if loopx is not None:
        env["LOOPX_CHAT_CODEX_HOME"] = "/homes/l" if loopx else ""
    if codex is not None:
        env["CODEX_HOME"] = "/homes/c" if codex else ""
    binding = resolve_codex_home(env, Path("/cwd"))
    if loopx:
        assert binding.path == Path("/homes/l").resolve()
    elif codex:
        assert binding.path == Path("/homes/c").resolve()
    else:
        assert binding.path == Path("/home/u/.codex").resolve()


# -- binding rules in the store -----------------------------------------------------------


def _record(session_id: str = "s1", **kw: object) -> SessionRecord:
    return SessionRecord(
        session_id=session_id,
        goal_id="g",
        created_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:00Z",
        **kw,  # type: ignore[arg-type]
    )


def test_cannot_rebind_a_managed_home(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.create(_record(codex_home="/homes/a"))
    before = store.session_path("s1").read_bytes()
    with pytest.raises(StateError) as info:
        store.update("s1", codex_home="/homes/b")
    assert info.value.error_code == "codex_home_rebind_refused"
    assert "cannot rebind a managed Codex home" in info.value.message
    assert store.session_path("s1").read_bytes() == before


def test_same_value_rebind_is_fine(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.create(_record(codex_home="/homes/a"))
    assert store.update("s1", codex_home="/homes/a").codex_home == "/homes/a"


def test_legacy_session_can_be_bound_once(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.create(_record())
    assert store.update("s1", codex_home="/homes/a").codex_home == "/homes/a"
    with pytest.raises(StateError):
        store.update("s1", codex_home="/homes/b")


@pytest.mark.parametrize(
    "kw",
    [
        {"codex_home": "relative/home"},
        {"codex_home": "/abs", "agent_id": "claude"},
        {"codex_home": "/abs", "session_mode": "attached_host"},
    ],
)
def test_non_absolute_or_non_managed_home_rejected(tmp_path: Path, kw: dict[str, str]) -> None:
    store = SessionStore(tmp_path / "state")
    with pytest.raises(StateError) as info:
        store.create(_record(**kw))
    assert info.value.error_code == "codex_home_invalid"
    assert not store.session_path("s1").exists()

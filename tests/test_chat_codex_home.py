"""Codex home resolution: precedence, empty values, relative paths, symlinks, sqlite home,
and the binding rules the store enforces (cannot rebind, same value is fine, absolute only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.errors import CodexError, StateError
from loopx_chat.home import resolve_codex_home
from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.fakes import FakeCodex


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


# -- the controller: capture once, refuse other homes before anything happens ----------------


def _controller(tmp_path: Path, home: Path, fake: FakeCodex, **env: str) -> ChatController:
    environ = {
        "PATH": os.environ["PATH"],
        "LOOPX_CHAT_CODEX_HOME": str(home),
        **fake.env(env.pop("scenario", "ok")),
        **env,
    }
    return ChatController(
        store=SessionStore(tmp_path / "state"),
        environ=environ,
        cwd=tmp_path,
        codex_bin=str(fake.bin),
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def two_homes(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "home-a", tmp_path / "home-b"
    a.mkdir()
    b.mkdir()
    return a.resolve(), b.resolve()


def test_controller_captures_home_once(
    tmp_path: Path,
    two_homes: tuple[Path, Path],
    fake_codex: FakeCodex,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home_a, home_b = two_homes
    environ = {"PATH": os.environ["PATH"], "LOOPX_CHAT_CODEX_HOME": str(home_a), **fake_codex.env()}
    c = ChatController(
        store=SessionStore(tmp_path / "state"),
        environ=environ,
        cwd=tmp_path,
        codex_bin=str(fake_codex.bin),
    )
    environ["LOOPX_CHAT_CODEX_HOME"] = str(home_b)  # later changes never move the binding
    monkeypatch.setenv("LOOPX_CHAT_CODEX_HOME", str(home_b))
    with c:
        record = c.open_session("g", tmp_path)
    assert record.codex_home == str(home_a)
    assert fake_codex.app_servers()[0]["codex_home"] == str(home_a)
    with pytest.raises(StateError, match="cannot rebind"):
        SessionStore(tmp_path / "state").update(record.session_id, codex_home=str(home_b))


@pytest.mark.parametrize("action", ["resume", "submit", "interrupt", "history"])
def test_mismatched_home_refused_before_spawn_or_write(
    tmp_path: Path, two_homes: tuple[Path, Path], fake_codex: FakeCodex, action: str
) -> None:
    home_a, home_b = two_homes
    with _controller(tmp_path, home_a, fake_codex) as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "first")
    spawned_before = len(fake_codex.app_servers())
    state = tmp_path / "state"
    with _controller(tmp_path, home_b, fake_codex) as other:
        before = _snapshot(state)  # after construction: the refused call itself writes nothing
        call = {
            "resume": lambda: other.resume_session(record.session_id),
            "submit": lambda: other.submit_turn(record.session_id, "x", client_turn_id="t-9"),
            "interrupt": lambda: other.interrupt_turn(record.session_id),
            "history": lambda: other.history(record.session_id),
        }[action]
        with pytest.raises(CodexError) as info:
            call()
        after = _snapshot(state)
    assert info.value.error_code == "codex_home_mismatch"
    assert "original LOOPX_CHAT_CODEX_HOME" in info.value.message
    assert len(fake_codex.app_servers()) == spawned_before  # nothing spawned
    assert after == before  # not one byte of state changed


def _legacy(store: SessionStore, **kw: object) -> SessionRecord:
    return store.create(
        _record("legacy", upstream_thread_id="legacy-thread", work_dir=str(store.root.parent), **kw)
    )


def test_legacy_session_bound_only_after_successful_restore(
    tmp_path: Path, two_homes: tuple[Path, Path], fake_codex: FakeCodex
) -> None:
    home_a, _ = two_homes
    store = SessionStore(tmp_path / "state")
    _legacy(store)
    # Startup alone changes nothing.
    c = _controller(tmp_path, home_a, fake_codex)
    assert store.load("legacy").codex_home is None
    with c:
        restored = c.resume_session("legacy")
    assert restored.codex_home == str(home_a)
    assert restored.upstream_thread_id == "legacy-thread"
    (spawn,) = fake_codex.app_servers()
    assert spawn["codex_home"] == str(home_a)


def test_legacy_session_failed_restore_stays_unbound(
    tmp_path: Path, two_homes: tuple[Path, Path], fake_codex: FakeCodex
) -> None:
    home_a, _ = two_homes
    store = SessionStore(tmp_path / "state")
    store.create(_record("legacy", upstream_thread_id="no-such-thread", work_dir=str(tmp_path)))
    with _controller(tmp_path, home_a, fake_codex) as c, pytest.raises(CodexError) as info:
        c.resume_session("legacy")
    assert info.value.error_code == "resume_failed"
    after = store.load("legacy")
    assert after.codex_home is None
    assert (after.status, after.last_error_code) == ("resume_failed", "resume_failed")


def test_attached_host_session_never_spawns_and_queues(
    tmp_path: Path, two_homes: tuple[Path, Path], fake_codex: FakeCodex
) -> None:
    home_a, _ = two_homes
    store = SessionStore(tmp_path / "state")
    store.create(_record("att", session_mode="attached_host", host_surface="codex-app"))
    with _controller(tmp_path, home_a, fake_codex) as c:
        assert c.resume_session("att").codex_home is None
        result = c.submit_turn("att", "hello", client_turn_id="q-1")
        again = c.submit_turn("att", "hello", client_turn_id="q-1")
        assert c.warm_pids() == {}
    assert (result.turn.status, result.created) == ("queued", True)
    assert (again.turn.turn_id, again.created) == (result.turn.turn_id, False)
    assert store.load("att").codex_home is None
    assert fake_codex.app_servers() == []


def test_submit_is_idempotent_by_client_turn_id(
    tmp_path: Path, two_homes: tuple[Path, Path], fake_codex: FakeCodex
) -> None:
    home_a, _ = two_homes
    with _controller(tmp_path, home_a, fake_codex) as c:
        record = c.open_session("g", tmp_path)
        first = c.submit_turn(record.session_id, "hi", client_turn_id="ct-1")
    with _controller(tmp_path, home_a, fake_codex) as c:
        retry = c.submit_turn(record.session_id, "hi", client_turn_id="ct-1")
    assert (retry.created, retry.turn.turn_id) == (False, first.turn.turn_id)
    assert len(fake_codex.app_servers()) == 1  # the retry spawned nothing
    assert SessionStore(tmp_path / "state").load(record.session_id).turn_count == 1

"""Shared fixtures: the pinned real codex, the loopback model mock, the fake codex, the
in-process scripted host.

Fixtures only; the functions and classes tests share live in `tests/helpers/`. The tests under
`tests/integration/` get the `codex` marker from its conftest; a test elsewhere that needs the
pinned real codex (it uses `codex_bin`, directly or through another fixture) gets it here.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loopx_chat.codex.binary import codex_version as codex_version_of
from loopx_chat.codex.binary import find_codex
from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.location import default_state_dir
from tests.helpers.fakes import FAKE_CODEX, FakeCodex, Scripted
from tests.helpers.markers import in_integration, mark_real_codex
from tests.helpers.paths import TEST_CODEX
from tests.helpers.serve_process import RunningService
from tests.helpers.serve_process import start_service as start_serve_process


def pytest_configure(config: pytest.Config) -> None:
    """A shell that ignores SIGINT (`make test &`, `trap "" INT`) hands the ignore on to every
    process it starts, and an ignored signal stays ignored across exec: every child a test
    starts (the CLI, `serve`) would shrug off the Ctrl-C a test sends it. A handled signal is
    reset to the default at exec, so handling it here gives each child Python's own Ctrl-C."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_real_codex(item for item in items if not in_integration(item))


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    if not root.is_dir():
        return {}
    stats = {str(p.relative_to(root)): p.lstat() for p in root.rglob("*")}
    return {name: (st.st_size, st.st_mtime_ns) for name, st in stats.items()}


@pytest.fixture(scope="session", autouse=True)
def owner_state_untouched() -> Iterator[None]:
    """No test writes into this user's own default state dir: every test names a state dir
    of its own. Checked under `CI` only: on a developer's machine the owner's own service may
    be writing there while the tests run."""
    real = default_state_dir({})
    before = _tree(real) if os.environ.get("CI") else None
    yield
    if before is not None:
        assert _tree(real) == before, f"a test wrote into the real default state dir {real}"


@pytest.fixture(scope="session")
def codex_bin() -> str:
    """The real codex the tests run (the pinned one, or `LOOPX_TEST_CODEX_BIN`); missing
    fails under CI (never a silent skip there)."""
    if TEST_CODEX.exists():
        return str(TEST_CODEX)
    message = f"codex not installed at {TEST_CODEX}; run `make codex`"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def codex_version(codex_bin: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The version the codex under test reports (`codex --version`): tests derive what they
    expect of a release from it, never from a version written in the test."""
    scratch = tmp_path_factory.mktemp("codex-version-home")
    version = codex_version_of(find_codex(codex_bin, os.environ), os.environ, scratch)
    assert version is not None, f"{codex_bin} --version printed no version"
    return version


@pytest.fixture
def mock() -> Iterator[MockResponsesServer]:
    with MockResponsesServer() as server:
        yield server


@pytest.fixture
def bound_home(tmp_path: Path, mock: MockResponsesServer) -> Path:
    home = tmp_path / "bound-home"
    write_offline_codex_config(home, mock.base_url)
    return home.resolve()


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    """The process env minus anything that would pick a home, plus an ambient decoy home."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_CHAT_CODEX_HOME", "CODEX_HOME")}
    ambient = tmp_path / "ambient-home"
    ambient.mkdir()
    env["CODEX_HOME"] = str(ambient)
    return env


@pytest.fixture
def fake_codex(tmp_path: Path) -> FakeCodex:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    exe = bindir / "codex"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CODEX}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return FakeCodex(bin=exe, log=tmp_path / "fake-codex.log")


@pytest.fixture
def start_service(tmp_path: Path) -> Iterator[Callable[..., RunningService]]:
    """Start `loopx-chat serve` for (state dir, home, env, codex bin, *serve options); every
    one started is stopped at the end."""
    started: list[RunningService] = []

    def start(
        state: Path, home: Path, env: dict[str, str], codex_bin: str, *serve_args: str
    ) -> RunningService:
        log = tmp_path / f"serve-{len(started)}.log"
        service = start_serve_process(state, home, env, codex_bin, log, *serve_args)
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


@pytest.fixture
def scripted(tmp_path: Path) -> Scripted:
    """The in-process scripted host, and a `codex` to name that only records that it ran."""
    bindir = tmp_path / "scriptedbin"
    bindir.mkdir()
    ran = tmp_path / "scripted-codex-ran.log"
    exe = bindir / "codex"
    exe.write_text(f'#!/bin/sh\necho "$*" >> "{ran}"\nexit 99\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return Scripted(bin=exe, ran=ran)

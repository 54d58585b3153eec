"""Shared fixtures: the pinned real codex, the loopback model mock, the fake codex."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.binary import find_codex
from loopx_chat.codex.mock_responses import MockResponsesServer
from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.codex.thread import HostLaunch, ThreadOptions, Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.state.session_store import SessionStore

ROOT = Path(__file__).resolve().parent.parent
PINNED_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"
FAKE_CODEX = Path(__file__).resolve().parent / "fakes" / "fake_codex.py"


@pytest.fixture(scope="session")
def codex_bin() -> str:
    """The pinned real codex; missing fails under CI (never a silent skip there)."""
    if PINNED_CODEX.exists():
        return str(PINNED_CODEX)
    message = f"pinned codex not installed at {PINNED_CODEX}; run `make codex`"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


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


def real_launch(
    codex_bin: str, home: Path, work: Path, env: dict[str, str], log: Path, **changes: Any
) -> HostLaunch:
    """A launch of the pinned codex on `home`, for tests that open a thread without a
    controller (another client of the same home, a hook around the spawn)."""
    return HostLaunch(
        executable=find_codex(codex_bin, env).path,
        codex_home=home,
        work_dir=work,
        environ=env,
        log_path=log,
        options=ThreadOptions(),
        timeouts=Timeouts(),
        **changes,
    )


def raw_app_server(
    codex_bin: str, home: Path, work: Path, env: dict[str, str], log: Path
) -> AppServerProcess:
    """An app-server of the pinned codex on `home`, spoken to directly (no controller)."""
    return AppServerProcess.spawn(
        executable=find_codex(codex_bin, env).path,
        codex_home=home,
        work_dir=work,
        environ=env,
        stderr_log=log,
    )


def make_controller(
    state: Path,
    home: Path,
    env: dict[str, str],
    codex_bin: str,
    config: ControllerConfig | None = None,
) -> ChatController:
    return ChatController(
        store=SessionStore(state),
        environ={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
        cwd=state.parent,
        codex_bin=codex_bin,
        config=config,
    )


@dataclass
class FakeCodex:
    """An executable `codex` that runs tests/fakes/fake_codex.py, plus its invocation log."""

    bin: Path
    log: Path

    def env(self, scenario: str = "ok", **extra: str) -> dict[str, str]:
        return {"FAKE_CODEX_SCENARIO": scenario, "FAKE_CODEX_LOG": str(self.log), **extra}

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def app_servers(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("argv", [None])[0] == "app-server"]

    def debug_model_runs(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("debug_models")]


@pytest.fixture
def fake_codex(tmp_path: Path) -> FakeCodex:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    exe = bindir / "codex"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CODEX}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return FakeCodex(bin=exe, log=tmp_path / "fake-codex.log")


def run_in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, object]]:
    """Run `fn` (a blocking turn) on a thread; its result or exception lands in the box."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # reported through the box
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@dataclass
class RunningService:
    """A `loopx-chat serve` process of the tests, its port and its log."""

    proc: Any
    port: int
    state: Path
    log: Path

    def served(self) -> list[str]:
        """The request lines it logged so far (`POST /api/... 200 3ms`)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [line for line in text.splitlines() if " /api/" in line]

    def stop(self) -> None:
        import signal
        import subprocess

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def start_service(tmp_path: Path) -> Iterator[Callable[..., RunningService]]:
    """Start `loopx-chat serve` on a free port for a state dir, a home and an environment;
    ready once its `service.json` names it. Every one started is stopped at the end."""
    import socket
    import subprocess

    from loopx_chat.state.service_runtime import read_runtime

    started: list[RunningService] = []

    def start(
        state: Path, home: Path, env: dict[str, str], codex_bin: str, *serve_args: str
    ) -> RunningService:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        log = tmp_path / f"serve-{len(started)}.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
                    *("--codex-bin", codex_bin, "serve", "--port", str(port), *serve_args),
                ],
                env={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        service = RunningService(proc=proc, port=port, state=state, log=log)
        started.append(service)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            runtime = read_runtime(state)
            if runtime is not None and runtime.pid == proc.pid:
                return service
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"serve did not start: {log.read_text(errors='replace')[-2000:]}")

    yield start
    for service in started:
        service.stop()

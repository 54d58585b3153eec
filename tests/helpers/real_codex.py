"""The pinned real codex on a home: a launch for a thread, a bare app-server, a controller.

For tests that drive the real binary (it comes from the `codex_bin` fixture, which fails under
CI when the binary is missing). Nothing here spawns on import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.binary import find_codex
from loopx_chat.codex.thread import HostLaunch, ThreadOptions, Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.state.session_store import SessionStore


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
    """A controller on a store at `state`, bound to `home`, spawning `codex_bin`."""
    return ChatController(
        store=SessionStore(state),
        environ={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
        cwd=state.parent,
        codex_bin=codex_bin,
        config=config,
    )

"""Work that runs while the real app-server boots: after the spawn, before `initialize` is
answered, and never at the cost of an app-server left running."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest

from loopx_chat.codex.thread import CodexThread
from loopx_chat.controller.chat_controller import ControllerConfig
from loopx_chat.errors import StateError
from loopx_chat.state.control_events import ControlLog
from tests.helpers.module_probe import probe_modules
from tests.helpers.real_codex import make_controller, real_launch
from tests.helpers.waiting import wait_for


def _codex_children() -> list[psutil.Process]:
    """This process's codex children: other children it may have at that moment (a helper
    another fixture started, `python -m ...`) are not what these tests are about."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.is_running() and "codex" in Path(p.cmdline()[0]).name:
                found.append(p)
        except (psutil.Error, IndexError):
            continue
    return found


def test_it_runs_once_the_app_server_is_spawned_and_before_the_thread_opens(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    seen: list[list[str]] = []

    def while_starting() -> None:
        # The process exists already (its argv is codex's), and no thread is loaded yet.
        seen.append([p.cmdline()[1] for p in _codex_children() if len(p.cmdline()) > 1])

    thread = CodexThread.open(
        real_launch(
            codex_bin,
            bound_home,
            tmp_path,
            base_env,
            tmp_path / "stderr.log",
            while_starting=while_starting,
        ),
        resume_thread_id=None,
    )
    try:
        assert seen == [["app-server"]]
        assert thread.thread_id
    finally:
        thread.proc.close()


def test_what_it_raises_ends_the_app_server_it_ran_for(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    pids: list[int] = []

    def while_starting() -> None:
        pids.extend(p.pid for p in _codex_children())
        raise StateError("the events folder is full", error_code="state_unwritable")

    with pytest.raises(StateError) as failed:
        CodexThread.open(
            real_launch(
                codex_bin,
                bound_home,
                tmp_path,
                base_env,
                tmp_path / "stderr.log",
                while_starting=while_starting,
            ),
            resume_thread_id=None,
        )
    assert failed.value.error_code == "state_unwritable"
    assert pids, "the hook ran before any app-server existed"
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_controller_records_its_start_while_codex_boots_and_only_once(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    config = ControllerConfig(warm_idle_close_sec=0.2)
    with make_controller(state, bound_home, base_env, codex_bin, config) as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "one")  # codex keeps a thread only once it has a turn
        wait_for(lambda: not c.warm_pids())  # idle: the next turn spawns a second app-server
        c.submit_turn(record.session_id, "two")
    events = [e["kind"] for e in ControlLog(state).events()]
    assert events.count("controller_started") == 1
    assert events.index("controller_started") < events.index("session_opened")


def test_a_whole_turn_reads_its_app_servers_start_time_without_psutil_on_linux(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    """Registering the app-server needs its start time; on Linux `/proc` gives it as psutil
    would (`pids.start_time`), and psutil's 17 ms import is no longer part of a turn."""
    state = tmp_path / "state"
    args = ["--state-dir", str(state), "--codex-bin", codex_bin, "chat", "new", "--goal", "g"]
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    done, code, loaded = probe_modules([*args, "--json", "mock:text=hi"], env)
    assert code in (None, 0), done.stderr
    assert json.loads(done.stdout)["turn"]["status"] == "completed"
    assert "loopx_chat.controller.home_ownership" in loaded  # it registered its app-server
    assert ("psutil" in loaded) == (not sys.platform.startswith("linux"))

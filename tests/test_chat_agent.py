"""The codex adapter and controller against the fake app-server: faults on demand.

The fake (tests/fakes/fake_codex.py) logs every invocation (argv, CODEX_HOME, cwd), so these
tests assert exactly how processes were spawned, retried or not spawned at all.
"""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

import psutil
import pytest

from loopx_chat.codex.binary import find_codex, native_binary_for_wrapper
from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller import ChatController, ControllerConfig
from loopx_chat.errors import CodexError
from loopx_chat.store import SessionStore
from tests.conftest import FakeCodex


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "bound"
    path.mkdir()
    return path.resolve()


def controller(
    tmp_path: Path,
    home: Path,
    fake: FakeCodex,
    scenario: str = "ok",
    *,
    idle_close_sec: float = 180.0,
    timeouts: Timeouts | None = None,
    **extra: str,
) -> ChatController:
    env = {
        "PATH": os.environ["PATH"],
        "CODEX_HOME": str(tmp_path / "ambient"),
        "LOOPX_CHAT_CODEX_HOME": str(home),
        **fake.env(scenario, **extra),
    }
    config = ControllerConfig(
        timeouts=timeouts or Timeouts(startup=10, request=10, idle=0.6, hard=30, close_grace=2),
        warm_idle_close_sec=idle_close_sec,
    )
    return ChatController(
        store=SessionStore(tmp_path / "state"),
        environ=env,
        cwd=tmp_path,
        codex_bin=str(fake.bin),
        config=config,
    )


def test_argv_env_and_cwd_of_the_spawned_app_server(
    tmp_path: Path, home: Path, fake_codex: FakeCodex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "parent-ambient"))
    work = tmp_path / "work"
    work.mkdir()
    with controller(tmp_path, home, fake_codex) as c:
        record = c.open_session("g", work)
        result = c.submit_turn(record.session_id, "hi")
    assert result.turn.status == "completed"
    (spawn,) = fake_codex.app_servers()
    assert spawn["argv"] == ["app-server", "--listen", "stdio://"]
    assert spawn["codex_home"] == str(home)
    assert spawn["cwd"] == str(work.resolve())
    # The parent process environment keeps its own value.
    assert os.environ["CODEX_HOME"] == str(tmp_path / "parent-ambient")


def test_catalog_retry_respawns_once_on_the_same_home(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "loopx-chat-model-catalog-*")))
    with controller(tmp_path, home, fake_codex, "catalog_legacy") as c:
        record = c.open_session("g", tmp_path)
        assert c.submit_turn(record.session_id, "hi").turn.status == "completed"
    first, second = fake_codex.app_servers()
    assert first["codex_home"] == second["codex_home"] == str(home)
    assert not any(a.startswith("model_catalog_json=") for a in first["argv"])
    assert any(a.startswith("model_catalog_json=") for a in second["argv"])
    (debug,) = fake_codex.debug_model_runs()
    assert debug["codex_home"] != str(home)  # a throwaway home, never the user's
    assert not os.path.exists(debug["codex_home"])
    after = set(glob.glob(os.path.join(tempfile.gettempdir(), "loopx-chat-model-catalog-*")))
    assert after == before  # the temp catalog is removed


@pytest.mark.parametrize(
    ("scenario", "extra"),
    [("catalog_legacy_always", {}), ("catalog_legacy", {"FAKE_CODEX_DEBUG_MODELS": "fail"})],
)
def test_catalog_retry_failure_gives_a_gate(
    tmp_path: Path, home: Path, fake_codex: FakeCodex, scenario: str, extra: dict[str, str]
) -> None:
    with controller(tmp_path, home, fake_codex, scenario, **extra) as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    err = info.value
    assert err.error_code == "catalog_incompatible"
    assert err.gate is not None and "compatible model catalog" in err.gate.summary
    assert "legacy override" in err.gate.next_action
    assert len(fake_codex.app_servers()) == (2 if scenario == "catalog_legacy_always" else 1)
    assert SessionStore(tmp_path / "state").list().sessions == ()


def test_catalog_debug_models_bad_json_is_refused(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    c = controller(tmp_path, home, fake_codex, "catalog_legacy", FAKE_CODEX_DEBUG_MODELS="badjson")
    with c, pytest.raises(CodexError) as info:
        c.open_session("g", tmp_path)
    assert info.value.error_code == "catalog_incompatible"


def test_unrelated_thread_start_error_never_retries(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "thread_start_error") as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    assert info.value.error_code == "app_server_rejected"
    assert "rejected thread/start" in info.value.message
    assert "exploded" not in info.value.message  # upstream text is not echoed
    assert len(fake_codex.app_servers()) == 1
    assert fake_codex.debug_model_runs() == []


def test_config_error_is_classified(tmp_path: Path, home: Path, fake_codex: FakeCodex) -> None:
    with controller(tmp_path, home, fake_codex, "config_invalid") as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    assert info.value.error_code == "codex_config_invalid"
    assert fake_codex.debug_model_runs() == []


def test_garbage_stdout_lines_are_skipped(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "garbage") as c:
        record = c.open_session("g", tmp_path)
        deltas: list[str] = []
        result = c.submit_turn(record.session_id, "hi", on_delta=deltas.append)
        warm = c._warm.get(record.session_id)
        assert warm is not None
        skipped = warm.thread.proc.stats.skipped_lines
    assert result.turn.status == "completed"
    assert "".join(deltas) == "fake reply"
    assert skipped >= 3
    log = (
        SessionStore(tmp_path / "state").session_dir(record.session_id)
    ) / "app-server.stderr.log"
    assert "skipped a non-JSON stdout line" in log.read_text()
    assert "not json at all" not in log.read_text()  # sizes only, never content


def test_hang_hits_the_idle_timeout_and_interrupts(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "hang_turn") as c:
        record = c.open_session("g", tmp_path)
        result = c.submit_turn(record.session_id, "hi")
    assert (result.turn.status, result.turn.error_code) == ("interrupted", "idle_timeout")
    assert result.session.status == "ready" and result.session.active_turn_id is None
    assert result.session.last_error_code == "idle_timeout"


def test_a_history_read_that_never_answers_times_out_and_leaves_nothing_running(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "hang_read") as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "hi")
    state = SessionStore(tmp_path / "state")
    before = {p: p.read_bytes() for p in state.root.rglob("*.json")}
    reader = controller(
        tmp_path,
        home,
        fake_codex,
        "hang_read",
        timeouts=Timeouts(startup=10, request=0.5, close_grace=2),
    )
    with reader, pytest.raises(CodexError) as timed_out:
        reader.history(record.session_id)
    assert timed_out.value.error_code == "request_timeout"
    assert "thread/read" in str(timed_out.value)
    # The reader app-server was closed and unregistered; no state changed.
    spawned = fake_codex.app_servers()[-1]
    assert not psutil.pid_exists(spawned["pid"]) or (
        psutil.Process(spawned["pid"]).status() == psutil.STATUS_ZOMBIE
    )
    assert list((state.root / "registry" / "app-servers").glob("*.json")) == []
    assert {p: p.read_bytes() for p in state.root.rglob("*.json")} == before


def test_crash_mid_turn_leaves_a_resumable_session(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "crash_mid_turn") as c:
        record = c.open_session("g", tmp_path)
        result = c.submit_turn(record.session_id, "hi")
        assert record.session_id not in c._warm  # the dead process was dropped
    assert (result.turn.status, result.turn.error_code) == ("interrupted", "app_server_exited")
    assert result.session.status == "ready"
    assert result.session.upstream_thread_id == record.upstream_thread_id
    # The next submit (a healthy codex) resumes the same thread.
    with controller(tmp_path, home, fake_codex, "ok") as c:
        again = c.submit_turn(record.session_id, "again")
    assert again.turn.status == "completed"
    assert fake_codex.app_servers()[-1]["argv"] == ["app-server", "--listen", "stdio://"]


def test_missing_binary_is_a_gate(tmp_path: Path, home: Path) -> None:
    c = ChatController(
        store=SessionStore(tmp_path / "state"),
        environ={"PATH": str(tmp_path), "LOOPX_CHAT_CODEX_HOME": str(home)},
        cwd=tmp_path,
        codex_bin="codex-does-not-exist",
    )
    with c, pytest.raises(CodexError) as info:
        c.open_session("g", tmp_path)
    assert info.value.error_code == "host_tool_unavailable"
    assert info.value.gate is not None and "Codex" in info.value.gate.summary
    # Refused before any real work: not even a controller_started metrics event.
    assert not (tmp_path / "state" / "events" / "control.jsonl").exists()


def test_host_reporting_another_home_is_refused(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "home_mismatch") as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    assert info.value.error_code == "codex_home_host_mismatch"
    assert SessionStore(tmp_path / "state").list().sessions == ()


def test_server_requests_are_declined_so_turns_finish(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "approval") as c:
        record = c.open_session("g", tmp_path)
        result = c.submit_turn(record.session_id, "hi")
    assert result.turn.status == "completed"
    decisions = [e["approval_decision"] for e in fake_codex.entries() if "approval_decision" in e]
    assert decisions == ["decline"]


def test_early_exit_is_reported(tmp_path: Path, home: Path, fake_codex: FakeCodex) -> None:
    with controller(tmp_path, home, fake_codex, "exit_early") as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    assert info.value.error_code == "app_server_exited"


def test_upstream_active_writer_maps_to_thread_busy(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex) as c:
        record = c.open_session("g", tmp_path)
    with controller(tmp_path, home, fake_codex, "active_writer") as c:
        with pytest.raises(CodexError) as info:
            c.submit_turn(record.session_id, "hi")
    assert info.value.error_code == "thread_busy"
    assert info.value.gate is not None
    assert SessionStore(tmp_path / "state").list_turns(record.session_id) == []


def test_wrapper_resolves_to_the_native_binary(tmp_path: Path) -> None:
    import platform
    import sys

    from loopx_chat.codex.binary import _PLATFORM_PACKAGES

    key = (sys.platform, platform.machine().lower())
    if key not in _PLATFORM_PACKAGES:
        pytest.fail(f"no platform package known for {key}")
    package, triple = _PLATFORM_PACKAGES[key]
    modules = tmp_path / "node_modules"
    wrapper = modules / "@openai" / "codex" / "bin" / "codex.js"
    native = modules / "@openai" / package / "vendor" / triple / "bin" / "codex"
    for path in (wrapper, native):
        path.parent.mkdir(parents=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    link_dir = modules / ".bin"
    link_dir.mkdir()
    (link_dir / "codex").symlink_to(wrapper)
    found = find_codex(str(link_dir / "codex"), {"PATH": ""})
    assert found.path == native and found.via_npm_wrapper
    assert native_binary_for_wrapper(tmp_path / "other.js") is None
    via_path = find_codex(None, {"PATH": str(link_dir)})
    assert via_path.path == native


def test_warm_app_server_closes_after_idle_period(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    import psutil

    c = controller(tmp_path, home, fake_codex, idle_close_sec=0.3)
    with c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "hi")
        pid = c.warm_pids()[record.session_id]
        assert psutil.pid_exists(pid)
        psutil.Process(pid).wait(timeout=10)  # closed by the idle timer, not by us
        assert c.warm_pids() == {}
        # The next turn resumes the same thread in a new process.
        again = c.submit_turn(record.session_id, "again")
    assert again.turn.status == "completed"
    assert [e["argv"][0] for e in fake_codex.app_servers()] == ["app-server", "app-server"]


def test_open_resume_latest_reuses_the_goal_session(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex) as c:
        first = c.open_session("goal-x", tmp_path)
        c.submit_turn(first.session_id, "hi")
    with controller(tmp_path, home, fake_codex) as c:
        again = c.open_session("goal-x", tmp_path, mode="resume_latest")
        other = c.open_session("goal-y", tmp_path, mode="resume_latest")
    assert again.session_id == first.session_id
    assert other.session_id != first.session_id and other.goal_id == "goal-y"

"""The codex adapter and controller against faults on demand.

Faults that need no real process run on the in-process scripted host
(tests/helpers/fakes/scripted_host.py, through the adapter's `connect` seam): it replays the
recorded transcripts, and records every host started and every message it received. Faults of
a real process (its argv and environment, pipes, exits, a catalog run) use the subprocess fake
(tests/helpers/fakes/fake_codex.py), which logs every invocation (argv, CODEX_HOME, cwd), so those
tests assert exactly how processes were spawned, retried or not spawned at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from loopx_chat.codex.app_server import child_environment
from loopx_chat.codex.binary import codex_version, find_codex, native_binary_for_wrapper
from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig, TurnResult
from loopx_chat.controller.home_ownership import AppServerRegistry
from loopx_chat.controller.turn_ledger import TurnLedger
from loopx_chat.controller.warm_threads import WarmThreads
from loopx_chat.errors import CodexError, LoopxChatError, StateError
from loopx_chat.state.session_records import SessionRecord, TurnRecord
from loopx_chat.state.session_store import SessionStore
from tests.helpers.fakes import FakeCodex, Scripted
from tests.helpers.fakes.replay import Answer, recorded_reply
from tests.helpers.fakes.scripted_host import Script
from tests.helpers.waiting import run_in_thread, wait_for


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "bound"
    path.mkdir()
    return path.resolve()


# Quick enough for tests: a silent turn is given up after 0.6 s.
TEST_TIMEOUTS = Timeouts(startup=10, request=10, idle=0.6, hard=30, close_grace=2)


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
        timeouts=timeouts or TEST_TIMEOUTS,
        warm_idle_close_sec=idle_close_sec,
    )
    return ChatController(
        store=SessionStore(tmp_path / "state"),
        environ=env,
        cwd=tmp_path,
        codex_bin=str(fake.bin),
        config=config,
    )


def scripted_controller(
    tmp_path: Path,
    home: Path,
    scripted: Scripted,
    script: Script | None = None,
    *,
    idle_close_sec: float = 180.0,
    timeouts: Timeouts | None = None,
) -> ChatController:
    """A controller whose app-servers are scripted hosts; what it names as codex never runs."""
    config = ControllerConfig(
        timeouts=timeouts or TEST_TIMEOUTS, warm_idle_close_sec=idle_close_sec
    )
    return scripted.controller(tmp_path, home, script, config)


HANG = Script(answers={"turn/start": Answer("steer", "turn/start")})  # active until interrupted


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
    with controller(tmp_path, home, fake_codex, "catalog_legacy") as c:
        record = c.open_session("g", tmp_path)
        assert c.submit_turn(record.session_id, "hi").turn.status == "completed"
    first, second = fake_codex.app_servers()
    assert first["codex_home"] == second["codex_home"] == str(home)
    assert not any(a.startswith("model_catalog_json=") for a in first["argv"])
    [given] = [a for a in second["argv"] if a.startswith("model_catalog_json=")]
    (debug,) = fake_codex.debug_model_runs()
    assert debug["codex_home"] != str(home)  # a throwaway home, never the user's
    assert not os.path.exists(debug["codex_home"])
    # The temp catalog codex was given is removed (this run's own file: another suite on the
    # machine may hold one of its own in the same temp dir meanwhile).
    catalog = json.loads(given.split("=", 1)[1])
    assert os.path.basename(catalog).startswith("loopx-chat-model-catalog-")
    assert not os.path.exists(catalog)


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
    assert err.remedy is not None and "compatible model catalog" in err.remedy.summary
    assert "legacy override" in err.remedy.next_action
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
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    refusal = Script(answers={"thread/start": Answer("errors", "thread/start", 1)})
    with scripted_controller(tmp_path, home, scripted, refusal) as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    assert info.value.error_code == "app_server_rejected"
    assert "rejected thread/start" in info.value.message
    assert "experimentalApi" not in info.value.message  # upstream text is not echoed
    assert [h.closed_by_client for h in scripted.codex.hosts] == [True]
    assert scripted.spawned() == []  # no `debug models` for a catalog retry


def test_config_error_is_classified(tmp_path: Path, home: Path, scripted: Scripted) -> None:
    config_invalid = Script.replaying("config_invalid", "initialize", "thread/start")
    with scripted_controller(tmp_path, home, scripted, config_invalid) as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    assert info.value.error_code == "codex_config_invalid"
    assert scripted.spawned() == [] and len(scripted.codex.hosts) == 1
    assert SessionStore(tmp_path / "state").list().sessions == ()


def test_garbage_stdout_lines_are_skipped(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "garbage") as c:
        record = c.open_session("g", tmp_path)
        deltas: list[str] = []
        result = c.submit_turn(record.session_id, "hi", on_delta=deltas.append)
    assert result.turn.status == "completed"
    assert "".join(deltas) == recorded_reply()
    log = (
        SessionStore(tmp_path / "state").session_dir(record.session_id)
    ) / "app-server.stderr.log"
    # Each skipped line is noted in the log (by size and reason), the response whose id is
    # a list included.
    assert log.read_text().count("[loopx-chat] skipped ") >= 4
    assert "skipped a non-JSON stdout line" in log.read_text()
    assert "not json at all" not in log.read_text()  # sizes only, never content


def test_hang_hits_the_idle_timeout_and_interrupts(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(tmp_path, home, scripted, HANG) as c:
        record = c.open_session("g", tmp_path)
        result = c.submit_turn(record.session_id, "hi")
    assert (result.turn.status, result.turn.error_code) == ("interrupted", "idle_timeout")
    assert result.session.status == "ready" and result.session.active_turn_id is None
    assert result.session.last_error_code == "idle_timeout"


def test_a_history_read_that_never_answers_times_out_and_leaves_nothing_running(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "hi")
    state = SessionStore(tmp_path / "state")
    before = {p: p.read_bytes() for p in state.root.rglob("*.json")}
    reader = scripted_controller(
        tmp_path,
        home,
        scripted,
        Script(silent=frozenset({"thread/read"})),
        timeouts=replace(TEST_TIMEOUTS, request=0.5, idle=180),
    )
    with reader, pytest.raises(CodexError) as timed_out:
        reader.history(record.session_id)
    assert timed_out.value.error_code == "request_timeout"
    assert "thread/read" in str(timed_out.value)
    # The reader app-server loaded no thread, was closed and unregistered; no state changed.
    spawned = scripted.codex.hosts[-1]
    assert [m["method"] for m in spawned.received] == ["initialize", "initialized", "thread/read"]
    assert spawned.closed_by_client
    assert list((state.root / "registry" / "app-servers").glob("*.json")) == []
    assert {p: p.read_bytes() for p in state.root.rglob("*.json")} == before


def test_crash_mid_turn_leaves_a_resumable_session(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    with controller(tmp_path, home, fake_codex, "crash_mid_turn") as c:
        record = c.open_session("g", tmp_path)
        result = c.submit_turn(record.session_id, "hi")
        assert c._warm.get(record.session_id) is None  # the dead process was dropped
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
    assert info.value.remedy is not None and "Codex" in info.value.remedy.summary
    # Refused before any real work: not even a controller_started metrics event.
    assert not (tmp_path / "state" / "events" / "control.jsonl").exists()


def test_host_reporting_another_home_is_refused(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    # What codex answers when a wrapper changed its CODEX_HOME on the way.
    with scripted_controller(tmp_path, home, scripted, Script(reported_home="/else")) as c:
        with pytest.raises(CodexError) as info:
            c.open_session("g", tmp_path)
    assert info.value.error_code == "codex_home_host_mismatch"
    assert SessionStore(tmp_path / "state").list().sessions == ()
    assert [h.closed_by_client for h in scripted.codex.hosts] == [True]


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
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
    busy = Script.replaying("busy_thread", "initialize", "thread/resume")
    with scripted_controller(tmp_path, home, scripted, busy) as c:
        with pytest.raises(CodexError) as info:
            c.submit_turn(record.session_id, "hi")
    assert info.value.error_code == "thread_busy"
    assert info.value.remedy is not None
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
    assert found.path == native
    assert native_binary_for_wrapper(tmp_path / "other.js") is None
    via_path = find_codex(None, {"PATH": str(link_dir)})
    assert via_path.path == native


def test_warm_app_server_closes_after_idle_period(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    c = scripted_controller(tmp_path, home, scripted, idle_close_sec=0.3)
    with c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "hi")
        (first,) = scripted.codex.hosts
        assert c.warm_pids() == {record.session_id: first.pid}
        wait_for(lambda: first.closed_by_client, 10)  # closed by the idle timer, not by us
        wait_for(lambda: c.warm_pids() == {}, 10)
        # The next turn resumes the same thread in a new process.
        again = c.submit_turn(record.session_id, "again")
    assert again.turn.status == "completed"
    (resumed,) = scripted.codex.requests("thread/resume")
    assert resumed["params"]["threadId"] == record.upstream_thread_id
    assert len(scripted.codex.hosts) == 2


def test_open_resume_latest_reuses_the_goal_session(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(tmp_path, home, scripted) as c:
        first = c.open_session("goal-x", tmp_path)
        c.submit_turn(first.session_id, "hi")
    with scripted_controller(tmp_path, home, scripted) as c:
        again = c.open_session("goal-x", tmp_path, mode="resume_latest")
        other = c.open_session("goal-y", tmp_path, mode="resume_latest")
    assert again.session_id == first.session_id
    assert other.session_id != first.session_id and other.goal_id == "goal-y"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_turn_start_that_never_answers_is_request_timeout(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(
        tmp_path,
        home,
        scripted,
        Script(silent=frozenset({"turn/start"})),
        timeouts=replace(TEST_TIMEOUTS, request=0.5, idle=5),
    ) as c:
        record = c.open_session("g", tmp_path)
        with pytest.raises(CodexError) as timed_out:
            c.submit_turn(record.session_id, "hi")
    assert timed_out.value.error_code == "request_timeout"
    session = SessionStore(tmp_path / "state").load(record.session_id)
    assert session.active_turn_id is None and session.last_error_code == "request_timeout"


def test_an_opened_or_errored_thread_is_still_closed_when_idle(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(
        tmp_path,
        home,
        scripted,
        Script(silent=frozenset({"thread/read"})),
        idle_close_sec=1.0,
        timeouts=replace(TEST_TIMEOUTS, request=0.5),
    ) as c:
        record = c.open_session("g", tmp_path)  # no turn: it must not be kept forever
        wait_for(lambda: c.warm_pids() == {}, 10)
        assert scripted.codex.hosts[0].closed_by_client
        # A request that failed on a loaded thread does not keep it either.
        c.resume_session(record.session_id)
        with pytest.raises(CodexError):
            c.history(record.session_id)  # read through the loaded thread: never answered
        assert c.warm_pids() == {record.session_id: scripted.codex.hosts[1].pid}
        wait_for(lambda: c.warm_pids() == {}, 10)
        assert scripted.codex.hosts[1].closed_by_client


def test_a_session_of_another_agent_is_never_driven(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    store = SessionStore(tmp_path / "state")
    now = store.now()
    store.create(
        SessionRecord(
            session_id="a" * 32,
            goal_id="g",
            created_at=now,
            updated_at=now,
            agent_id="claude",
            upstream_thread_id="01a22654-8805-7283-882f-6664d5224a44",
        )
    )
    with scripted_controller(tmp_path, home, scripted) as c:
        for action in (
            lambda: c.submit_turn("a" * 32, "hi"),
            lambda: c.resume_session("a" * 32),
            lambda: c.history("a" * 32),
        ):
            with pytest.raises(LoopxChatError) as refused:
                action()
            assert refused.value.error_code == "agent_unsupported"
    assert scripted.codex.hosts == [] and scripted.spawned() == []


def test_an_app_server_that_cannot_be_registered_is_closed(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    (tmp_path / "state" / "registry").mkdir(parents=True)
    (tmp_path / "state" / "registry" / "app-servers").write_text("not a folder")
    c = scripted_controller(tmp_path, home, scripted)
    with c, pytest.raises(LoopxChatError) as failed:
        c.open_session("g", tmp_path)
    assert failed.value.error_code == "state_unwritable"  # one line in the CLI, no traceback
    (spawned,) = scripted.codex.hosts
    assert spawned.closed_by_client


def test_a_thread_loaded_after_shutdown_began_is_let_go(tmp_path: Path) -> None:
    closed: list[str] = []

    class _Proc:
        pid = 424242

    class _Thread:
        proc = _Proc()

        def close(self) -> None:
            closed.append("thread")

    class _Lock:
        def release(self) -> None:
            closed.append("lock")

    warm = WarmThreads(
        idle_close_sec=60,
        registry=AppServerRegistry(tmp_path),
        quiesce_requested=lambda: False,
    )
    warm.close(grace=0)
    with pytest.raises(CodexError) as stopping:
        warm.add("s", _Thread(), _Lock())  # type: ignore[arg-type]
    assert stopping.value.error_code == "controller_stopped"
    assert closed == ["thread", "lock"] and warm.get("s") is None


def test_codex_version_and_child_environment_use_the_pinned_home(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    ambient = tmp_path / "ambient-home"
    env = {"PATH": os.environ["PATH"], "CODEX_HOME": str(ambient), "RUST_LOG": "trace"}
    binary = find_codex(str(fake_codex.bin), env)
    assert codex_version(binary, {**env, **fake_codex.env()}, home) is not None
    assert fake_codex.entries()[-1]["codex_home"] == str(home)
    # Codex's trace logs copy prompts into the stderr log we keep: never inherited.
    child = child_environment(env, home)
    assert (child["CODEX_HOME"], child["RUST_LOG"]) == (str(home), "warn")


def test_a_turn_the_caller_gave_up_on_never_runs(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
        with pytest.raises(CodexError) as gave_up:
            c.submit_turn(record.session_id, "too late", may_start=lambda: False)
        assert gave_up.value.error_code == "turn_not_accepted"
        assert SessionStore(tmp_path / "state").list_turns(record.session_id) == []
        assert scripted.codex.requests("turn/start") == []  # nothing was sent upstream
        ran = c.submit_turn(record.session_id, "in time", may_start=lambda: True)
    assert ran.turn.status == "completed"


def test_the_service_worker_either_starts_the_turn_or_gives_it_up() -> None:
    from loopx_chat.service.app import _Worker

    late = _Worker()
    assert late.give_up() is True
    assert late.may_start() is False  # the 504 was sent: the turn must not run
    started = _Worker()
    assert started.may_start() is True
    assert started.give_up() is False  # it runs: the request waits for its acceptance


def test_an_app_server_that_stops_reading_never_blocks_a_turn_or_shutdown(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    c = controller(
        tmp_path,
        home,
        fake_codex,
        "stop_reading",
        timeouts=replace(TEST_TIMEOUTS, request=1, idle=5, close_grace=1),
    )
    record = c.open_session("g", tmp_path)
    pid = c.warm_pids()[record.session_id]
    with pytest.raises(CodexError) as stuck:
        c.submit_turn(record.session_id, "x" * 2_000_000)  # far more than a pipe holds
    assert stuck.value.error_code == "request_timeout"
    c.close()  # returns: it no longer waits on the stuck write
    wait_for(lambda: not _alive(pid))


def test_a_slow_start_elsewhere_is_waited_for_not_taken_for_an_exclusive_hold(
    tmp_path: Path, home: Path, scripted: Scripted, fake_codex: FakeCodex
) -> None:
    slow = scripted_controller(tmp_path, home, scripted, Script(delays={"initialize": 3.0}))
    quick = controller(tmp_path, home, fake_codex)
    with slow, quick:
        thread, box = run_in_thread(lambda: slow.open_session("g-slow", tmp_path))
        # Its app-server is started under the spawn guard and now sits in initialize.
        wait_for(lambda: len(scripted.codex.requests("initialize")) == 1)
        opened = quick.open_session("g-quick", tmp_path)
        thread.join(timeout=30)
    assert opened.goal_id == "g-quick"
    assert box.get("result") is not None, box


def test_steering_a_running_turn_and_retrying_the_steer(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(
        tmp_path,
        home,
        scripted,
        HANG,
        timeouts=replace(TEST_TIMEOUTS, idle=30, hard=60),
    ) as c:
        record = c.open_session("g", tmp_path)
        thread, box = run_in_thread(lambda: c.submit_turn(record.session_id, "first"))
        store = SessionStore(tmp_path / "state")
        wait_for(lambda: store.load(record.session_id).active_turn_id is not None)
        wait_for(lambda: len(scripted.codex.requests("turn/start")) == 1)
        running = store.load(record.session_id).active_turn_id
        steered = c.submit_turn(record.session_id, "and also", client_turn_id="steer-1")
        again = c.submit_turn(record.session_id, "and also", client_turn_id="steer-1")
        c.interrupt_turn(record.session_id)
        thread.join(timeout=30)
    assert (steered.created, steered.turn.turn_id, steered.turn.steered) == (False, running, True)
    assert (again.created, again.turn.turn_id) == (False, running)
    starts = [m["params"]["input"][0]["text"] for m in scripted.codex.requests("turn/start")]
    assert starts == ["first", "and also"]  # the retry of the steer sent nothing again
    assert isinstance(box.get("result"), TurnResult), box


def test_a_steer_that_arrives_as_the_turn_ends_never_leaves_a_turn_unwatched(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    # Codex has finished the turn, our loop has not yet noticed: codex starts a new turn.
    with scripted_controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "first")
        warm = c._warm.get(record.session_id)
        assert warm is not None
        warm.running_turn_id = "still-ours"  # the moment before the loop's bookkeeping
        with pytest.raises(CodexError) as late:
            c.submit_turn(record.session_id, "late steer")
        warm.running_turn_id = None
        assert late.value.error_code == "turn_not_active"
        assert warm.thread.active_turn_id is None  # the stray turn was interrupted and let go
        after = c.submit_turn(record.session_id, "next")
    assert after.turn.status == "completed" and after.created


def test_a_turn_whose_running_record_the_disk_refuses_is_not_left_running_in_codex(
    tmp_path: Path, home: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running record is written while codex answers `turn/start`: when it cannot be,
    the turn codex started is stopped, and the state is as it was."""
    save_turn = SessionStore.save_turn

    def full(self: SessionStore, turn: TurnRecord, *, durable: bool = True) -> TurnRecord:
        if turn.status == "running":
            raise StateError("no space left on the device", error_code="state_unwritable")
        return save_turn(self, turn, durable=durable)

    with scripted_controller(tmp_path, home, scripted, HANG) as c:
        record = c.open_session("g", tmp_path)
        monkeypatch.setattr(SessionStore, "save_turn", full)
        with pytest.raises(LoopxChatError) as refused:
            c.submit_turn(record.session_id, "hi")
        monkeypatch.undo()
        warm = c._warm.get(record.session_id)
        assert warm is None or warm.thread.active_turn_id is None
    assert refused.value.error_code == "state_unwritable"
    started = [m["params"]["threadId"] for m in scripted.codex.requests("turn/start")]
    stopped = [m["params"]["threadId"] for m in scripted.codex.requests("turn/interrupt")]
    assert len(set(stopped)) >= len(started)  # every turn codex started was stopped
    store = SessionStore(tmp_path / "state")
    after = store.load(record.session_id)
    assert (after.status, after.active_turn_id, after.turn_count) == ("ready", None, 0)
    assert store.list_turns(record.session_id) == []


def test_interrupting_a_turn_a_dead_controller_left_settles_it_while_we_hold_the_thread(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    with scripted_controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", tmp_path)  # we hold the thread's writer lock
        orphan = c.turns.begin(c.turns.draft(record.session_id, None))  # a crashed one left it
        settled = c.interrupt_turn(record.session_id)
    assert (settled.turn_id, settled.status) == (orphan.turn_id, "interrupted")
    assert scripted.codex.requests("turn/interrupt") == []  # nothing upstream to interrupt
    assert not (tmp_path / "state" / "sessions" / record.session_id / "interrupt.request").exists()


def test_a_stdout_line_past_the_limit_ends_the_app_server_with_a_protocol_error(
    tmp_path: Path, home: Path, fake_codex: FakeCodex
) -> None:
    import resource

    from loopx_chat.codex.app_server import MAX_LINE_BYTES

    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with controller(tmp_path, home, fake_codex, "endless_line") as c:
        with pytest.raises(CodexError) as at_start:
            c.open_session("g", tmp_path)
    assert at_start.value.error_code == "app_server_protocol"
    assert at_start.value.remedy is not None
    (first,) = fake_codex.app_servers()
    wait_for(lambda: not _alive(first["pid"]))
    with controller(tmp_path, home, fake_codex, "endless_line_mid_turn") as c:
        record = c.open_session("g", tmp_path)
        pid = c.warm_pids()[record.session_id]
        result = c.submit_turn(record.session_id, "hi")
        assert c.warm_pids() == {}  # the broken app-server is let go
        wait_for(lambda: not _alive(pid))
    assert (result.turn.status, result.turn.error_code) == ("interrupted", "app_server_protocol")
    assert result.session.active_turn_id is None
    # Bounded: at most a few copies of one capped line, never the endless stream.
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert peak_after - peak_before < 4 * MAX_LINE_BYTES
    log = SessionStore(tmp_path / "state").session_dir(record.session_id) / "app-server.stderr.log"
    assert f"longer than {MAX_LINE_BYTES} bytes" in log.read_text()


def test_a_session_whose_work_dir_was_deleted_says_so_and_spawns_nothing(
    tmp_path: Path, home: Path, scripted: Scripted
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with scripted_controller(tmp_path, home, scripted) as c:
        record = c.open_session("g", work)
        c.submit_turn(record.session_id, "hi")
    work.rmdir()
    state = SessionStore(tmp_path / "state")
    spawned = len(scripted.codex.hosts)
    before = {p: p.read_bytes() for p in state.root.rglob("*") if p.is_file()}
    with scripted_controller(tmp_path, home, scripted) as c:
        for action in (
            lambda: c.submit_turn(record.session_id, "again"),
            lambda: c.resume_session(record.session_id),
            lambda: c.history(record.session_id),
        ):
            with pytest.raises(CodexError) as missing:
                action()
            assert missing.value.error_code == "work_dir_missing"
            assert missing.value.remedy is not None
            assert "chat new --cwd" in missing.value.remedy.next_action
    assert len(scripted.codex.hosts) == spawned
    assert {p: p.read_bytes() for p in state.root.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("stop_after", ["turn_saved", "session_busy", "begin_returned"])
def test_a_stop_while_the_turn_is_being_recorded_never_leaves_it_running(
    tmp_path: Path,
    home: Path,
    scripted: Scripted,
    monkeypatch: pytest.MonkeyPatch,
    stop_after: str,
) -> None:
    """SIGTERM raises SystemExit wherever the main thread is; CI once caught it just after the
    turn was recorded as running and before the code that records a stop was in force."""

    class _Stop(SystemExit):
        pass

    def stop_once() -> None:
        monkeypatch.undo()
        raise _Stop(143)

    save_turn, mutate, begin = SessionStore.save_turn, SessionStore.mutate, TurnLedger.begin

    def saving(self: SessionStore, turn: TurnRecord, *, durable: bool = True) -> TurnRecord:
        saved = save_turn(self, turn, durable=durable)
        if stop_after == "turn_saved" and turn.status == "running":
            stop_once()
        return saved

    def mutating(
        self: SessionStore,
        session_id: str,
        change: Callable[[SessionRecord], SessionRecord],
        **options: bool,
    ) -> SessionRecord:
        changed = mutate(self, session_id, change, **options)
        if stop_after == "session_busy" and changed.active_turn_id:
            stop_once()
        return changed

    def beginning(self: TurnLedger, draft: TurnRecord) -> TurnRecord:
        turn = begin(self, draft)
        if stop_after == "begin_returned":
            stop_once()
        return turn

    with scripted_controller(tmp_path, home, scripted, HANG) as c:
        record = c.open_session("g", tmp_path)
        monkeypatch.setattr(SessionStore, "save_turn", saving)
        monkeypatch.setattr(SessionStore, "mutate", mutating)
        monkeypatch.setattr(TurnLedger, "begin", beginning)
        with pytest.raises(_Stop):
            c.submit_turn(record.session_id, "hi")
    store = SessionStore(tmp_path / "state")
    session = store.load(record.session_id)
    assert (session.status, session.active_turn_id) == ("ready", None)
    turns = store.list_turns(record.session_id)
    assert [(t.status, t.error_code) for t in turns] == [("interrupted", "controller_stopped")]


def test_the_interrupt_marker_is_looked_for_at_most_every_check_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stat before every notification was a measurable share of a turn's own cost."""
    from loopx_chat.controller import chat_controller

    clock = [100.0]
    looked: list[str] = []
    exists = os.path.exists
    monkeypatch.setattr(chat_controller.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(
        chat_controller.os.path, "exists", lambda p: looked.append(str(p)) or exists(p)
    )
    marker = tmp_path / "interrupt.request"
    watch = chat_controller._MarkerWatch(marker)
    assert not watch.present() and looked == [str(marker)]
    marker.write_text("turn")
    clock[0] += chat_controller.MARKER_CHECK_SEC * 0.98
    assert not watch.present() and len(looked) == 1
    clock[0] += chat_controller.MARKER_CHECK_SEC * 0.04
    assert watch.present() and len(looked) == 2
    marker.unlink()  # the turn's own cleanup; the interrupt was already asked for
    clock[0] += 1
    assert watch.present() and len(looked) == 2

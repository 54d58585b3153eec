"""The controller against the pinned real `codex app-server` and the loopback model mock.

These need the codex that `make test` installs; under CI they fail (never skip) without it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.app_server import AppServerProcess, RpcError, child_environment
from loopx_chat.codex.binary import find_codex
from loopx_chat.codex.errors_map import upstream_meaning
from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig, TurnResult
from loopx_chat.errors import CodexError
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore
from tests.helpers.real_codex import make_controller, raw_app_server
from tests.helpers.waiting import run_in_thread, wait_for


def _rollouts(home: Path) -> list[Path]:
    return sorted(home.glob("sessions/**/rollout-*.jsonl"))


def _cli(
    state: Path, codex_bin: str, args: list[str], env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`loopx-chat` in a fresh process, as a user would run it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "loopx_chat",
            "--state-dir",
            str(state),
            "--codex-bin",
            codex_bin,
            *args,
        ],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _user_texts(mock: MockResponsesServer) -> list[str]:
    return [t for t in mock.requests[-1]["user_texts"] if not t.startswith("<")]


def test_turn_lands_under_the_bound_home_never_the_ambient_one(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    ambient = Path(base_env["CODEX_HOME"])
    with make_controller(tmp_path / "state", bound_home, base_env, codex_bin) as c:
        record = c.open_session("g", tmp_path)
        deltas: list[str] = []
        result = c.submit_turn(record.session_id, "hello real codex", on_delta=deltas.append)
    assert result.turn.status == "completed"
    assert "".join(deltas).startswith("mock reply #1")
    assert result.turn.tokens.total_tokens > 0
    assert record.codex_home == str(bound_home)
    (rollout,) = _rollouts(bound_home)
    assert record.upstream_thread_id in rollout.name
    assert list(ambient.iterdir()) == []
    # Owner-local state holds no transcript text.
    state_text = "".join(p.read_text() for p in (tmp_path / "state").rglob("*.json"))
    assert "hello real codex" not in state_text and "mock reply" not in state_text


def _raw_app_server(
    codex_bin: str, home: Path, tmp_path: Path, env: dict[str, str]
) -> AppServerProcess:
    return raw_app_server(codex_bin, home, tmp_path, env, tmp_path / "raw-app-server.log")


def test_initialize_reports_the_pinned_home(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    proc = _raw_app_server(codex_bin, bound_home, tmp_path, base_env)
    try:
        result = proc.request(
            "initialize", {"clientInfo": {"name": "loopx_chat", "version": "t"}}, 30
        )
    finally:
        proc.close()
    assert Path(result["codexHome"]).resolve() == bound_home


def test_new_process_resumes_and_second_turn_sees_the_first(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
) -> None:
    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "remember the word canary-teal")
    done = _cli(
        state,
        codex_bin,
        ["chat", "send", record.session_id, "--json", "what was the word?"],
        {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["thread_id"] == record.upstream_thread_id
    assert doc["turn"]["status"] == "completed"
    assert _user_texts(mock) == ["remember the word canary-teal", "what was the word?"]
    assert len(_rollouts(bound_home)) == 1
    assert SessionStore(state).load(record.session_id).turn_count == 2


def test_mismatched_home_spawns_nothing_and_changes_nothing(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "first")
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    before = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    done = _cli(
        state,
        codex_bin,
        ["chat", "send", record.session_id, "--json", "must not run"],
        {**base_env, "LOOPX_CHAT_CODEX_HOME": str(other_home)},
    )
    assert done.returncode == 1
    assert json.loads(done.stdout)["error_code"] == "codex_home_mismatch"
    assert "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in state.rglob("*") if p.is_file()} == before
    assert list(other_home.iterdir()) == []


def test_two_controllers_on_one_thread(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as first:
        record = first.open_session("g", tmp_path)
        first.submit_turn(record.session_id, "one")  # thread now on disk and held warm
        # Same state dir: our own lock refuses at once, before spawning.
        with make_controller(state, bound_home, base_env, codex_bin) as second:
            with pytest.raises(CodexError) as ours:
                second.submit_turn(record.session_id, "two")
        # Another state dir (another tool): codex's writer lock refuses; same code.
        other_state = tmp_path / "state-copy"
        import shutil

        shutil.copytree(state, other_state)
        with make_controller(other_state, bound_home, base_env, codex_bin) as third:
            with pytest.raises(CodexError) as theirs:
                third.submit_turn(record.session_id, "three")
    assert ours.value.error_code == "thread_busy"
    assert theirs.value.error_code == "thread_busy"
    # Our lock knows the holder is one of ours (the service keeps threads warm); codex's
    # refusal comes from any client of the home.
    assert ours.value.remedy is not None and "loopx-chat serve" in ours.value.remedy.next_action
    assert theirs.value.remedy is not None and "serve" not in theirs.value.remedy.next_action
    assert SessionStore(state).load(record.session_id).turn_count == 1


def test_history_reads_while_another_controller_drives_the_thread(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    with make_controller(state, bound_home, base_env, codex_bin) as runner:
        record = runner.open_session("g", tmp_path)
        runner.submit_turn(record.session_id, "first question")
        # The runner holds the thread (warm), then runs a turn that does not end by itself.
        thread, box = run_in_thread(lambda: runner.submit_turn(record.session_id, "mock:hang"))
        store = SessionStore(state)
        wait_for(lambda: store.load(record.session_id).active_turn_id is not None)
        time.sleep(0.5)  # let codex write the turn's start

        with make_controller(state, bound_home, base_env, codex_bin) as reader:
            turns = reader.history(record.session_id)
        # A user in another shell, the same way.
        done = _cli(state, codex_bin, ["chat", "history", record.session_id, "--json"], env)
        # The readers took no lock: the runner's thread is still its own.
        assert record.session_id in runner.warm_pids()
        runner.interrupt_turn(record.session_id)
        thread.join(timeout=30)
        after = runner.submit_turn(record.session_id, "still mine")

    assert [t["messages"][0] for t in turns] == [
        {"role": "user", "text": "first question"},
        {"role": "user", "text": "mock:hang"},
    ]
    assert turns[0]["status"] == "completed"
    assert any(m["role"] == "agent" for m in turns[0]["messages"])
    # Codex shows the other process's running turn as interrupted; we know it is running.
    assert turns[1]["status"] == "inProgress"
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    cli_turns = json.loads(done.stdout)["turns"]
    assert [t["status"] for t in cli_turns] == ["completed", "inProgress"]
    assert isinstance(box.get("result"), TurnResult), box
    assert box["result"].turn.status == "interrupted"
    assert after.turn.status == "completed"
    # Text is read on demand and never kept.
    assert not any(b"first question" in p.read_bytes() for p in state.rglob("*") if p.is_file())


def test_interrupt_from_another_controller(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as runner:
        record = runner.open_session("g", tmp_path)
        thread, box = run_in_thread(lambda: runner.submit_turn(record.session_id, "mock:hang"))
        store = SessionStore(state)
        wait_for(lambda: store.load(record.session_id).active_turn_id is not None)
        with make_controller(state, bound_home, base_env, codex_bin) as other:
            other.interrupt_turn(record.session_id)
        thread.join(timeout=30)
    result = box.get("result")
    assert isinstance(result, TurnResult), box
    assert (result.turn.status, result.turn.error_code) == ("interrupted", None)
    assert store.load(record.session_id).active_turn_id is None


def test_an_interrupt_sent_as_the_turn_starts_stops_it_in_codex(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    """codex answers turn/start before the turn can be interrupted ("no active turn to
    interrupt"): an interrupt sent at once must be asked again, or the turn runs on until
    the model stream times out (20 s in the offline config) and ends `failed`."""
    config = ControllerConfig(timeouts=Timeouts(interrupt_settle=60))  # no local give-up
    with make_controller(tmp_path / "state", bound_home, base_env, codex_bin, config) as c:
        record = c.open_session("g", tmp_path)
        results = [
            c.submit_turn(
                record.session_id,
                "mock:hang",
                on_started=lambda _turn: c.interrupt_turn(record.session_id),
            )
            for _ in range(3)
        ]
        # The thread is free again: codex ended each turn, so a new one simply runs.
        after = c.submit_turn(record.session_id, "mock:text=still-here")
    assert [(r.turn.status, r.turn.error_code) for r in results] == [("interrupted", None)] * 3
    assert after.turn.status == "completed"


def test_sigkill_of_app_server_mid_turn_recovers_on_next_submit(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    config = ControllerConfig(timeouts=Timeouts(idle=60, hard=120))
    with make_controller(state, bound_home, base_env, codex_bin, config) as c:
        record = c.open_session("g", tmp_path)
        c.submit_turn(record.session_id, "before the crash")
        thread, box = run_in_thread(lambda: c.submit_turn(record.session_id, "mock:hang"))
        store = SessionStore(state)
        wait_for(lambda: store.load(record.session_id).active_turn_id is not None)
        pid = c.warm_pids()[record.session_id]
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        thread.join(timeout=30)
        crashed = box.get("result")
        assert isinstance(crashed, TurnResult), box
        assert (crashed.turn.status, crashed.turn.error_code) == (
            "interrupted",
            "app_server_exited",
        )
        recovered = c.submit_turn(record.session_id, "after the crash")
    assert recovered.turn.status == "completed"
    assert recovered.session.upstream_thread_id == record.upstream_thread_id
    assert recovered.session.turn_count == 3


def _old_catalog_from_debug_models(codex_bin: str, env: dict[str, str], scratch: Path) -> bytes:
    """`codex debug models` of the pinned binary with what older catalogs lacked removed."""
    scratch.mkdir()
    done = subprocess.run(
        [str(find_codex(codex_bin, env).path), "debug", "models"],
        env=child_environment(env, scratch),
        capture_output=True,
        timeout=60,
        check=True,
    )
    catalog = json.loads(done.stdout)
    assert catalog["models"], "the pinned codex printed no built-in models"
    for model in catalog["models"]:
        model.pop("base_instructions", None)
        model.pop("model_messages", None)
    return json.dumps(catalog).encode()


def _temp_catalogs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The temp catalogs this process writes from now on (named as `mkstemp` makes them):
    this run's own, whatever another suite on the machine writes in the same temp dir."""
    made: list[str] = []
    real = tempfile.mkstemp

    def recorded(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = real(*args, **kwargs)
        if os.path.basename(name).startswith("loopx-chat-model-catalog-"):
            made.append(name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", recorded)
    return made


def test_an_old_catalog_home_completes_its_turn_and_keeps_its_catalog(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog_file = bound_home / "model_catalog.json"  # the one config.toml names
    catalog_file.write_bytes(_old_catalog_from_debug_models(codex_bin, base_env, tmp_path / "s"))
    before = catalog_file.read_bytes()
    temps = _temp_catalogs(monkeypatch)
    # The real binary refuses this catalog, in words our table knows.
    probe = _raw_app_server(codex_bin, bound_home, tmp_path, base_env)
    try:
        probe.request("initialize", {"clientInfo": {"name": "t", "version": "t"}}, 30)
        with pytest.raises(RpcError) as refused:
            probe.request("thread/start", {"cwd": str(tmp_path)}, 30)
    finally:
        probe.close()
    assert upstream_meaning("thread/start", refused.value.message) == "legacy_catalog"

    with make_controller(tmp_path / "state", bound_home, base_env, codex_bin) as c:
        record = c.open_session("g", tmp_path)
        result = c.submit_turn(record.session_id, "hello with an old catalog")
    assert result.turn.status == "completed", result.turn
    assert mock.requests, "the retried app-server never reached the model"
    assert catalog_file.read_bytes() == before
    assert temps, "the retry was given no temp catalog"
    assert not [t for t in temps if os.path.exists(t)]  # each is removed


def _facts_tokens(state: Path, codex_bin: str, env: dict[str, str], thread_id: str) -> dict:
    """The thread's token totals as `loopx-chat codex facts` reads them from the rollout."""
    done = _cli(state, codex_bin, ["codex", "facts", "--json"], env)
    assert done.returncode == 0, done.stderr
    tokens = json.loads(done.stdout)["threads"][thread_id]["tokens"]
    return tokens or {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


def test_each_turns_tokens_match_the_rollout_for_completed_failed_and_interrupted_turns(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
) -> None:
    state = tmp_path / "state"
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    store = SessionStore(state)

    def interrupted(c: ChatController, session_id: str) -> TurnResult:
        asked = len(mock.requests)  # interrupted once the model was asked, not before
        thread, box = run_in_thread(lambda: c.submit_turn(session_id, "mock:hang"))
        wait_for(lambda: store.load(session_id).active_turn_id is not None)
        wait_for(lambda: len(mock.requests) > asked)
        c.interrupt_turn(session_id)
        thread.join(timeout=60)
        result = box.get("result")
        assert isinstance(result, TurnResult), box
        return result

    charged: list[tuple[str, dict[str, int]]] = []
    from_rollout: list[dict[str, int]] = []
    previous = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}

    def check(result: TurnResult, thread_id: str) -> None:
        nonlocal previous
        now = _facts_tokens(state, codex_bin, env, thread_id)
        keys = ("input_tokens", "output_tokens", "total_tokens")
        charged.append((result.turn.status, {k: getattr(result.turn.tokens, k) for k in keys}))
        from_rollout.append({k: now[k] - previous[k] for k in keys})
        previous = now

    with make_controller(state, bound_home, base_env, codex_bin) as c:
        record = c.open_session("g", tmp_path)
        sid, tid = record.session_id, record.upstream_thread_id or ""
        check(c.submit_turn(sid, "first"), tid)
        check(c.submit_turn(sid, "mock:fail"), tid)
        check(interrupted(c, sid), tid)
        check(c.submit_turn(sid, "second"), tid)
    # A fresh controller resumes the thread (codex reports the old total on resume).
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        check(interrupted(c, sid), tid)
        check(c.submit_turn(sid, "third"), tid)

    assert [status for status, _ in charged] == [
        "completed",
        "failed",
        "interrupted",
        "completed",
        "interrupted",
        "completed",
    ]
    assert [tokens for _, tokens in charged] == from_rollout
    assert charged[0][1]["total_tokens"] > 0 and charged[3][1]["total_tokens"] > 0
    # Interrupted and failed turns that never got an answer cost nothing.
    assert charged[1][1]["total_tokens"] == charged[2][1]["total_tokens"] == 0


def test_a_one_mib_message_from_stdin_and_from_a_file(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
) -> None:
    state = tmp_path / "state"
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    # Far over what one argv string may hold (MAX_ARG_STRLEN is 128 KiB on Linux).
    line = "the quick brown fox jumps over the lazy dog. "
    piped = (line * (((1 << 20) // len(line)) + 1))[: 1 << 20]
    created = _cli(state, codex_bin, ["chat", "new", "--goal", "g", "--json", "-"], env, piped)
    assert created.returncode == 0, created.stderr
    doc = json.loads(created.stdout)
    assert doc["turn"]["status"] == "completed"
    assert _user_texts(mock)[-1] == piped
    from_file = tmp_path / "message.txt"
    written = "ünïcode " + piped[: (1 << 20) - 20]
    from_file.write_text(written, encoding="utf-8")
    sent = _cli(
        state,
        codex_bin,
        ["chat", "send", doc["session_id"], "--json", "--file", str(from_file)],
        env,
    )
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["turn"]["status"] == "completed"
    assert _user_texts(mock)[-1] == written

"""The `chat` command group through click's CliRunner and as a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.state.session_store import SessionStore
from tests.helpers.fakes import FakeCodex
from tests.helpers.fakes.replay import recorded_reply, recorded_turn_tokens


def _invoke(tmp_path: Path, fake: FakeCodex, home: Path, args: list[str], scenario: str = "ok"):  # type: ignore[no-untyped-def]
    env = {"LOOPX_CHAT_CODEX_HOME": str(home), **fake.env(scenario)}
    base = ["--state-dir", str(tmp_path / "state"), "--codex-bin", str(fake.bin)]
    return CliRunner().invoke(main, [*base, *args], env=env)


class Invoke:
    """The CLI in process on one state dir, run directly or through a live `serve` (started
    on first use with the same fake codex and scenario): the same tests, both ways."""

    def __init__(self, mode: str, tmp_path: Path, fake: FakeCodex, start_service: Any) -> None:
        self.mode, self.tmp_path, self.fake, self.start_service = (
            mode,
            tmp_path,
            fake,
            start_service,
        )
        self.service: Any = None
        self.scenario: str | None = None
        self.posts = 0

    def __call__(self, home: Path, args: list[str], scenario: str = "ok") -> Any:
        env = {"LOOPX_CHAT_CODEX_HOME": str(home), **self.fake.env(scenario)}
        state = self.tmp_path / "state"
        if self.mode == "served" and self.scenario != scenario:
            if self.service is not None:
                self.service.stop()
            self.service = self.start_service(
                state, home, {**os.environ, **env}, str(self.fake.bin)
            )
            self.scenario, self.posts = scenario, 0
        base = ["--state-dir", str(state), "--codex-bin", str(self.fake.bin)]
        result = CliRunner().invoke(main, [*base, *args], env=env)
        assert "not using the service" not in result.stderr
        return result

    def ran_where(self) -> str:
        """Where the commands since the last call ran: `served` when the service logged a
        POST for them, else `direct`."""
        if self.service is None:
            return "direct"
        posts = len([line for line in self.service.served() if " POST " in line])
        new, self.posts = posts - self.posts, posts
        return "served" if new else "direct"


@pytest.fixture(params=["direct", "served"])
def invoke(
    request: pytest.FixtureRequest, tmp_path: Path, fake_codex: FakeCodex, start_service: Any
) -> Invoke:
    return Invoke(request.param, tmp_path, fake_codex, start_service)


def test_chat_new_json_is_one_document(
    tmp_path: Path, fake_codex: FakeCodex, invoke: Invoke
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = invoke(home, ["chat", "new", "--goal", "g1", "--json", "hi"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["session_id"] and doc["thread_id"]
    assert doc["turn"]["status"] == "completed"
    assert doc["turn"]["total_tokens"] == recorded_turn_tokens()
    assert recorded_reply() not in result.stdout  # JSON mode does not echo agent text
    assert invoke.ran_where() == invoke.mode


def test_chat_send_streams_text_and_retry_is_not_rerun(
    tmp_path: Path, fake_codex: FakeCodex, invoke: Invoke
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    created = invoke(home, ["chat", "new", "--goal", "g", "--json", "hi"])
    sid = json.loads(created.stdout)["session_id"]
    send = ["chat", "send", sid, "--client-turn-id", "retry-1", "again"]
    first = invoke(home, send)
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == recorded_reply().strip()
    assert "completed" in first.stderr
    second = invoke(home, send)
    assert second.exit_code == 0
    assert "already submitted" in second.stderr and second.stdout == ""
    assert SessionStore(tmp_path / "state").load(sid).turn_count == 2
    assert invoke.ran_where() == invoke.mode


def test_failed_turn_exits_non_zero_with_code(
    tmp_path: Path, fake_codex: FakeCodex, invoke: Invoke
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = invoke(home, ["chat", "new", "--goal", "g", "--json", "hi"], "crash_mid_turn")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert (doc["ok"], doc["error_code"], doc["turn"]["status"]) == (
        False,
        "app_server_exited",
        "interrupted",
    )
    assert invoke.ran_where() == invoke.mode


def test_missing_codex_is_a_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = CliRunner().invoke(
        main,
        [
            *("--state-dir", str(tmp_path / "s"), "--codex-bin", str(tmp_path / "nope")),
            *("chat", "new", "--goal", "g", "hi"),
        ],
        env={"LOOPX_CHAT_CODEX_HOME": str(home)},
    )
    assert result.exit_code == 1
    assert "host_tool_unavailable" in result.stderr and "Install the Codex CLI" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_interrupt_without_active_turn(
    tmp_path: Path, fake_codex: FakeCodex, invoke: Invoke
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    created = invoke(home, ["chat", "new", "--goal", "g", "--json", "hi"])
    sid = json.loads(created.stdout)["session_id"]
    result = invoke(home, ["chat", "interrupt", sid, "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error_code"] == "turn_not_active"
    assert invoke.ran_where() == invoke.mode


def test_sigterm_mid_turn_records_interrupted_and_leaves_no_app_server(
    tmp_path: Path, fake_codex: FakeCodex
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    state = tmp_path / "state"
    env = {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home), **fake_codex.env("hang_turn")}
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
            *("--codex-bin", str(fake_codex.bin)),
            *("chat", "new", "--goal", "g", "--json", "hang please"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    store = SessionStore(state)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        sessions = store.list().sessions
        if sessions and sessions[0].active_turn_id:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError("turn never started")
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children, "the app-server should be running"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert b"Traceback" not in err
    (session,) = store.list().sessions
    (turn,) = store.list_turns(session.session_id)
    assert (turn.status, turn.error_code) == ("interrupted", "controller_stopped")
    assert session.active_turn_id is None and session.status == "ready"
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []


def _state_files(state: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in state.rglob("*") if p.is_file()} if state.exists() else {}


def test_an_empty_or_unreadable_message_runs_nothing(
    tmp_path: Path, fake_codex: FakeCodex, invoke: Invoke
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    created = invoke(home, ["chat", "new", "--goal", "g", "--json", "hi"])
    sid = json.loads(created.stdout)["session_id"]
    spawned = len(fake_codex.app_servers())
    before = _state_files(tmp_path / "state")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9".encode("latin-1"))
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t\n")
    cases: list[tuple[list[str], str | None]] = []
    for verb in (["chat", "new", "--goal", "g2"], ["chat", "send", sid]):
        cases += [
            ([*verb, ""], None),
            ([*verb, "   \n\t"], None),
            ([*verb, "-"], "  \n"),
            ([*verb, "--file", str(blank)], None),
            ([*verb, "--file", str(latin1)], None),
            ([*verb, "--file", str(tmp_path / "missing.txt")], None),
            ([*verb, "--file", str(blank), "also text"], None),
            (verb, None),
        ]
    for args, stdin in cases:
        env = {"LOOPX_CHAT_CODEX_HOME": str(home), **fake_codex.env()}
        base = ["--state-dir", str(tmp_path / "state"), "--codex-bin", str(fake_codex.bin)]
        result = CliRunner().invoke(main, [*base, *args, "--json"], env=env, input=stdin)
        assert result.exit_code == 1, (args, result.output)
        assert json.loads(result.stdout)["error_code"] == "usage_error", args
        assert "Traceback" not in result.output
    assert len(fake_codex.app_servers()) == spawned  # nothing was started for any of them
    assert _state_files(tmp_path / "state") == before


def test_a_message_over_the_stated_limit_is_refused(tmp_path: Path, fake_codex: FakeCodex) -> None:
    from loopx_chat.cli.chat_cmd import MESSAGE_LIMIT_BYTES

    home = tmp_path / "home"
    home.mkdir()
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (MESSAGE_LIMIT_BYTES + 1))
    result = _invoke(tmp_path, fake_codex, home, ["chat", "new", "--goal", "g", "--file", str(big)])
    assert result.exit_code == 1
    assert "usage_error" in result.stderr and f"{MESSAGE_LIMIT_BYTES >> 20} MiB" in result.stderr
    assert fake_codex.app_servers() == []
    help_text = CliRunner().invoke(main, ["chat", "send", "--help"]).output
    assert f"at most {MESSAGE_LIMIT_BYTES >> 20} MiB" in " ".join(help_text.split())


def test_chat_new_on_a_goal_with_no_objective_says_how_to_set_one(
    tmp_path: Path, fake_codex: FakeCodex, invoke: Invoke
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = invoke(home, ["chat", "new", "--goal", "first-try", "hi"])
    assert result.exit_code == 0, result.output
    command = (
        'loopx-chat goal set first-try --objective "what to do" '
        '--acceptance "how you will know it is done"'
    )
    assert "[loopx-chat] Goal first-try has no objective yet" in result.stderr
    assert f"[loopx-chat] next: Set one: `{command}`." in result.stderr
    doc = json.loads(invoke(home, ["chat", "new", "--goal", "first-try", "--json", "hi"]).stdout)
    assert doc["ok"] and doc["hint"]["next_action"] == f"Set one: `{command}`."
    # `goal run` without one is refused with the same command to type.
    refused = invoke(home, ["goal", "run", "first-try", "--token-budget", "1000", "--json"])
    assert refused.exit_code == 1
    error = json.loads(refused.stdout)
    assert error["error_code"] == "objective_required"
    assert error["gate"]["next_action"] == f"Set one: `{command}`."
    # The command as printed works, and then `chat new` has nothing to add.
    args = ["goal", "set", "first-try", "--objective", "what to do"]
    assert invoke(home, [*args, "--acceptance", "how you will know it is done"]).exit_code == 0
    again = invoke(home, ["chat", "new", "--goal", "first-try", "hi"])
    assert again.exit_code == 0 and "next:" not in again.stderr
    assert "hint" not in json.loads(
        invoke(home, ["chat", "new", "--goal", "first-try", "--json", "hi"]).stdout
    )

"""Codex dying mid-run is recovered, on the real codex against the mock: a foreground
`goal run` whose app-server is killed starts it again and resumes the thread, the same run
with its budget and id, one turn recorded interrupted; when every restart dies too, the run
ends failed with the reason, and the first screen never calls it a loop loopx-chat did not
start."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.goal_runs import goal_loop_turns, run_events
from tests.helpers.owner_cli import OwnerCli
from tests.helpers.waiting import wait_for


@pytest.fixture
def cli(tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str) -> OwnerCli:
    return OwnerCli(tmp_path, bound_home, base_env, codex_bin)


def _goal_with_session(cli: OwnerCli) -> str:
    done = cli("goal", "set", "g", "--objective", "count to three", "--acceptance", "3 said")
    assert done.returncode == 0, done.stderr
    code, doc = cli.json("chat", "new", "--goal", "g", "mock:text=ready")
    assert code == 0, doc
    return str(doc["session_id"])


def _app_servers(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "codex" in c.name()]


def _kill_app_server(pid: int, seen: set[int]) -> bool:
    """SIGKILL one app-server of the run not killed before; whether there was one."""
    for child in _app_servers(pid):
        if child.pid not in seen:
            seen.add(child.pid)
            os.kill(child.pid, signal.SIGKILL)
            return True
    return False


def test_a_killed_app_server_is_started_again_and_the_run_goes_on(
    cli: OwnerCli, mock: MockResponsesServer
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:slow=0.1 mock:text=one two three four five six")
    proc = cli.start("goal", "run", "g", "--token-budget", "30000", "--json")
    wait_for(lambda: any(t.status == "running" for t in goal_loop_turns(cli.state, sid)))
    killed: set[int] = set()
    assert _kill_app_server(proc.pid, killed)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err  # the budget, spent by the same run after the restart
    doc = json.loads(out)
    events = [e["event"] for e in run_events(cli.state, "g")]
    assert events == ["run_authorized", "started", "recovering", "recovered", "ended"]
    assert len({e["run_id"] for e in run_events(cli.state, "g")}) == 1
    turns = goal_loop_turns(cli.state, sid)
    assert [t.status for t in turns].count("interrupted") == 1
    assert turns[-1].status == "completed" and len(turns) >= 3
    assert doc["run"]["token_budget"] == 30000 and doc["ledger_tokens"] >= 30000


def test_when_codex_cannot_be_kept_running_the_run_fails_with_the_reason(
    cli: OwnerCli, mock: MockResponsesServer
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:slow=0.2 mock:text=one two three four five six")
    proc = cli.start("goal", "run", "g", "--token-budget", "400000")
    wait_for(lambda: any(t.status == "running" for t in goal_loop_turns(cli.state, sid)))
    killed: set[int] = set()
    while proc.poll() is None:  # every app-server it starts is killed as soon as it is seen
        _kill_app_server(proc.pid, killed)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    ended = run_events(cli.state, "g")[-1]
    assert ended["event"] == "ended" and ended["failed"] is True
    assert ended["reason"] == "Codex's app-server exited and could not be started again"
    assert [e["event"] for e in run_events(cli.state, "g")].count("recovering") == 3
    assert "starting it again (3 of 3)" in err
    code, doc = cli.json("status", "--goal", "g")
    assert code == 0, doc
    host_goal = doc["attention_queue"][0]["host_goal"]
    assert host_goal["goal"]["status"] == "active"  # codex's goal outlives its app-server
    assert host_goal["words"].startswith(f"run {ended['run_id']} failed: Codex's app-server")

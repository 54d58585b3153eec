"""`loopx-chat goal run`: Codex's own goal loop under the owner's authority, on the real
pinned codex against the loopback mock. The run is a real process (`python -m loopx_chat`);
the mock lives in the test, which scripts what the model does in continuation turns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore
from tests.helpers.goal_runs import goal_loop_turns, run_events
from tests.helpers.owner_cli import OwnerCli
from tests.helpers.waiting import wait_for as wait_until


class Cli(OwnerCli):
    """The loopx-chat command line as a child process, on one state dir and home."""

    def goal_turns(self, session_id: str) -> list[Any]:
        return goal_loop_turns(self.state, session_id)

    def runs(self, goal: str) -> list[dict[str, Any]]:
        return run_events(self.state, goal)

    def controller(self, codex_bin: str) -> ChatController:
        return ChatController(
            store=SessionStore(self.state), environ=self.env, cwd=self.tmp, codex_bin=codex_bin
        )


@pytest.fixture
def cli(tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str) -> Cli:
    return Cli(tmp_path, bound_home, base_env, codex_bin)


def _goal_with_session(cli: Cli, goal: str = "g") -> str:
    done = cli("goal", "set", goal, "--objective", "count to three", "--acceptance", "3 said")
    assert done.returncode == 0, done.stderr
    code, doc = cli.json("chat", "new", "--goal", goal, "mock:text=ready")
    assert code == 0, doc
    return str(doc["session_id"])


def _host_goal(cli: Cli, codex_bin: str, session_id: str) -> dict[str, Any] | None:
    """The thread goal as codex keeps it, read by an app-server that loads no thread."""
    with cli.controller(codex_bin) as c, c.thread_metadata(session_id) as call:
        return call("thread/goal/get", {}).get("goal")


def _facts(cli: Cli, thread_id: str) -> dict[str, Any]:
    code, doc = cli.json("codex", "facts")
    assert code == 0
    return dict(doc["threads"][thread_id])


def _status_row(cli: Cli, goal: str = "g") -> dict[str, Any]:
    code, doc = cli.json("status", "--goal", goal)
    assert code == 0, doc
    return dict(doc["attention_queue"][0])


def test_a_run_to_its_budget_agrees_with_the_host_and_codex_facts(
    cli: Cli, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:text=working on it")
    done = cli("goal", "run", "g", "--token-budget", "12000")
    assert done.returncode == 3, done.stderr  # budgetLimited
    assert done.stdout == ""  # the reply streams only to a terminal
    progress = [line for line in done.stderr.splitlines() if " of 12,000 tokens" in line]
    turns = cli.goal_turns(sid)
    assert len(progress) == len(turns) >= 2
    assert all(t.status == "completed" and t.run_id for t in turns)
    run = cli.runs("g")
    assert [e["event"] for e in run] == ["run_authorized", "started", "ended"]
    authorized = run[0]
    assert (authorized["actor"], authorized["surface"], authorized["token_budget"]) == (
        "owner",
        "cli",
        12000,
    )
    assert authorized["objective_source"] == "goal_state"
    goal = _host_goal(cli, codex_bin, sid)
    assert goal is not None and goal["status"] == "budgetLimited"
    assert goal["tokensUsed"] == sum(t.tokens.total_tokens for t in turns)
    assert goal["objective"] == "count to three. Done when: 3 said"
    record = SessionStore(cli.state).load(sid)
    facts = _facts(cli, str(record.upstream_thread_id))
    all_turns = SessionStore(cli.state).list_turns(sid)
    assert facts["turns"]["started"] == len(all_turns) == len(turns) + 1
    assert facts["tokens"]["total_tokens"] == sum(t.tokens.total_tokens for t in all_turns)
    assert record.status == "ready" and record.active_turn_id is None
    assert "difference" not in done.stderr
    row = _status_row(cli)  # the host goal is a fact on the first screen
    assert row["host_goal"]["goal"]["status"] == "budgetLimited"
    assert row["host_goal"]["words"].startswith("budget spent (")
    assert "budget spent (" in row["answers"]["gate_or_evidence_required"]

    # A second run spends its own budget on top of what the goal has used.
    code, doc = cli.json("goal", "run", "g", "--token-budget", "9000")
    assert code == 3 and doc["turns"] >= 1, doc
    assert doc["ledger_tokens"] == doc["host_tokens_used"] and doc["differences"] == []
    assert doc["codex_facts"]["turns"] == doc["codex_facts"]["ledger_turns"]


def test_the_account_usage_limit_stops_the_run_and_the_first_screen_gives_the_reset_time(
    cli: Cli, mock: MockResponsesServer, codex_bin: str
) -> None:
    """The mock answers like the Responses API at the account's limit (HTTP 429
    `usage_limit_reached` with the reset time and the rate-limit headers); codex itself moves
    the goal to `usageLimited`, and the reset time the wire carried reaches the first screen."""
    sid = _goal_with_session(cli)
    resets_at = int(time.time()) + 7200
    mock.script("mock:text=one step done", default=f"mock:usage_limit={resets_at}")
    code, doc = cli.json("goal", "run", "g", "--token-budget", "50000")
    assert code == 4, doc  # the usage limit's exit code
    assert doc["run"]["ended_by"] == "the account's usage limit"
    assert doc["ledger_tokens"] == doc["host_tokens_used"] and doc["differences"] == []
    goal = _host_goal(cli, codex_bin, sid)
    assert goal is not None and goal["status"] == "usageLimited"
    assert cli.runs("g")[-1]["usage_resets_at"] == resets_at
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(resets_at))
    row = _status_row(cli)
    words = row["host_goal"]["words"]
    assert words == f"waiting on the account's usage limit (it resets at {when})"
    # No further request after the limit: codex does not retry a usage limit by itself.
    assert len(mock.requests) == 3  # the session's first turn, one continuation, the refused one


def test_the_agent_completes_then_accept_and_reopen(
    cli: Cli, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = _goal_with_session(cli)
    cli(
        "handoff",
        "record",
        "--goal",
        "g",
        "--next-action",
        "say one two three",
        "--stop-condition",
        "three numbers said",
    )
    mock.script(
        'mock:call=update_goal {"status": "complete"}', "mock:text=done", default="mock:text=more"
    )
    code, doc = cli.json("goal", "run", "g", "--token-budget", "50000")
    assert code == 0, doc  # complete
    assert doc["host_goal"]["status"] == "complete" and doc["turns"] == 1
    assert doc["run"]["objective_source"] == "handoff"
    goal = _host_goal(cli, codex_bin, sid)
    assert goal is not None
    assert goal["objective"] == "say one two three. Stop when: three numbers said"
    # The goal's tokens stop at the status change; the ledger counts the whole turn.
    assert doc["differences"] and "mid-turn" in doc["differences"][0]

    row = _status_row(cli)
    assert row["host_goal"]["words"].startswith("Codex says it is done: check 3 said")
    assert "goal accept g" in row["answers"]["gate_or_evidence_required"]

    code, reopened = cli.json("goal", "reopen", "g", "--note", "also say four")
    assert code == 3, reopened  # ran again (the mock now only talks) until the budget
    assert reopened["run"]["objective_source"] == "owner_note"
    assert reopened["turns"] >= 1
    goal = _host_goal(cli, codex_bin, sid)
    assert goal is not None and goal["objective"] == "also say four"
    events = [e["event"] for e in cli.runs("g")]
    assert events.count("reopened") == 1 and events.count("run_authorized") == 2

    code, refused = cli.json("goal", "accept", "g")
    assert (code, refused["error_code"]) == (1, "run_not_complete")  # that run hit its budget
    mock.script('mock:call=update_goal {"status": "complete"}', "mock:text=done")
    assert cli("goal", "run", "g", "--token-budget", "50000").returncode == 0
    code, accepted = cli.json("goal", "accept", "g", "--reason", "all four said")
    assert code == 0 and accepted["run"]["state"] == "closed"
    assert "goal accept" not in _status_row(cli)["answers"]["gate_or_evidence_required"]
    code, rewards = cli.json("reward", "list", "--goal", "g")
    assert [r["label"] for r in rewards["rewards"]] == ["good"]
    last_run = cli.runs("g")[-1]
    assert (
        last_run["event"] == "accepted"
        and last_run["reward_id"] == rewards["rewards"][0]["reward_id"]
    )


def test_a_gate_opened_mid_run_blocks_the_loop_and_approval_resumes_it(
    cli: Cli, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:slow=0.15 mock:text=one two three four five six seven")
    run = cli.start("goal", "run", "g", "--token-budget", "40000")
    try:
        wait_until(lambda: len(cli.goal_turns(sid)) >= 2)
        assert _status_row(cli)["host_goal"]["words"].startswith("Codex is working on it (turn ")
        gate = cli.json("gate", "request", "--goal", "g", "--question", "Ship it?")[1]["gate"]
        wait_until(lambda: any(e["event"] == "blocked" for e in cli.runs("g")))
        time.sleep(2.0)  # long enough for codex to have started turns, were it going to
        after = [t for t in cli.goal_turns(sid) if t.created_at >= gate["created_at"]]
        assert all(t.status == "interrupted" for t in after), after  # none ran on
        blocked_count = len(cli.goal_turns(sid))
        assert _host_goal(cli, codex_bin, sid)["status"] == "blocked"
        words = _status_row(cli)["host_goal"]["words"]
        assert words == f"blocked by owner gate {gate['gate_id']}"
        resolved = cli("gate", "resolve", gate["gate_id"], "--goal", "g", "--decision", "approve")
        assert resolved.returncode == 0
        _, err = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 3, err  # approved: codex continued until the budget
    assert len(cli.goal_turns(sid)) > blocked_count
    events = [e["event"] for e in cli.runs("g")]
    assert events == ["run_authorized", "started", "blocked", "unblocked", "ended"]
    record = SessionStore(cli.state).load(sid)
    facts = _facts(cli, str(record.upstream_thread_id))
    assert facts["turns"]["started"] == len(SessionStore(cli.state).list_turns(sid))


def test_ctrl_c_pauses_the_goal_and_exits_130(
    cli: Cli, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:slow=0.2 mock:text=one two three four five six seven eight")
    run = cli.start("goal", "run", "g", "--token-budget", "80000")
    try:
        wait_until(lambda: len(cli.goal_turns(sid)) >= 1)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    ended = cli.runs("g")[-1]
    assert (ended["event"], ended["host_status"], ended["by"]) == (
        "ended",
        "paused",
        "owner (Ctrl-C)",
    )
    assert _host_goal(cli, codex_bin, sid)["status"] == "paused"
    record = SessionStore(cli.state).load(sid)
    assert record.status == "ready" and record.active_turn_id is None
    turns = cli.goal_turns(sid)
    assert turns and all(t.status in ("completed", "interrupted") for t in turns)
    facts = _facts(cli, str(record.upstream_thread_id))
    assert facts["turns"]["started"] == len(SessionStore(cli.state).list_turns(sid))
    # A paused goal stays paused: nothing continues once the run is gone.
    time.sleep(1.0)
    assert len(cli.goal_turns(sid)) == len(turns)


def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and folder under `root`: its mode and bytes."""
    found: dict[str, tuple[int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found[str(path.relative_to(root))] = (st.st_mode, data)
    return found


def _refusal_state(tmp: Path, home: Path, case: str) -> tuple[Path, Any]:
    """A state dir set up for one refusal, written by the stores themselves."""
    from loopx_chat.controller.thread_lock import ThreadWriterLock
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_ledger import GoalLedger
    from loopx_chat.state.session_records import SessionRecord

    state = tmp / "state"
    goals = GateStore(state)
    records = GoalLedger(goals)
    budget = None if case == "budget_required" else 10000
    if case != "objective_required":
        records.set_goal_state(
            "g", {"objective": "ship", "acceptance": ["shipped"], "token_budget": budget}
        )
    held = None
    if case != "no_session":
        owner_home = tmp / "other-home" if case == "codex_home_mismatch" else home
        SessionStore(state).create(
            SessionRecord(
                session_id="s1",
                goal_id="g",
                created_at="2026-01-01T00:00:00Z",
                updated_at="2026-01-01T00:00:00Z",
                upstream_thread_id="thread-1",
                codex_home=str(owner_home),
                work_dir=str(tmp),
            )
        )
    if case == "gate_open":
        goals.request_gate("g", "Deploy to production?")
    if case == "goal_stopped":
        records.set_stopped("g", True, reason="holiday")
    if case == "thread_busy":
        held = ThreadWriterLock(state, home, "thread-1")
        held.acquire()
    if case == "raw_material_detected":
        # Our writers refuse raw keys, so this is what a hand edit (or another tool) leaves:
        # a decided gate whose record gained the transcript it was about.
        gate = goals.request_gate("g", "Ship it?")
        goals.resolve_gate("g", gate.gate_id, "approve", "shipped")
        log = state / "goals" / "g" / "gates.jsonl"
        *kept, last = log.read_text().splitlines()
        edited = {**json.loads(last), "transcript": "CANARY-raw-words"}
        log.write_text("\n".join([*kept, json.dumps(edited)]) + "\n")
    return state, held


REFUSALS = {
    "gate_open": "Deploy to production?",
    "goal_stopped": "goal resume g",
    "no_session": "chat new --goal g",
    "codex_home_mismatch": "LOOPX_CHAT_CODEX_HOME",
    "budget_required": "--token-budget",
    "objective_required": "handoff",
    "thread_busy": "holds this thread",
    "raw_material_detected": "gates.jsonl: transcript",
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_every_refusal_writes_nothing_and_spawns_nothing(
    tmp_path: Path, fake_codex: Any, case: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    state, held = _refusal_state(tmp_path, home.resolve(), case)
    before = _tree(state)
    env = {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home), **fake_codex.env()}
    args = [
        sys.executable,
        "-m",
        "loopx_chat",
        "--state-dir",
        str(state),
        "--codex-bin",
        str(fake_codex.bin),
        "goal",
        "run",
        "g",
    ]
    if case == "objective_required":
        args += ["--token-budget", "5000"]
    try:
        human = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        as_json = subprocess.run(
            [*args, "--json"], env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        if held is not None:
            held.release()
    assert human.returncode == 1 and as_json.returncode == 1
    assert f"error [{case}]" in human.stderr and REFUSALS[case] in human.stderr, human.stderr
    assert "Traceback" not in human.stderr
    assert json.loads(as_json.stdout)["error_code"] == case
    assert _tree(state) == before  # byte for byte, modes included
    assert fake_codex.app_servers() == []  # nothing was spawned
    assert "CANARY" not in human.stderr + as_json.stdout  # the key is named, never its value
    if case == "raw_material_detected":  # status tells the same story as the refusal
        status = subprocess.run(
            [*args[:5], "status", "--goal", "g", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        row = json.loads(status.stdout)["attention_queue"][0]
        assert row["quota"]["reason_code"] == "raw_material_detected", row["quota"]
        assert "CANARY" not in status.stdout


def test_a_loop_loopx_chat_did_not_start_is_said_and_left_alone(
    cli: Cli, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = _goal_with_session(cli)
    thread_id = str(SessionStore(cli.state).load(sid).upstream_thread_id)
    # Codex's own UI (here: a client that loads no thread) sets the goal active.
    with cli.controller(codex_bin) as c, c.thread_metadata(sid) as call:
        call(
            "thread/goal/set",
            {
                "objective": "set in Codex",
                "status": "active",
                "tokenBudget": 10**6,
                "origin": "user",
            },
        )
    mock.script(default="mock:slow=0.2 mock:text=on my own for a while")
    before = _facts(cli, thread_id)["turns"]["started"]
    # Read-only looks never load the thread, so codex's loop does not start from them.
    assert cli("chat", "history", sid).returncode == 0
    assert cli("writeback", "list", "--goal", "g").returncode == 0
    row = _status_row(cli)
    assert _facts(cli, thread_id)["turns"]["started"] == before
    assert "host_goal" not in row or row["host_goal"] is None  # nothing of ours ran yet

    resumed = cli("chat", "resume", sid)
    assert resumed.returncode == 0, resumed.stderr
    notices = [line for line in resumed.stderr.splitlines() if "did not start" in line]
    assert len(notices) == 1
    assert [e["event"] for e in cli.runs("g")] == ["host_loop_seen"]
    words = _status_row(cli)["host_goal"]["words"]
    assert words == "Codex is running a goal loopx-chat did not start (no budget set here)"
    goal = _host_goal(cli, codex_bin, sid)
    assert goal is not None and (goal["status"], goal["objective"]) == ("active", "set in Codex")
    assert goal["tokenBudget"] == 10**6  # never changed by loopx-chat
    # The turns codex ran while `chat resume` held the thread are on record like any other.
    seen = [t for t in SessionStore(cli.state).list_turns(sid) if t.origin == "goal_loop"]
    assert seen and all(t.run_id is None for t in seen)
    assert _facts(cli, thread_id)["turns"]["started"] == len(
        SessionStore(cli.state).list_turns(sid)
    )


def test_goal_stop_pauses_a_run_resume_does_not_restart_it_and_a_rejected_gate_pauses(
    cli: Cli, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:slow=0.1 mock:text=one two three four five six")
    run = cli.start("goal", "run", "g", "--token-budget", "200000")
    try:
        wait_until(lambda: len(cli.goal_turns(sid)) >= 1)
        assert cli("goal", "stop", "g", "--reason", "lunch").returncode == 0
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 6, err  # paused
    ended = cli.runs("g")[-1]
    assert (ended["host_status"], ended["by"]) == ("paused", "owner (goal stop)")
    record = SessionStore(cli.state).load(sid)
    assert record.status == "ready" and record.active_turn_id is None
    assert all(t.status == "completed" for t in cli.goal_turns(sid))  # the last one finished
    assert cli("goal", "resume", "g").returncode == 0
    count = len(cli.goal_turns(sid))
    time.sleep(1.0)
    assert _host_goal(cli, codex_bin, sid)["status"] == "paused"  # resume is not Run
    assert len(cli.goal_turns(sid)) == count
    assert _status_row(cli)["host_goal"]["words"] == "paused by owner (goal stop)"

    run = cli.start("goal", "run", "g", "--token-budget", "200000")
    try:
        wait_until(lambda: len(cli.goal_turns(sid)) > count)
        gate = cli.json("gate", "request", "--goal", "g", "--question", "Go on?")[1]["gate"]
        wait_until(lambda: cli.runs("g")[-1]["event"] == "blocked")
        rejected = cli(
            "gate",
            "resolve",
            gate["gate_id"],
            "--goal",
            "g",
            "--decision",
            "reject",
            "--reason",
            "wrong direction",
        )
        assert rejected.returncode == 0
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 6, err
    ended = cli.runs("g")[-1]
    assert (ended["host_status"], ended["by"], ended["reason"]) == (
        "paused",
        "owner (gate rejected)",
        "wrong direction",
    )


def test_the_reply_streams_to_a_terminal_and_never_into_state(
    cli: Cli, mock: MockResponsesServer
) -> None:
    import pty

    sid = _goal_with_session(cli)
    mock.script(default="mock:text=CANARY-streamed words")
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [*cli.base, "goal", "run", "g", "--token-budget", "3000"],
            env=cli.env,
            cwd=cli.tmp,
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=120,
        )
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert done.returncode == 3, done.stderr
    assert b"CANARY-streamed words" in shown
    assert len(cli.goal_turns(sid)) >= 1
    for path in cli.state.rglob("*"):
        if path.is_file():
            assert b"CANARY" not in path.read_bytes(), path


# `goal run` in a fresh interpreter, the modules it loaded when it spawned codex (the first
# spawn) and when it set the goal printed; then the run goes on as usual.
SPAWN_PROBE = """
import json, sys
from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.goal_loop import GoalLoopWatch
def said(when):
    print(when + " " + json.dumps(sorted(sys.modules)), file=sys.stderr, flush=True)
spawn = AppServerProcess.spawn.__func__
def counted(cls, **kwargs):
    if not getattr(cls, "_probed", False):
        cls._probed = True
        said("SPAWN")
    return spawn(cls, **kwargs)
AppServerProcess.spawn = classmethod(counted)
set_goal = GoalLoopWatch.set
def setting(self, *args, **kwargs):
    said("SET")
    return set_goal(self, *args, **kwargs)
GoalLoopWatch.set = setting
sys.argv = ["loopx-chat", *sys.argv[1:]]
from loopx_chat.cli import run
run()
"""
# What a foreground run must not load before it spawns codex: each import there is time
# codex's start waits for. The service's client (a run here needs none), the host-request
# desk and the rollout reader (imported while codex starts), the status reader, psutil.
RUN_SPAWN_FORBIDDEN = (
    "loopx_chat.service",
    "loopx_chat.cli.goal_run_remote",
    "loopx_chat.controller.host_requests",
    "loopx_chat.codex.rollouts",
    "loopx_chat.goals.status",
    "http.client",
    "psutil",
)
# Our modules loaded at the spawn: 65 when this floor was set (70 before issue 37's cut), 66
# since `state/file_lock` took the place of filelock's 40.
RUN_SPAWN_MODULES = 66


def test_a_run_spawns_codex_before_loading_what_it_needs_only_after(
    cli: Cli, mock: MockResponsesServer
) -> None:
    _goal_with_session(cli)
    mock.script(default="mock:text=working on it")
    probe = [sys.executable, "-c", SPAWN_PROBE, *cli.base[3:]]
    done = subprocess.run(
        [*probe, "goal", "run", "g", "--token-budget", "9000"],
        env=cli.env,
        cwd=cli.tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr  # the run went on to its budget
    lines = done.stderr.splitlines()
    said = dict(x.split(" ", 1) for x in lines if x.startswith(("SPAWN ", "SET ")))
    loaded = json.loads(said["SPAWN"])
    assert "loopx_chat.controller.goal_run" in loaded  # the probe sees the run's own path
    assert [m for m in loaded if m.startswith(RUN_SPAWN_FORBIDDEN)] == []
    ours = [m for m in loaded if m.startswith("loopx_chat")]
    assert len(ours) <= RUN_SPAWN_MODULES, sorted(ours)
    # What the run needs later was imported while codex started: the rollout reader of the
    # run's end is there before the goal is set.
    assert "loopx_chat.codex.rollouts.scanner" in json.loads(said["SET"])

"""Run and Pause in the service (a real `loopx-chat serve` process, the real codex and the
mock): the run follows Codex's own loop to its budget, Pause lets the last turn finish,
`--max-running` refuses one more, a service killed mid-run recovers the run once, and
`chat interrupt` of a run's turn stops it now and pauses the run."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import read_secret
from loopx_chat.state.session_store import SessionStore
from tests.helpers.device import Device, sign_in
from tests.helpers.goal_runs import goal_loop_turns, paused_by_owner_interrupt, run_events
from tests.helpers.serve_process import free_port
from tests.helpers.waiting import wait_for as wait_until


class Setup:
    def __init__(self, tmp: Path, home: Path, env: dict[str, str], codex_bin: str) -> None:
        self.tmp, self.state = tmp, tmp / "state"
        self.env = {**env, "LOOPX_CHAT_CODEX_HOME": str(home)}
        self.base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(self.state)]
        self.base += ["--codex-bin", codex_bin]
        self.port = 0

    def cli(self, *args: str) -> dict[str, Any]:
        done = subprocess.run(
            [*self.base, *args, "--json"],
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    def goal(self, goal: str, budget: int) -> str:
        self.cli(
            "goal",
            "set",
            goal,
            "--objective",
            "count",
            "--acceptance",
            "counted",
            "--token-budget",
            str(budget),
        )
        return str(self.cli("chat", "new", "--goal", goal, "mock:text=ready")["session_id"])

    def serve(self, *extra: str) -> subprocess.Popen[bytes]:
        proc = self.start_serve(*extra)
        wait_until(lambda: self._listening(proc), 60)
        return proc

    def start_serve(self, *extra: str) -> subprocess.Popen[bytes]:
        self.port = free_port()
        return subprocess.Popen(
            [*self.base, "serve", "--port", str(self.port), *extra],
            env=self.env,
            cwd=self.tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def _listening(self, proc: subprocess.Popen[bytes]) -> bool:
        if proc.poll() is not None:  # it ended: say why now rather than wait on a port
            raise AssertionError(proc.communicate()[1].decode(errors="replace"))
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any] | str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {
            "Host": f"127.0.0.1:{self.port}",
            "Authorization": f"Bearer {read_secret(self.state)}",
        }
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=payload, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        ctype = resp.getheader("content-type") or ""
        return resp.status, json.loads(data) if "json" in ctype else data.decode()

    def runs(self, goal: str) -> list[dict[str, Any]]:
        return run_events(self.state, goal)

    def goal_turns(self, sid: str) -> list[Any]:
        return goal_loop_turns(self.state, sid)

    def run_mid_turn(self, goal: str, sid: str) -> None:
        """Run `goal` in the service, until it is mid-turn (`wait_mid_turn`)."""
        code, doc = self.call("POST", f"/api/goals/{goal}/run", {})
        assert code == 202, doc
        self.wait_mid_turn(sid)

    def wait_mid_turn(self, sid: str) -> None:
        """Until the run has recorded two turns and a third is running."""
        store = SessionStore(self.state)
        wait_until(lambda: len(self.goal_turns(sid)) >= 2 and bool(store.load(sid).active_turn_id))


@pytest.fixture
def setup(tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str) -> Setup:
    return Setup(tmp_path, bound_home, base_env, codex_bin)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_run_and_pause_in_the_service_and_the_running_cap(
    setup: Setup, mock: MockResponsesServer
) -> None:
    sid = setup.goal("g", 400000)
    setup.goal("g2", 400000)
    mock.script(default="mock:slow=0.1 mock:text=one two three four five")
    proc = setup.serve("--max-running", "1", "--max-warm", "1")
    try:
        code, page = setup.call("GET", "/api/page")
        assert code == 200 and 'data-run="run"' in str(page)
        code, doc = setup.call("POST", "/api/goals/g/run", {})
        assert code == 202, doc
        assert isinstance(doc, dict) and doc["run"]["surface"] == "api"
        assert 'data-run="pause"' in doc["cards_html"]  # the card now offers Pause
        wait_until(lambda: len(setup.goal_turns(sid)) >= 2)

        busy = subprocess.run(
            [*setup.base, "goal", "run", "g", "--foreground", "--json"],
            env=setup.env,
            cwd=setup.tmp,
            capture_output=True,
            text=True,
            timeout=60,
        )
        refusal = json.loads(busy.stdout)
        assert busy.returncode == 1 and refusal["error_code"] == "thread_busy"
        assert f"pid {proc.pid}" in refusal["error"]  # who holds it

        # The running goal's thread is outside the warm cap: a chat still gets a thread.
        code, opened = setup.call("POST", "/api/chat/sessions", {"goal_id": "g2"})
        assert code == 201, opened

        before = (setup.state / "goals" / "g2").exists() and setup.runs("g2")
        code, refused = setup.call("POST", "/api/goals/g2/run", {})
        assert code == 503 and isinstance(refused, dict)
        assert refused["error_code"] == "too_many_running"
        assert setup.runs("g2") == (before or [])  # nothing written for it

        code, paused = setup.call("POST", "/api/goals/g/pause", {})
        assert code == 200, paused
        assert isinstance(paused, dict)
        assert (paused["run"]["state"], paused["run"]["host_status"]) == ("ended", "paused")
        assert paused["run"]["ended_by"] == "owner (Pause)"
        record = SessionStore(setup.state).load(sid)
        assert record.active_turn_id is None
        assert all(t.status == "completed" for t in setup.goal_turns(sid))  # the last finished
        code, again = setup.call("POST", "/api/goals/g/pause", {})
        assert code == 404 and isinstance(again, dict) and again["error_code"] == "run_not_found"

        # `goal run` in a shell while the service is up: the service runs it, the shell
        # follows with the same progress lines and exit code.
        mock.script(default="mock:text=quick")
        done = subprocess.run(
            [*setup.base, "goal", "run", "g", "--token-budget", "9000"],
            env=setup.env,
            cwd=setup.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 3, done.stderr  # budgetLimited
        assert "the local service runs goal g" in done.stderr
        assert " of 9,000 tokens" in done.stderr
        delegated = [e for e in setup.runs("g") if e["event"] == "run_authorized"][-1]
        assert delegated["surface"] == "api" and delegated["pid"] == proc.pid
    finally:
        _stop(proc)


@pytest.mark.parametrize("starts", [1, 2])
def test_a_service_killed_mid_run_recovers_it_once_and_codex_continues(
    setup: Setup, mock: MockResponsesServer, starts: int
) -> None:
    """With `starts` 2, two services start on the state at once (each would look for runs
    to recover): one takes the state dir, the other refuses before it recovers anything,
    and the run is recovered once."""
    sid = setup.goal("g", 45000)
    mock.script(default="mock:slow=0.15 mock:text=one two three four five six")
    proc = setup.serve()
    try:
        setup.run_mid_turn("g", sid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert SessionStore(setup.state).load(sid).active_turn_id  # it died mid-turn
    killed_at = len(setup.goal_turns(sid))
    procs = [setup.start_serve() for _ in range(starts)]
    try:
        # the one that lost the claim ends on its own; the other serves on
        wait_until(lambda: [p.poll() is None for p in procs].count(True) == 1, 120)
        wait_until(lambda: setup.runs("g")[-1]["event"] == "ended", 120)
        assert [p.poll() is None for p in procs].count(True) == 1  # one serves the state
        for refused in (p for p in procs if p.poll() is not None):
            err = refused.communicate()[1].decode()
            assert refused.returncode != 0 and "service_already_running" in err, err
            assert "Traceback" not in err
    finally:
        for proc in procs:
            _stop(proc)
    events = [e["event"] for e in setup.runs("g")]
    assert events.count("recovered") == 1 and events[-1] == "ended"
    assert setup.runs("g")[-1]["host_status"] == "budgetLimited"
    turns = setup.goal_turns(sid)
    assert len(turns) > killed_at  # codex went on after the restart
    assert [t.status for t in turns].count("interrupted") == 1
    upstream = [t.upstream_turn_id for t in turns]
    assert len(upstream) == len(set(upstream))  # no turn recorded twice
    assert SessionStore(setup.state).load(sid).active_turn_id is None
    recovery = setup.cli("metrics", "--goal", "g")["interrupted_task_recovery"]
    assert (recovery["numerator"], recovery["denominator"]) == (1, 1)  # counted, and recovered


def test_ctrl_c_of_a_shell_following_the_service_pauses_the_run(
    setup: Setup, mock: MockResponsesServer
) -> None:
    sid = setup.goal("g", 400000)
    mock.script(default="mock:slow=0.1 mock:text=one two three four five")
    proc = setup.serve()
    try:
        shell = subprocess.Popen(
            [*setup.base, "goal", "run", "g"],
            env=setup.env,
            cwd=setup.tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: len(setup.goal_turns(sid)) >= 1)
            shell.send_signal(signal.SIGINT)
            _, err = shell.communicate(timeout=60)
        finally:
            if shell.poll() is None:
                shell.kill()
        assert shell.returncode == 130, err
        assert "Traceback" not in err
        ended = setup.runs("g")[-1]
        assert (ended["event"], ended["host_status"], ended["by"]) == (
            "ended",
            "paused",
            "owner (Pause)",
        )
        assert SessionStore(setup.state).load(sid).active_turn_id is None
    finally:
        _stop(proc)


@contextmanager
def _watched(path: Path) -> Iterator[list[str]]:
    """Whether `path` came to exist while the block ran: looked at every millisecond."""
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set() and not seen:
            if path.exists():
                seen.append(path.name)
            time.sleep(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    with ExitStack() as stack:
        stack.callback(watcher.join)
        stack.callback(done.set)  # first: callbacks run last-in, first-out
        watcher.start()
        yield seen


def test_chat_interrupt_of_a_run_the_service_holds_stops_the_turn_and_pauses_the_run(
    setup: Setup, mock: MockResponsesServer
) -> None:
    """Issue 34: `chat interrupt` (delegated to the service, which follows the run) set the
    warm thread's interrupt flag, which only a chat turn reads: it answered ok and the loop
    went on. The run now stops the turn at once and ends paused, with the owner's reason.
    The service asks its run through the run's inbox: it never writes the session's marker
    file, which its own follower would read back (watched here every millisecond)."""
    sid = setup.goal("g", 400000)
    mock.script(default="mock:slow=1 mock:text=one more step")
    proc = setup.serve()
    try:
        setup.run_mid_turn("g", sid)
        with _watched(setup.state / "sessions" / sid / "interrupt.request") as seen:
            doc = setup.cli("chat", "interrupt", sid)  # the service answers it
        ended = setup.runs("g")[-1]
        turns = setup.goal_turns(sid)
    finally:
        _stop(proc)
    assert seen == [], "the service wrote the marker its own run reads"
    assert ended["event"] == "ended", ended
    assert (ended["reason"], ended["by"]) == ("turn_interrupted_by_owner", "owner (chat interrupt)")
    assert ended["host_status"] == "paused"
    assert doc["goal_run"] == paused_by_owner_interrupt(ended["run_id"])
    # The turn it stopped is the run's last, recorded once, interrupted.
    assert [t.status for t in turns] == ["completed"] * (len(turns) - 1) + ["interrupted"]
    assert doc["turn"]["id"] == turns[-1].turn_id and doc["turn"]["status"] == "interrupted"


def _page_call(setup: Setup, path: str, device: Device | None) -> tuple[int, dict[str, Any]]:
    """A write the page makes: signed by the owner's signed-in browser when given."""
    conn = http.client.HTTPConnection("127.0.0.1", setup.port, timeout=60)
    headers = {"Host": f"127.0.0.1:{setup.port}", "Content-Type": "application/json"}
    if device is not None:
        headers.update(device.headers("POST", path, b"{}"))
    conn.request("POST", path, body=b"{}", headers=headers)
    resp = conn.getresponse()
    doc = json.loads(resp.read())
    conn.close()
    return resp.status, doc


def _in_codex(
    setup: Setup, codex_bin: str, sid: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """A thread-goal call as Codex's own UI makes it: a client that loads no thread."""
    store = SessionStore(setup.state)
    with (
        ChatController(store=store, environ=setup.env, cwd=setup.tmp, codex_bin=codex_bin) as c,
        c.thread_metadata(sid) as call,
    ):
        return dict(call(method, params).get("goal") or {})


def _active_in_codex(setup: Setup, codex_bin: str, sid: str) -> None:
    goal = {"objective": "set in Codex", "status": "active", "tokenBudget": 10**6}
    _in_codex(setup, codex_bin, sid, "thread/goal/set", {**goal, "origin": "user"})


def test_the_service_records_and_pauses_a_loop_loopx_chat_did_not_start(
    setup: Setup, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = setup.goal("g", 400000)

    def host_goal() -> dict[str, Any]:
        return _in_codex(setup, codex_bin, sid, "thread/goal/get", {})

    _active_in_codex(setup, codex_bin, sid)
    mock.script(default="mock:slow=0.2 mock:text=on my own for a while")

    # 1. The service's resume loads the thread: codex's loop starts, its turns are recorded
    # while the service holds it, the card says so, and a stop of the service leaves the
    # host goal as it was.
    proc = setup.serve()
    try:
        code, doc = setup.call("POST", f"/api/chat/sessions/{sid}/resume", {})
        assert code == 200, doc
        assert doc["host_loop"] is True
        # A delegated `chat resume` answers at once (the thread is loaded and held for the
        # loop) and says what the direct one says, on stderr, once.
        said = subprocess.run(
            [*setup.base, "chat", "resume", sid],
            env=setup.env,
            cwd=setup.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert said.returncode == 0, said.stderr
        assert said.stderr.count("Codex is running a goal loopx-chat did not start") == 1
        assert "Pause it on the goal's card" in said.stderr
        # A chat turn there would wait for the loop to end: it is refused at once instead.
        busy = subprocess.run(
            [*setup.base, "chat", "send", sid, "mock:text=are you there"],
            env=setup.env,
            cwd=setup.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert busy.returncode == 1, busy.stderr
        assert "error [thread_busy]" in busy.stderr and "own loop" in busy.stderr
        assert "Traceback" not in busy.stderr
        wait_until(lambda: len([t for t in setup.goal_turns(sid) if t.status != "running"]) >= 2)
        code, page = setup.call("GET", "/api/page")
        assert code == 200
        assert "Codex is running a goal loopx-chat did not start" in str(page)
        assert 'data-run="pause"' in str(page) and 'data-run="run"' in str(page)
    finally:
        _stop(proc)
    turns = setup.goal_turns(sid)
    assert turns and all(t.run_id is None and t.origin == "goal_loop" for t in turns)
    assert all(t.status in ("completed", "interrupted") for t in turns)
    assert [t.status for t in turns].count("interrupted") <= 1  # the one the stop ended
    upstream = [t.upstream_turn_id for t in turns]
    assert len(upstream) == len(set(upstream))
    assert SessionStore(setup.state).load(sid).active_turn_id is None
    unchanged = host_goal()
    assert (unchanged["status"], unchanged["objective"]) == ("active", "set in Codex")
    assert unchanged["tokenBudget"] == 10**6  # never changed by loopx-chat
    assert [e["event"] for e in setup.runs("g")] == ["host_loop_seen"]
    counted = len(turns)

    # 2. Again, and the owner pauses it from the card: a signed-in browser is required, the
    # Pause is recorded with that device as its actor, the running turn finishes, no turn
    # starts after.
    proc = setup.serve()
    try:
        code, doc = setup.call("POST", f"/api/chat/sessions/{sid}/resume", {})
        assert code == 200, doc
        wait_until(lambda: len(setup.goal_turns(sid)) > counted)
        device = sign_in(setup.port, str(read_secret(setup.state)), "laptop")
        before = setup.runs("g")
        code, refused = _page_call(setup, "/api/goals/g/pause", None)
        assert code == 401 and refused["error_code"] == "unauthorized", refused
        assert setup.runs("g") == before  # nothing recorded, nothing paused
        code, paused = _page_call(setup, "/api/goals/g/pause", device)
        assert code == 200, paused
        assert paused["host_loop"]["actor"] == "owner-device:laptop"
        assert paused["host_loop"]["host_status"] == "paused"
        assert "Paused by you, on the page (laptop)" in paused["cards_html"]
        wait_until(lambda: SessionStore(setup.state).load(sid).active_turn_id is None)
        settled = len(setup.goal_turns(sid))
        time.sleep(1.0)
        assert len(setup.goal_turns(sid)) == settled  # codex started nothing after the Pause
    finally:
        _stop(proc)
    turns = setup.goal_turns(sid)
    assert all(t.status in ("completed", "interrupted") for t in turns)
    last = setup.runs("g")[-1]
    assert (last["event"], last["actor"]) == ("host_loop_paused", "owner-device:laptop")
    after = host_goal()
    assert (after["status"], after["tokenBudget"]) == ("paused", 10**6)
    row = setup.cli("status", "--goal", "g")["attention_queue"][0]
    assert (
        row["host_goal"]["words"]
        == "paused by owner-device:laptop (a goal loopx-chat did not start)"
    )
    facts = setup.cli("codex", "facts")
    thread_id = str(SessionStore(setup.state).load(sid).upstream_thread_id)
    ledger = SessionStore(setup.state).list_turns(sid)
    assert facts["threads"][thread_id]["turns"]["started"] == len(ledger)


def test_chat_interrupt_stops_the_turn_of_a_loop_loopx_chat_did_not_start(
    setup: Setup, mock: MockResponsesServer, codex_bin: str
) -> None:
    """A loop codex runs that loopx-chat did not start, followed by the service: `chat
    interrupt` stops its running turn (it ran on before, the flag it set read by no one) and
    leaves the host goal to codex, as an interrupt from Codex's own UI does; no run pauses."""
    sid = setup.goal("g", 400000)
    _active_in_codex(setup, codex_bin, sid)
    # Turns long enough that the one running when the command is run is the one it stops.
    mock.script(default="mock:slow=3 mock:text=on my own for a while")
    store = SessionStore(setup.state)
    proc = setup.serve()
    try:
        code, doc = setup.call("POST", f"/api/chat/sessions/{sid}/resume", {})
        assert code == 200 and doc["host_loop"] is True, doc
        wait_until(lambda: len(setup.goal_turns(sid)) >= 1 and bool(store.load(sid).active_turn_id))
        asked = setup.cli("chat", "interrupt", sid)
        turn_id = asked["turn"]["id"]
        wait_until(lambda: store.load_turn(sid, turn_id).status != "running")
        stopped = store.load_turn(sid, turn_id)
    finally:
        _stop(proc)
    assert stopped.origin == "goal_loop" and stopped.run_id is None
    assert stopped.status == "interrupted", stopped
    assert asked["goal_run"] is None  # no run of ours to pause


def test_run_adopts_a_loop_loopx_chat_did_not_start_in_the_service(
    setup: Setup, mock: MockResponsesServer, codex_bin: str
) -> None:
    sid = setup.goal("g", 400000)
    store = SessionStore(setup.state)
    _active_in_codex(setup, codex_bin, sid)
    mock.script(default="mock:slow=0.2 mock:text=on my own for a while")
    proc = setup.serve()
    try:
        code, doc = setup.call("POST", f"/api/chat/sessions/{sid}/resume", {})
        assert code == 200, doc
        wait_until(lambda: len(setup.goal_turns(sid)) >= 1)
        code, run = setup.call("POST", "/api/goals/g/run", {"token_budget": 20000})
        assert code == 202, run
        assert isinstance(run, dict)
        run_id = run["run"]["run_id"]
        wait_until(lambda: setup.runs("g")[-1]["event"] == "ended", 90)
    finally:
        _stop(proc)
    ended = setup.runs("g")[-1]
    assert ended["host_status"] == "budgetLimited", ended
    turns = setup.goal_turns(sid)
    before = [t for t in turns if t.run_id is None]
    under_run = [t for t in turns if t.run_id == run_id]
    assert before and under_run  # the loop's turns, then the run's, each on record
    assert len(before) + len(under_run) == len(turns)
    upstream = [t.upstream_turn_id for t in turns]
    assert len(upstream) == len(set(upstream))  # no turn recorded twice across the hand-over
    assert store.load(sid).active_turn_id is None
    # The hand-over is prompt (the loop's running turn gets at most a few seconds), and no
    # turn of the old loop starts once the run has set the goal.
    events = {e["event"]: e["at"] for e in setup.runs("g") if e.get("run_id") == run_id}
    waited = datetime.fromisoformat(events["started"]) - datetime.fromisoformat(
        events["run_authorized"]
    )
    assert waited.total_seconds() < 10, waited
    assert all(t.created_at < events["started"] for t in before)


def test_a_delegated_chat_send_says_codex_runs_a_loop_loopx_chat_did_not_start(
    setup: Setup, mock: MockResponsesServer, codex_bin: str
) -> None:
    """The service loads the thread for the turn, codex's loop starts with the resume, and
    the `chat send` that asked says so on stderr as the direct one does."""
    sid = setup.goal("g", 400000)
    goal = {"objective": "set in Codex", "status": "active", "tokenBudget": 30000}
    _in_codex(setup, codex_bin, sid, "thread/goal/set", {**goal, "origin": "user"})
    mock.script(default="mock:slow=0.2 mock:text=on my own")
    proc = setup.serve()
    try:
        said = subprocess.run(
            [*setup.base, "chat", "send", sid, "mock:text=hello"],
            env=setup.env,
            cwd=setup.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        _stop(proc)
    assert said.returncode == 0, said.stderr
    assert said.stderr.count("Codex is running a goal loopx-chat did not start") == 1
    assert "Pause it on the goal's card" in said.stderr  # the service's wording: it ran there
    assert [e["event"] for e in setup.runs("g")] == ["host_loop_seen"]


def test_goal_stop_pauses_a_loop_loopx_chat_did_not_start_that_the_service_follows(
    setup: Setup, mock: MockResponsesServer, codex_bin: str
) -> None:
    """`goal stop` is the owner's recorded "no automatic turn": the loop codex runs on the
    goal's thread is paused like the card's Pause, with the stop's actor on the record."""
    sid = setup.goal("g", 400000)
    _active_in_codex(setup, codex_bin, sid)
    mock.script(default="mock:slow=0.2 mock:text=on my own for a while")
    proc = setup.serve()
    try:
        code, doc = setup.call("POST", f"/api/chat/sessions/{sid}/resume", {})
        assert code == 200 and doc["host_loop"] is True, doc
        wait_until(lambda: len(setup.goal_turns(sid)) >= 1)
        setup.cli("goal", "stop", "g", "--reason", "enough for today")
        wait_until(lambda: "host_loop_paused" in [e["event"] for e in setup.runs("g")])
        wait_until(lambda: all(t.status != "running" for t in setup.goal_turns(sid)))
        settled = len(setup.goal_turns(sid))
        time.sleep(1.0)
        assert len(setup.goal_turns(sid)) == settled  # no continuation after the pause
    finally:
        _stop(proc)
    paused = [e for e in setup.runs("g") if e["event"] == "host_loop_paused"]
    assert len(paused) == 1 and paused[0]["actor"] == "owner (goal stop)"
    goal = _in_codex(setup, codex_bin, sid, "thread/goal/get", {})
    assert goal["status"] == "paused" and goal["objective"] == "set in Codex"


def test_goal_run_through_the_service_and_goal_follow_reattach_after_a_restart(
    setup: Setup, mock: MockResponsesServer
) -> None:
    """Issue 34 case 3: `goal run` through the service follows the run as `goal follow`
    does; when the service is killed mid-run and started again, both go on following the
    recovered run to its end (no `service_lost`, no `thread_busy`), with the same document."""
    sid = setup.goal("g", 45000)
    mock.script(default="mock:slow=0.15 mock:text=one two three four five six")
    proc = setup.serve()
    started = [*setup.base, "goal", "run", "g", "--json"]
    try:
        run = subprocess.Popen(started, env=setup.env, cwd=setup.tmp, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
        wait_until(lambda: len(setup.goal_turns(sid)) >= 1)
        watcher = subprocess.Popen([*setup.base, "goal", "follow", "g"], env=setup.env,
                                   cwd=setup.tmp, stderr=subprocess.PIPE, text=True)  # fmt: skip
        setup.wait_mid_turn(sid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc = setup.serve()
        out, err = run.communicate(timeout=120)
        _, lines = watcher.communicate(timeout=60)
    finally:
        _stop(proc)
    assert run.returncode == 3, err  # budget spent, by the recovered run
    doc = json.loads(out)
    assert doc["run"]["events"].count("recovered") == 1
    assert doc["run"]["state"] == "ended" and doc["run"]["host_status"] == "budgetLimited"
    assert watcher.returncode == 3, lines
    assert "service_lost" not in err + lines and "thread_busy" not in err + lines
    assert "is gone: waiting for the service to take it up again" in lines
    assert f"run {doc['run']['run_id']} recovered: Codex goes on with goal g" in lines
    assert f"run {doc['run']['run_id']} ended: Codex goal budgetLimited" in lines


def test_codex_killed_under_a_service_run_is_started_again_and_the_run_goes_on(
    setup: Setup, mock: MockResponsesServer
) -> None:
    """Issue 34 case 2: `kill -9` of the app-server during a service run. The service starts
    it again and resumes the thread: the same run goes on to its budget, one turn recorded
    interrupted, and status never calls it a loop loopx-chat did not start."""
    import psutil

    sid = setup.goal("g", 45000)
    mock.script(default="mock:slow=0.15 mock:text=one two three four five six")
    proc = setup.serve()
    try:
        code, doc = setup.call("POST", "/api/goals/g/run", {})
        assert code == 202, doc
        setup.wait_mid_turn(sid)
        children = psutil.Process(proc.pid).children(recursive=True)
        codex = [c for c in children if "codex" in c.name()]
        assert codex
        for child in codex:
            child.kill()
        wait_until(lambda: setup.runs("g")[-1]["event"] == "ended", 90)
        status = setup.cli("status", "--goal", "g")
    finally:
        _stop(proc)
    events = [e["event"] for e in setup.runs("g")]
    assert events.count("recovering") == 1 and events.count("recovered") == 1
    assert len({e["run_id"] for e in setup.runs("g")}) == 1
    assert setup.runs("g")[-1]["host_status"] == "budgetLimited"
    assert [t.status for t in setup.goal_turns(sid)].count("interrupted") == 1
    assert "did not start" not in json.dumps(status)


def test_reopen_through_the_service_runs_again_on_the_owners_note(
    setup: Setup, mock: MockResponsesServer
) -> None:
    """The page's Reopen (`POST /api/goals/G/reopen`): a run Codex said was done runs again,
    its objective the owner's note, recorded once as reopened."""
    setup.goal("g", 50000)
    mock.script(
        'mock:call=update_goal {"status": "complete"}', "mock:text=done", default="mock:text=more"
    )
    proc = setup.serve()
    try:

        def ended() -> list[dict[str, Any]]:
            return [e for e in setup.runs("g") if e["event"] == "ended"]

        code, doc = setup.call("POST", "/api/goals/g/run", {})
        assert code == 202, doc
        wait_until(lambda: len(ended()) == 1)
        assert ended()[0]["host_status"] == "complete"
        code, doc = setup.call("POST", "/api/goals/g/reopen", {"note": "  "})
        assert code == 400 and "usage_error" in str(doc), doc  # a note is required
        code, doc = setup.call("POST", "/api/goals/g/reopen", {"note": "also say four"})
        assert code == 202, doc
        assert isinstance(doc, dict) and doc["run"]["objective_source"] == "owner_note"
        wait_until(lambda: len(ended()) == 2)
        events = [e["event"] for e in setup.runs("g")]
        assert events.count("reopened") == 1 and events.count("run_authorized") == 2
        assert ended()[1]["host_status"] != "complete"  # the mock only talks now: budget
    finally:
        _stop(proc)

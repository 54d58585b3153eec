"""A goal run kept within its limits, on the real codex against the mock (issue 34).

Budgets are hard and counted once: a run stops within the one model response in flight when
the tokens codex reports reach its budget, even inside one turn that would otherwise go on
calling tools, and the ledger, the progress lines and codex's count of the goal agree.
Runaway loops stop: turns that repeat themselves (no tool call, the same answer) or pass the
owner's `--max-turns` pause the run with an owner gate that says why. Codex dying is
recovered: a killed app-server is started again and the thread resumed, the same run with
its budget and id, one turn recorded interrupted; when every restart dies too, the run ends
failed with the reason, and the first screen never calls it a loop loopx-chat did not start.
A run never waits for nothing: a turn interrupted outside loopx-chat (codex keeps the goal
`active` and starts no further turn) pauses the run at once, with that reason, not after the
idle timeout; nor does the owner's `chat interrupt` of the run's turn, from another process
or the run's own (its inbox, no file): the turn stops at once and the run pauses, with the
owner's reason. A run whose process died is paused by the interrupt itself, so recovery
does not take it up again: killed mid-turn or between turns, its thread held by the process
that answers (let go first), or being taken up by it (asked through the run's inbox).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.host_connection import Notification, RpcError
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.controller.goal_run import GoalRunner, RunResult
from loopx_chat.controller.run_inbox import PauseAsked
from loopx_chat.errors import LoopxChatError
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore
from tests.helpers.goal_runs import (
    goal_loop_turns,
    marker_writes,
    paused_by_owner_interrupt,
    run_events,
)
from tests.helpers.owner_cli import OwnerCli
from tests.helpers.real_codex import make_controller
from tests.helpers.waiting import run_in_thread, wait_for, wait_value

# Far more tool calls than any budget here allows: a turn that never ends by itself.
RUNAWAY_CALLS = 400


@pytest.fixture
def cli(tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str) -> OwnerCli:
    return OwnerCli(tmp_path, bound_home, base_env, codex_bin)


Controllers = Callable[[], ChatController]


@pytest.fixture
def controller(
    cli: OwnerCli, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> Controllers:
    """A controller on `cli`'s state and home, made when called (a service's, in this test)."""
    return lambda: make_controller(cli.state, bound_home, base_env, codex_bin)


def _goal_with_session(cli: OwnerCli) -> str:
    done = cli("goal", "set", "g", "--objective", "count to three", "--acceptance", "3 said")
    assert done.returncode == 0, done.stderr
    code, doc = cli.json("chat", "new", "--goal", "g", "mock:text=ready")
    assert code == 0, doc
    return str(doc["session_id"])


@pytest.fixture
def runner(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> Iterator[GoalRunner]:
    """A goal run's runner in this process (so a test can hold its thread), on goal `g`
    whose session has had one chat turn."""
    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        GoalLedger(GateStore(state)).set_goal_state(
            "g", {"objective": "count on", "acceptance": ["counted"]}
        )
        session = c.open_session("g", tmp_path)
        c.submit_turn(session.session_id, "mock:text=ready")
        yield GoalRunner(c, GateStore(state))


def _follower(runner: GoalRunner, budget: int) -> Any:
    """An authorized run of goal `g` with `budget`, not started (`.our_run().run()` follows it)."""
    plan = runner.plan("g", None, budget)
    return runner.follower(runner.authorize(plan, actor="owner", surface="cli"), plan)


# -- budgets -------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [5000, 50000])
def test_a_turn_that_reaches_the_budget_is_interrupted_within_one_response(
    cli: OwnerCli, mock: MockResponsesServer, budget: int
) -> None:
    sid = _goal_with_session(cli)
    first = len(mock.response_tokens)
    mock.script(*["mock:call=no_such_tool {}"] * RUNAWAY_CALLS, default="mock:text=done")
    code, doc = cli.json("goal", "run", "g", "--token-budget", str(budget))
    served = mock.response_tokens[first:]  # each model response's tokens, in order
    assert code == 3, doc  # budget spent
    assert doc["run"]["ended_by"] == "the budget"
    assert doc["host_goal"]["status"] == "budgetLimited"
    spent = doc["ledger_tokens"]
    # Over the budget by less than the one response that reached it; codex's loop did not
    # run the remaining scripted calls.
    assert budget <= spent < budget + max(served)
    assert len(served) < RUNAWAY_CALLS
    # One figure: the ledger, codex's count of the goal and the run's record agree.
    assert doc["host_tokens_used"] == spent and doc["differences"] == []
    turns = goal_loop_turns(cli.state, sid)
    assert sum(t.tokens.total_tokens for t in turns) == spent
    assert turns[-1].status == "interrupted"
    assert run_events(cli.state, "g")[-1]["run_tokens"] == spent


def test_a_resumed_threads_earlier_tokens_are_not_charged_to_the_run(
    cli: OwnerCli, mock: MockResponsesServer
) -> None:
    """The run's process resumes a thread whose chat turns already spent more than the
    budget. The budget's reader-side count (`budget_trip`) once started from zero: codex's
    repeat of the thread's total, read before the count was tapped in, was charged to the
    run's first turn, which was interrupted after its first response while the run's own
    count was below the budget; codex then started nothing, and the run waited out the idle
    timeout and ended paused. The run now spends its budget, counted once."""
    budget = 5000
    sid = _goal_with_session(cli)
    for n in range(4):  # the thread's earlier turns: more tokens than the run's budget
        sent = cli("chat", "send", sid, "--json", f"mock:text=earlier {n}")
        assert sent.returncode == 0, sent.stderr
    earlier = sum(t.tokens.total_tokens for t in SessionStore(cli.state).list_turns(sid))
    assert earlier > budget
    mock.script(*["mock:call=no_such_tool {}"] * RUNAWAY_CALLS, default="mock:text=done")
    first = len(mock.response_tokens)
    code, doc = cli.json("goal", "run", "g", "--token-budget", str(budget))
    served = mock.response_tokens[first:]
    assert code == 3, doc
    assert doc["run"]["ended_by"] == "the budget"
    spent = doc["ledger_tokens"]
    assert budget <= spent < budget + max(served)
    assert doc["host_tokens_used"] == spent and doc["differences"] == []


def test_the_budgets_base_is_the_resumes_answer_unless_the_thread_was_resumed_before(
    runner: GoalRunner, mock: MockResponsesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume asks codex for the thread's goal (is it running a loop no run of ours
    started?), and the run's start asked again on the same app-server, for its budget's base:
    two round trips on the way to the goal set. A run that resumes its thread (`goal run` in
    its own process) now takes the resume's answer. A thread resumed before (for chat turns,
    as in the service) is asked again: chat turns count for the goal too, and a base taken
    at that resume would charge them to the run."""
    asked: list[tuple[int, str]] = []  # (app-server, method): each request codex was sent
    send = AppServerProcess._send

    def logged(proc: AppServerProcess, message: Any, *args: Any, **kwargs: Any) -> None:
        if "id" in message:
            asked.append((proc.pid, str(message["method"])))
        send(proc, message, *args, **kwargs)

    monkeypatch.setattr(AppServerProcess, "_send", logged)
    controller = runner.controller
    sid = runner.plan("g", None, 5000).session.session_id
    mock.script(default="mock:text=working on it")
    controller.drop_thread(sid)  # the run resumes its thread itself
    result = _follower(runner, 5000).our_run().run()
    assert result.exit_code == 3 and result.differences == ()
    [resumed_on] = [pid for pid, method in asked if method == "thread/resume"]
    on_it = [method for pid, method in asked if pid == resumed_on]
    assert on_it.count("thread/goal/get") == 1, on_it
    assert on_it.index("thread/goal/get") < on_it.index("thread/goal/set")

    controller.drop_thread(sid)
    controller.submit_turn(sid, "mock:text=a chat turn")  # resumed here, for a chat turn
    controller.submit_turn(sid, "mock:text=and another, spending on the goal")
    asked.clear()
    result = _follower(runner, 5000).our_run().run()
    assert [method for _, method in asked].count("thread/goal/get") == 1  # asked afresh
    assert result.exit_code == 3 and result.differences == ()
    assert result.host_tokens == result.ledger_tokens >= 5000


# How late the run's own thread takes the count that reaches the budget, and how long the
# mock takes to finish each tool call response: a loaded machine's scheduling, made certain.
LATE_SEC = 1.5
CALL_SEC = 0.3


def test_the_budget_holds_when_the_runs_thread_takes_the_count_late(
    runner: GoalRunner, mock: MockResponsesServer
) -> None:
    """Issue 34, race 1: inside a turn of tool calls codex checks no budget, and its next
    model request follows the response that reached it at once. On a loaded machine the
    run's thread took that count from its inbox late, and codex's next responses were spent
    before its interrupt. The interrupt no longer waits for the run's thread: here that
    thread is held LATE_SEC (five responses' time) at the count that reaches the budget, and
    the run still overspends by less than the one response in flight."""
    budget = 5000
    follow = _follower(runner, budget)
    limits = follow.our_run().limits
    check = limits.check_budget

    def late(event: Any) -> None:
        if limits.spent_in is None and follow.spent(event.tokens or 0) >= budget:
            time.sleep(LATE_SEC)  # the run's thread, descheduled on a loaded machine
        check(event)

    limits.check_budget = late
    first = len(mock.response_tokens)
    call = f"mock:slow={CALL_SEC} mock:call=no_such_tool {{}}"
    mock.script(*[call] * RUNAWAY_CALLS, default="mock:text=done")
    result = follow.our_run().run()
    served = mock.response_tokens[first:]
    assert result.exit_code == 3 and result.host is not None
    assert result.host.status == "budgetLimited"
    assert budget <= result.ledger_tokens < budget + max(served), served
    assert result.differences == ()


@pytest.mark.parametrize("budget", [5000, 50000])
def test_turns_of_one_response_stop_at_the_first_turn_past_the_budget(
    cli: OwnerCli, mock: MockResponsesServer, budget: int
) -> None:
    sid = _goal_with_session(cli)
    before = len(mock.response_tokens)
    mock.script(default="mock:text=working on it")
    done = cli("goal", "run", "g", "--token-budget", str(budget))
    assert done.returncode == 3, done.stderr
    served = mock.response_tokens[before:]  # one response per turn
    spent = sum(t.tokens.total_tokens for t in goal_loop_turns(cli.state, sid))
    assert spent == sum(served)
    assert budget <= spent < budget + served[-1]
    # The progress lines count the same figure as the ledger.
    progress = [line for line in done.stderr.splitlines() if f" of {budget:,} tokens" in line]
    assert progress and f"{spent:,} of {budget:,} tokens" in progress[-1]


# -- the end -----------------------------------------------------------------------------
def _takes(follow: Any) -> list[bool]:
    """Whether each of the run's waits on its inbox got something (False: a quiet step)."""
    got: list[bool] = []
    take = follow.inbox.take

    def counted(timeout: float) -> tuple[bool, Any]:
        result = take(timeout)
        got.append(result[0])
        return result

    follow.inbox.take = counted
    return got


def test_a_run_codex_ends_by_itself_ends_on_its_last_event_and_a_paused_one_waits_a_step(
    runner: GoalRunner, mock: MockResponsesServer
) -> None:
    """Codex's own end (its budget, here) is followed by no turn: the run ends on the event
    that ends it, without a quiet step. A status the run set while a turn ran (the owner's
    Pause) may be crossed by a turn codex was starting: that run ends after a quiet step."""

    def follower() -> tuple[Any, list[bool]]:
        follow = _follower(runner, 12000)
        return follow, _takes(follow)

    mock.script(default="mock:text=working on it")
    follow, takes = follower()
    result = follow.our_run().run()
    assert result.exit_code == 3 and result.host is not None
    assert result.host.status == "budgetLimited"
    assert takes[-1] is True  # it ended on codex's event, not after a quiet step

    mock.script(default="mock:slow=0.3 mock:text=working on it")
    follow, takes = follower()
    thread, box = run_in_thread(follow.our_run().run)
    try:
        wait_for(lambda: len(follow.finished) >= 1 and bool(follow.loop.open_turns))
        follow.pause()  # the owner's Pause while codex's second turn runs
    finally:
        thread.join(60)
    result = box["result"]
    assert isinstance(result, RunResult) and result.exit_code == 6, box
    assert result.host is not None and result.host.status == "paused"
    assert takes[-1] is False  # the run set the status: it ended after a quiet step


# How late codex's word that a turn started reaches the run, and how long the run takes to
# set the goal's status at a turn's end: a loaded machine's scheduling, made certain.
NOTE_LATE_SEC = 1.0
SET_LATE_SEC = 0.3


class _LateStart(queue.Queue[Any]):
    """A run's inbox where codex's notifications, from the second `turn/started` on, arrive
    NOTE_LATE_SEC late (in their order; codex's answers are not held): codex saying a turn
    started long after the run set the goal's status, as it did once on a loaded machine.
    What codex's reader is given first (`taps`: the budget's and the guard's trips) sees each
    notification as it is put here, so it is late for them too, as it was from codex."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0
        self.held: list[Any] | None = None
        self.lock = threading.Lock()
        self.taps: list[Any] = []

    def _put_now(self, item: Any) -> None:
        if isinstance(item, Notification):
            for tap in self.taps:
                tap(item)
        super().put(item)

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self.lock:
            if isinstance(item, Notification) and item.method == "turn/started":
                self.starts += 1
                if self.starts == 2:
                    self.held = []
                    threading.Timer(NOTE_LATE_SEC, self._release).start()
            if self.held is not None and (item is None or isinstance(item, Notification)):
                self.held.append(item)
                return
            self._put_now(item)

    def _release(self) -> None:
        with self.lock:
            held, self.held = self.held or [], None
            for item in held:
                self._put_now(item)


def test_a_turn_codex_says_it_started_after_the_run_went_quiet_is_recorded(
    runner: GoalRunner, mock: MockResponsesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34, race 2: the run set the goal's status (here: paused by --max-turns at the
    first turn's end, SET_LATE_SEC after codex started the second), went quiet for a step
    and ended; codex's `turn/started` of the second came later, and that turn ran
    unrecorded. Now the run asks codex which turn runs before it ends, and follows it."""
    plan = runner.plan("g", None, 50000, max_turns=1)
    follow = runner.follower(runner.authorize(plan, actor="owner", surface="cli"), plan)
    follow.inbox.queue = late = _LateStart()
    monkeypatch.setattr(
        AppServerProcess, "tap", lambda _proc, hook: hook and late.taps.append(hook)
    )
    set_status = follow.set_goal

    def set_late(status: str, **kwargs: Any) -> Any:
        if status == "paused":
            time.sleep(SET_LATE_SEC)  # the run's thread, late at the first turn's end
        return set_status(status, **kwargs)

    follow.set_goal = set_late
    mock.script("mock:text=first", "mock:slow=0.3 mock:text=a b c d e f", default="mock:text=on")
    result = follow.our_run().run()
    assert late.starts >= 2  # codex started the second turn
    assert result.exit_code == 6 and result.host is not None  # paused by the guard
    assert result.host.status == "paused"
    assert result.differences == ()  # codex's rollout counts the turns the ledger has
    assert [t.status for t in follow.finished] == ["completed", "interrupted"]


# -- runaway loops ------------------------------------------------------------------------
def _facts_agree(differences: list[str]) -> bool:
    """Whether a run's result finds codex's rollout counting what the ledger counts."""
    return not [d for d in differences if d.startswith("codex facts")]


def _open_gates(cli: OwnerCli) -> list[str]:
    return [g.question for g in GateStore(cli.state).gates("g") if g.status == "pending"]


def test_a_loop_that_repeats_itself_is_paused_with_a_gate_after_three_turns(
    cli: OwnerCli, mock: MockResponsesServer
) -> None:
    sid = _goal_with_session(cli)
    # The same answer, no tool call, turn after turn; far more of them than the guard allows.
    mock.script(*["mock:text=still thinking about it"] * 20, default="mock:text=unused")
    done = cli("goal", "run", "g", "--token-budget", "400000")
    assert done.returncode == 6, done.stderr  # paused
    turns = goal_loop_turns(cli.state, sid)
    assert [t.status for t in turns[:3]] == ["completed"] * 3
    # The turn codex was starting as the guard paused the goal (if it was): recorded, and
    # stopped at once (it may have finished first); codex's rollout counts the turns and
    # tokens the ledger has (the host goal may count less: codex stops counting a turn
    # whose goal was paused mid-turn).
    assert len(turns) <= 4
    ended = run_events(cli.state, "g")[-1]
    assert _facts_agree(ended["result"]["differences"])
    assert ended["by"] == "loopx-chat (runaway guard)"
    assert ended["host_status"] == "paused"
    assert "no progress in 3 turns in a row" in done.stderr
    [question] = _open_gates(cli)
    assert question.startswith("Goal g is paused: Codex made no progress in 3 turns in a row")
    # The gate holds the goal: a new run is refused until the owner decides it.
    again = cli("goal", "run", "g", "--token-budget", "1000")
    assert again.returncode != 0 and "gate_open" in again.stderr


# Loaded into the `goal run` process ahead of everything (`sitecustomize`): each turn's
# record takes 0.4 s more to write, as on a loaded machine, so the run's own thread reads each
# turn's end long after codex has gone on to the next ones.
_SLOW_LEDGER = """
import time
from loopx_chat.controller import turn_ledger
_finish = turn_ledger.TurnLedger.finish
def finish(self, *args, **kwargs):
    time.sleep(0.4)
    return _finish(self, *args, **kwargs)
turn_ledger.TurnLedger.finish = finish
"""


def test_a_run_whose_own_thread_lags_still_stops_the_loop_one_turn_past_the_guard(
    cli: OwnerCli, mock: MockResponsesServer, tmp_path: Path
) -> None:
    """Codex's reader stops the turns past the guard: the run's thread, reading each turn's
    end long after codex went on, would have let codex run several more."""
    sid = _goal_with_session(cli)
    site = tmp_path / "slow-ledger"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SLOW_LEDGER)
    cli.env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), cli.env.get("PYTHONPATH", "")) if p
    )
    mock.script(*["mock:text=still thinking about it"] * 20, default="mock:text=unused")
    done = cli("goal", "run", "g", "--token-budget", "400000")
    assert done.returncode == 6, done.stderr
    turns = goal_loop_turns(cli.state, sid)
    assert [t.status for t in turns[:3]] == ["completed"] * 3
    assert len(turns) <= 4, [t.status for t in turns]
    assert all(t.status == "interrupted" for t in turns[3:])
    assert run_events(cli.state, "g")[-1]["by"] == "loopx-chat (runaway guard)"
    assert "no progress in 3 turns in a row" in done.stderr


def test_max_turns_pauses_a_loop_that_gets_somewhere(
    cli: OwnerCli, mock: MockResponsesServer
) -> None:
    sid = _goal_with_session(cli)
    mock.script(default="mock:text=one more step")  # numbered: a different answer each turn
    code, doc = cli.json("goal", "run", "g", "--token-budget", "400000", "--max-turns", "2")
    assert code == 6, doc
    turns = goal_loop_turns(cli.state, sid)
    assert [t.status for t in turns[:2]] == ["completed"] * 2
    assert len(turns) <= 3  # as above
    assert doc["turns"] == len(turns) and _facts_agree(doc["differences"])
    assert doc["run"]["ended_by"] == "loopx-chat (runaway guard)"
    [question] = _open_gates(cli)
    assert "reached its limit of 2 turns (--max-turns)" in question


@pytest.mark.parametrize("owner", ["pause", "pause taken late", "goal stop"])
def test_the_owners_pause_as_the_guards_last_turn_ends_stops_no_turn_on_its_account(
    runner: GoalRunner,
    cli: OwnerCli,
    mock: MockResponsesServer,
    monkeypatch: pytest.MonkeyPatch,
    owner: str,
) -> None:
    """The owner pauses the run just before the end of the turn that reaches `--max-turns`,
    and codex starts its next turn before it hears of it (the run sets the goal paused only
    once codex's reader saw that turn start: the race made certain). The owner came first,
    so the run is the owner's pause: no gate, and the turn codex started runs to its end, as
    after any pause. Codex's reader had counted the turns too, and stopped that turn on the
    guard's account: it was recorded `interrupted`, the owner's pause saying nothing of it.
    The owner's Pause is put in the run's inbox before that end; taken before it (`pause`),
    or after codex's reader saw the next turn start (`pause taken late`: the run's thread
    late). `goal stop` is another process's record, which the run takes at a look, here
    before it takes that end."""
    plan = runner.plan("g", None, 400000, max_turns=2)
    follow = runner.follower(runner.authorize(plan, actor="owner", surface="cli"), plan)
    started: set[str] = set()
    ended: list[str] = []
    pausing, next_started = threading.Event(), threading.Event()
    tap = AppServerProcess.tap

    def tapped(proc: AppServerProcess, hook: Any) -> None:
        def see(note: Notification) -> None:
            turn = note.params.get("turn") or {}
            if note.method == "turn/started":
                started.add(str(turn.get("id")))
                if len(ended) >= 2:
                    next_started.set()
            elif note.method == "turn/completed" and turn.get("id") in started:
                ended.append(turn["id"])
                if len(ended) == 2 and owner == "goal stop":
                    GoalLedger(GateStore(cli.state)).set_stopped("g", True, actor="owner")
                    pausing.wait(60)  # the run took it at a look before this end
                elif len(ended) == 2:
                    follow.pause()  # in the run's inbox before this end
            hook(note)

        tap(proc, see if hook is not None else None)

    monkeypatch.setattr(AppServerProcess, "tap", tapped)
    set_status, take = follow.set_goal, follow._take

    def set_once_codex_went_on(status: str, **kwargs: Any) -> Any:
        if status == "paused":
            pausing.set()
            next_started.wait(60)  # codex starts its next turn before it hears of it
        return set_status(status, **kwargs)

    def take_late(item: Any, **kwargs: Any) -> Any:
        if isinstance(item, PauseAsked) and owner == "pause taken late":
            next_started.wait(60)  # the run's thread takes the Pause late
        return take(item, **kwargs)

    follow.set_goal, follow._take = set_once_codex_went_on, take_late
    mock.script(default="mock:slow=0.2 mock:text=one more step")  # numbered: progress
    result = follow.our_run().run()
    assert next_started.is_set()  # codex went on past the guard's last turn
    assert result.exit_code == 6 and result.host is not None
    assert result.host.status == "paused"
    ended_record = run_events(cli.state, "g")[-1]
    by = "owner (goal stop)" if owner == "goal stop" else "owner (Pause)"
    assert (ended_record["by"], ended_record["reason"]) == (by, None)
    assert _open_gates(cli) == []
    turns = goal_loop_turns(cli.state, follow.loop.session_id)
    assert len(turns) >= 3
    assert [t.status for t in turns] == ["completed"] * len(turns)
    # Codex's rollout counts what the ledger does (the host goal counts less of the turn it
    # heard of the pause in).
    assert _facts_agree(list(result.differences)), result.differences


# -- codex dying ---------------------------------------------------------------------------
def _app_servers(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "codex" in _name(c)]


def _name(process: psutil.Process) -> str:
    """Its name, or "" when it ended since it was listed (a killed app-server's helpers)."""
    try:
        return process.name()
    except psutil.NoSuchProcess:
        return ""


def _kill_app_server(pid: int, seen: set[int]) -> bool:
    """SIGKILL one app-server of the run not killed before; whether there was one."""
    for child in _app_servers(pid):
        if child.pid not in seen:
            seen.add(child.pid)
            try:
                os.kill(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                continue  # it ended on its own since it was listed
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


# -- an interrupt from outside ----------------------------------------------------------------
OWNER_PAUSED_LINE = "paused: the owner interrupted its turn (`chat interrupt`)"


def _said_paused(cli: OwnerCli, line: str, words: str) -> dict[str, Any]:
    """Goal `g`'s run ended paused: `goal follow` ends with `line` (exit 6), the first screen
    says `words`; the host goal as `status` shows it."""
    done = cli("goal", "follow", "g")
    assert done.returncode == 6, done.stderr
    assert line in done.stderr
    code, doc = cli.json("status", "--goal", "g")
    assert code == 0, doc
    host_goal: dict[str, Any] = doc["attention_queue"][0]["host_goal"]
    assert host_goal["words"] == words
    return host_goal


def _run_on_its_next_turn(
    runner: GoalRunner, mock: MockResponsesServer, slow: float
) -> tuple[Any, threading.Thread, dict[str, object]]:
    """A run of goal `g` on a thread of this process (a foreground run's hold of the thread),
    once it finished a turn and codex runs the next; each response takes `slow` s."""
    mock.script(default=f"mock:slow={slow:g} mock:text=one more step")
    follow = _follower(runner, 400000)
    thread, box = run_in_thread(follow.our_run().run)
    try:
        wait_for(lambda: len(follow.finished) >= 1 and bool(follow.loop.open_turns))
        # The turn is open before the ledger names it the session's: an interrupt waits for both.
        store, sid = runner.controller.store, follow.loop.session_id
        wait_for(lambda: bool(store.load(sid).active_turn_id))
    except AssertionError:
        follow.stop()
        thread.join(60)
        raise
    return follow, thread, box


def _interrupt_from_outside(follow: Any) -> str:
    """Interrupt the loop's running turn as another client of codex does (the Codex TUI's
    Esc, another app-server client): `turn/interrupt` on the app-server that holds the
    thread, sent past the run, which knows nothing of it. The turn it stopped."""
    thread = follow.watch.thread
    while True:
        turn_id = wait_value(
            lambda: next(iter(follow.loop.open_turns), None), what="a running turn"
        )
        try:
            thread.proc.request(
                "turn/interrupt", {"threadId": thread.thread_id, "turnId": turn_id}, 30
            )
        except RpcError:
            continue  # that turn ended as it was asked: the next one
        return str(turn_id)


def test_a_turn_interrupted_outside_loopx_chat_pauses_the_run_with_that_reason(
    runner: GoalRunner, cli: OwnerCli, mock: MockResponsesServer
) -> None:
    """Issue 34: codex keeps the goal `active` after an interrupt it did not get from the
    run, and starts no further turn; the run used to wait out its idle timeout (180 s, left
    at its default here) and then pause "no turn for the idle timeout". It now asks codex
    whether a turn runs and pauses the goal at once, with the interrupt as its reason."""
    follow, thread, box = _run_on_its_next_turn(runner, mock, 0.3)
    sid = follow.loop.session_id
    try:
        stopped = _interrupt_from_outside(follow)
    finally:
        thread.join(300)  # longer than the idle timeout: an old run ends, by it
    result = box.get("result")
    assert isinstance(result, RunResult), box
    ended = run_events(cli.state, "g")[-1]
    assert ended["event"] == "ended"
    assert ended["reason"] == "turn_interrupted_outside", ended  # not the idle timeout
    assert ended["by"] == "loopx-chat (the turn was interrupted outside loopx-chat)"
    assert result.exit_code == 6 and result.host is not None  # as for a paused run
    assert result.host.status == "paused" and ended["host_status"] == "paused"
    # The stopped turn is recorded once, interrupted, and no turn came after it.
    turns = goal_loop_turns(cli.state, sid)
    assert [t.status for t in turns if t.upstream_turn_id == stopped] == ["interrupted"]
    assert turns[-1].upstream_turn_id == stopped
    assert [t.status for t in turns[:-1]] == ["completed"] * (len(turns) - 1)
    # Said plainly at the run's end (`goal follow` says what `goal run` said) and on the card.
    why = "by loopx-chat (the turn was interrupted outside loopx-chat)"
    host_goal = _said_paused(
        cli, "paused: the turn was interrupted outside loopx-chat", f"paused {why}"
    )
    assert host_goal["says"].startswith(f"Paused {why} (turn ")  # the card's sentence


def test_chat_interrupt_from_another_process_stops_the_runs_turn_and_pauses_it(
    runner: GoalRunner, cli: OwnerCli, mock: MockResponsesServer
) -> None:
    """Issue 34: `chat interrupt` on a session whose running turn is a goal run's wrote the
    interrupt marker, which nothing of the run looked at, and answered ok: the turn and the
    loop went on. The run now takes the marker at its next look: the turn is interrupted
    now, the goal paused, the run ended with the owner's reason (not the idle timeout's,
    left at its default 180 s, nor "outside loopx-chat"), and the command says so."""
    follow, thread, box = _run_on_its_next_turn(runner, mock, 1)
    sid = follow.loop.session_id
    try:
        code, doc = cli.json("chat", "interrupt", sid)  # a CLI process: the run holds the thread
    finally:
        thread.join(60)
        if thread.is_alive():  # the interrupt did not stop it: end it, then fail below
            follow.stop()
            thread.join(60)
    assert code == 0, doc
    ended = run_events(cli.state, "g")[-1]
    assert ended["event"] == "ended"
    assert ended["reason"] == "turn_interrupted_by_owner", ended
    assert ended["by"] == "owner (chat interrupt)"
    assert ended["host_status"] == "paused"
    result = box.get("result")
    assert isinstance(result, RunResult), box
    assert result.exit_code == 6 and result.host is not None and result.host.status == "paused"
    # The command's answer: the turn, now interrupted, and the run as it ended.
    turns = goal_loop_turns(cli.state, sid)
    stopped = turns[-1]
    assert [t.status for t in turns] == ["completed"] * (len(turns) - 1) + ["interrupted"]
    assert doc["turn"]["id"] == stopped.turn_id and doc["turn"]["status"] == "interrupted"
    assert doc["goal_run"] == paused_by_owner_interrupt(ended["run_id"])
    assert not (cli.state / "sessions" / sid / "interrupt.request").exists()  # taken once
    # Said plainly at the run's end, in any shell, and on the first screen.
    _said_paused(cli, OWNER_PAUSED_LINE, "paused by owner (chat interrupt)")
    # Nothing runs now: a second interrupt says so.
    code, again = cli.json("chat", "interrupt", sid)
    assert code != 0 and again["error_code"] == "turn_not_active", again


def test_chat_interrupt_in_the_runs_own_process_goes_through_its_inbox_not_a_file(
    runner: GoalRunner, cli: OwnerCli, mock: MockResponsesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: in the process that follows the run (the service), `chat interrupt` wrote
    the session's marker file, which the run's own follower read back at its next look. It
    now puts the ask in the run's inbox: the turn stops and the run pauses, with the owner's
    reason, and no marker is ever written (the marker is another process's way)."""
    written = marker_writes(monkeypatch)
    follow, thread, box = _run_on_its_next_turn(runner, mock, 1)
    sid = follow.loop.session_id
    store = SessionStore(cli.state)
    try:
        # The session names the running turn (the run recorded it), as a caller sees it.
        wait_for(lambda: store.load(sid).active_turn_id in follow.loop.ids)
        doc = runner.controller.interrupt(sid)  # the run's own process answers it
    finally:
        thread.join(60)
        if thread.is_alive():
            follow.stop()
            thread.join(60)
    assert written == []
    assert not (cli.state / "sessions" / sid / "interrupt.request").exists()
    ended = run_events(cli.state, "g")[-1]
    assert ended["event"] == "ended"
    assert (ended["reason"], ended["by"]) == ("turn_interrupted_by_owner", "owner (chat interrupt)")
    result = box.get("result")
    assert isinstance(result, RunResult), box
    assert result.exit_code == 6 and result.host is not None and result.host.status == "paused"
    assert doc["goal_run"] == paused_by_owner_interrupt(ended["run_id"])
    turns = goal_loop_turns(cli.state, sid)
    assert [t.status for t in turns] == ["completed"] * (len(turns) - 1) + ["interrupted"]
    assert doc["turn"]["id"] == turns[-1].turn_id and doc["turn"]["status"] == "interrupted"


def _killed_mid_turn(cli: OwnerCli, mock: MockResponsesServer) -> tuple[str, dict[str, Any]]:
    """A `goal run` of `g` killed (SIGKILL) once a turn finished and the next one runs: its
    run still recorded running, its process and its codex gone. The session and that record."""
    sid = _goal_with_session(cli)
    mock.script(default="mock:slow=1 mock:text=one more step")
    store = SessionStore(cli.state)
    run = cli.start("goal", "run", "g", "--token-budget", "400000")
    try:
        # A turn finished (codex counted its tokens for the goal), the next one running.
        wait_for(
            lambda: (
                [t.status for t in goal_loop_turns(cli.state, sid)][-2:] == ["completed", "running"]
            )
        )
        wait_for(lambda: bool(store.load(sid).active_turn_id))
        codex = psutil.Process(run.pid).children(recursive=True)
        run.kill()
        run.wait(30)
    finally:
        if run.poll() is None:
            run.kill()
    psutil.wait_procs(codex, timeout=30)  # its app-server ends with its stdin
    died = run_events(cli.state, "g")[-1]
    assert died["event"] == "started"  # recorded running; its process is gone
    return sid, died


def test_chat_interrupt_of_a_run_whose_process_died_pauses_it_and_recovery_leaves_it(
    cli: OwnerCli,
    mock: MockResponsesServer,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
) -> None:
    """Issue 34: a `goal run` killed mid-turn (its run still recorded running, its pid gone):
    `chat interrupt` recorded the turn interrupted and answered `goal_run: null`, and the next
    service start took the run up again (`RunPool.recover`): codex went on with the goal, the
    owner's interrupt lost. It is now recorded on the run: the host goal is paused and the
    run ends paused with the owner's reason, the answer says so, and recovery leaves it,
    also one that found the run before the interrupt and loads its thread after."""
    from loopx_chat.controller.run_pool import RunPool

    sid, died = _killed_mid_turn(cli, mock)
    store = SessionStore(cli.state)
    with make_controller(cli.state, bound_home, base_env, codex_bin) as c:
        pool = RunPool(c, GateStore(cli.state))
        # A service start that found the run before the interrupt, and loads its thread after.
        found: list[Any] = []
        pool._launch = found.append  # type: ignore[method-assign]
        assert pool.recover() == [died["run_id"]]
        code, doc = cli.json("chat", "interrupt", sid)
        assert code == 0, doc
        assert doc["goal_run"] == paused_by_owner_interrupt(died["run_id"])
        turns = goal_loop_turns(cli.state, sid)
        assert doc["turn"]["id"] == turns[-1].turn_id and doc["turn"]["status"] == "interrupted"
        ended = run_events(cli.state, "g")[-1]
        assert (ended["event"], ended["host_status"]) == ("ended", "paused"), ended
        # Its result counts as the run's own end does: codex's goal since the run started,
        # and the thread's rollout against the ledger (both were null).
        result = ended["result"]
        assert result["host_tokens_used"] > 0, result
        assert result["host_tokens_used"] == ended["tokens_used"] - died["host_tokens_before"]
        assert result["codex_facts"]["ledger_turns"] == len(store.list_turns(sid)), result
        with pytest.raises(LoopxChatError) as left:
            found[0].our_run().run()
        assert left.value.error_code == "run_not_found"  # read again: left as it is
        assert run_events(cli.state, "g")[-1] == ended
        # A later service start does not take it up either; codex's goal stays paused.
        assert pool.recover() == [] and len(found) == 1
        pool.close()
    assert [e["event"] for e in run_events(cli.state, "g")].count("recovered") == 0
    host_goal = _said_paused(cli, OWNER_PAUSED_LINE, "paused by owner (chat interrupt)")
    assert host_goal["goal"]["status"] == "paused", host_goal


def test_chat_interrupt_of_a_dead_run_when_codex_cannot_start_says_how_to_stop_it(
    cli: OwnerCli,
    mock: MockResponsesServer,
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
) -> None:
    """Pausing a dead run needs codex (the host goal is set `paused`). When codex cannot
    start, `chat interrupt` said only codex's own error: the owner was not told that the run
    is still recorded running, so the next service start takes it up again, nor how to keep
    it from that without codex (`goal stop`, which the run's recovery reads)."""
    from loopx_chat.controller.run_pool import RunPool

    sid, died = _killed_mid_turn(cli, mock)
    broken = tmp_path / "broken-codex"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    offline = OwnerCli(cli.tmp, bound_home, base_env, str(broken))
    code, doc = offline.json("chat", "interrupt", sid)
    assert code != 0 and doc["ok"] is False, doc
    assert died["run_id"] in doc["error"] and "not paused" in doc["error"], doc
    assert "goal stop g" in doc["gate"]["next_action"], doc
    assert run_events(cli.state, "g")[-1] == died  # still recorded running, as it says
    assert goal_loop_turns(cli.state, sid)[-1].status == "interrupted"  # its turn settled
    with make_controller(cli.state, bound_home, base_env, codex_bin) as c:
        found: list[Any] = []
        pool = RunPool(c, GateStore(cli.state))
        pool._launch = found.append  # type: ignore[method-assign]
        assert pool.recover() == [died["run_id"]]  # a service start would take it up
        # What the remedy says, without codex: then no service start takes it up.
        done = offline("goal", "stop", "g")
        assert done.returncode == 0, done.stderr
        assert RunPool(c, GateStore(cli.state)).recover() == []
        pool.close()


# A `goal run` that kills itself (SIGKILL) between turns: once it recorded the run
# `started` (DIE_AFTER=started: before any turn), or a continuation turn `completed`
# (before it records the next one codex starts).
DIES_BETWEEN_TURNS = """
import os, signal
from loopx_chat.cli import run
from loopx_chat.controller.loop_turns import LoopTurns
from loopx_chat.goals.goal_runs import GoalRuns

after = os.environ.pop("DIE_AFTER")
note, on = GoalRuns.note, LoopTurns.on

def note_then_die(self, goal_id, run_id, event, **fields):
    noted = note(self, goal_id, run_id, event, **fields)
    if event == after:
        os.kill(os.getpid(), signal.SIGKILL)
    return noted

def on_then_die(self, event):
    ended = on(self, event)
    if ended is not None and ended.status == after:
        os.kill(os.getpid(), signal.SIGKILL)
    return ended

GoalRuns.note, LoopTurns.on = note_then_die, on_then_die
run()
"""


def _killed_between_turns(
    cli: OwnerCli, mock: MockResponsesServer, after: str
) -> tuple[str, dict[str, Any]]:
    """A `goal run` of `g` killed (SIGKILL) right after its record `after` (`started`, or a
    turn `completed`): its run still recorded running, no turn of the session running, its
    process and its codex gone. The session and that record."""
    sid = _goal_with_session(cli)
    mock.script(default="mock:slow=1 mock:text=one more step")
    argv = [sys.executable, "-c", DIES_BETWEEN_TURNS, *cli.base[3:], "goal", "run", "g"]
    run = subprocess.Popen(
        [*argv, "--token-budget", "400000"],
        env={**cli.env, "DIE_AFTER": after},
        cwd=cli.tmp,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    codex: set[psutil.Process] = set()

    def died() -> bool:
        with contextlib.suppress(psutil.Error):
            codex.update(psutil.Process(run.pid).children(recursive=True))
        return run.poll() is not None

    try:
        wait_for(died, 60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == -signal.SIGKILL
    psutil.wait_procs(codex, timeout=30)  # its app-server ends with its stdin
    turns = [t.status for t in goal_loop_turns(cli.state, sid)]
    assert turns == ([] if after == "started" else ["completed"])
    assert not SessionStore(cli.state).load(sid).active_turn_id  # no turn runs
    died_run = run_events(cli.state, "g")[-1]
    assert died_run["event"] == "started"  # recorded running; its process is gone
    return sid, died_run


def _ended_for_it(cli: OwnerCli, c: ChatController) -> None:
    """Goal `g`'s run ended as `chat interrupt` ends one whose process is gone (paused, with
    the owner's reason, `process_gone`), and a service start (on controller `c`) leaves it."""
    from loopx_chat.controller.run_pool import RunPool

    ended = run_events(cli.state, "g")[-1]
    assert (ended["event"], ended["host_status"], ended["reason"], ended["process_gone"]) == (
        "ended",
        "paused",
        "turn_interrupted_by_owner",
        True,
    ), ended
    assert ended["result"]["host_tokens_used"] is not None, ended
    assert ended["result"]["exit_code"] == 6, ended  # as a paused run's own end says
    pool = RunPool(c, GateStore(cli.state))
    assert pool.recover() == []
    pool.close()


@pytest.mark.parametrize("after", ["completed", "started"])
def test_chat_interrupt_of_a_run_that_died_between_turns_pauses_it(
    after: str, cli: OwnerCli, mock: MockResponsesServer, controller: Controllers
) -> None:
    """A `goal run` killed between turns (its run recorded running, its pid gone, no turn
    running): `chat interrupt` answered `turn_not_active` and left the run to the next
    service start, which took it up again: the owner asked to stop it, and it went on. It is
    now paused as a run that died mid-turn is, the same record and answer, naming its last
    turn (none, killed before its first); recovery leaves it. With no such run left,
    `turn_not_active` as before."""
    sid, died = _killed_between_turns(cli, mock, after)
    if after == "started":  # no turn to name: the command says what became of the run
        done = cli("chat", "interrupt", sid)
        assert done.returncode == 0, done.stderr
        words = f"goal g: run {died['run_id']} ended, goal paused, by owner (chat interrupt)"
        assert done.stdout.splitlines() == [words]
    else:
        code, doc = cli.json("chat", "interrupt", sid)
        assert code == 0, doc
        assert doc["goal_run"] == paused_by_owner_interrupt(died["run_id"])
        last = goal_loop_turns(cli.state, sid)[-1]
        assert (doc["turn"]["id"], doc["turn"]["status"]) == (last.turn_id, "completed")
    with controller() as c:
        _ended_for_it(cli, c)
    host_goal = _said_paused(cli, OWNER_PAUSED_LINE, "paused by owner (chat interrupt)")
    assert host_goal["goal"]["status"] == "paused", host_goal
    code, again = cli.json("chat", "interrupt", sid)
    assert code != 0 and again["error_code"] == "turn_not_active", again


@pytest.mark.parametrize("followed", [False, True])
def test_chat_interrupt_of_a_dead_run_whose_thread_this_process_holds_pauses_it(
    followed: bool, cli: OwnerCli, mock: MockResponsesServer, controller: Controllers
) -> None:
    """A run killed mid-turn whose thread the process answering `chat interrupt` then
    loaded (a resume or a `chat send` there; codex restarts the goal's loop at once, which
    the service follows as a loop loopx-chat did not start): the interrupt settled the
    turn, or stopped only the loop's turn, and answered `goal_run: null`, leaving the run
    recorded running for the next service start, its goal active, codex's loop running on
    that process's thread. The thread is now let go, as the run's death let it go, and the
    run paused as any dead run is."""
    from loopx_chat.controller.host_loops import HostLoops

    sid, died = _killed_mid_turn(cli, mock)
    store = SessionStore(cli.state)
    with controller() as c:
        loops = HostLoops(c, GateStore(cli.state))
        c.resume_session(sid)
        assert c.holds(sid)
        if followed:  # as the service does after a resume: the loop's turns are recorded
            loops.take_up()
            wait_for(lambda: goal_loop_turns(cli.state, sid)[-1].run_id is None)
            wait_for(lambda: bool(store.load(sid).active_turn_id))
        doc = c.interrupt(sid)
        assert doc["goal_run"] == paused_by_owner_interrupt(died["run_id"])
        # The turn it stopped: the followed loop's, else the run's (its process's last).
        turns = goal_loop_turns(cli.state, sid)
        stopped = turns[-1] if followed else [t for t in turns if t.run_id][-1]
        assert (doc["turn"]["id"], doc["turn"]["status"]) == (stopped.turn_id, "interrupted")
        assert not c.holds(sid)  # let go, and codex's loop on it with it
        assert all(t.status != "running" for t in store.list_turns(sid))
        _ended_for_it(cli, c)
        loops.close()
    code, doc = cli.json("status", "--goal", "g")
    assert code == 0, doc
    assert doc["attention_queue"][0]["host_goal"]["goal"]["status"] == "paused", doc


@pytest.mark.parametrize("window", ["loading its thread", "its thread loaded"])
def test_chat_interrupt_while_this_process_takes_a_dead_run_up_is_asked_of_the_run(
    window: str,
    cli: OwnerCli,
    mock: MockResponsesServer,
    controller: Controllers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A service start takes a run killed mid-turn up (`RunPool.recover`); before its
    `recovered` record, its process is still the dead one. `chat interrupt` there then
    wrote the interrupt marker (the thread loading: the service's own lock looked like
    another process's), which the recovered run ignored (it names the turn the dead process
    ran), or settled that turn and answered `goal_run: null` (the thread loaded): the run
    went on either way. The ask now goes to the run's inbox, naming that turn, which the
    run counts as its own: it stops and ends paused with the owner's reason."""
    from loopx_chat.controller.our_run import OurRun
    from loopx_chat.controller.run_pool import RunPool

    sid, died = _killed_mid_turn(cli, mock)
    written = marker_writes(monkeypatch)
    reached, go_on = threading.Event(), threading.Event()
    name = "_open_thread" if window == "loading its thread" else "_still_live"
    owner = ChatController if name == "_open_thread" else OurRun
    held = getattr(owner, name)

    def holding(self: Any, *args: Any, **kwargs: Any) -> Any:
        reached.set()
        go_on.wait(60)
        return held(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, holding)
    with controller() as c:
        pool = RunPool(c, GateStore(cli.state))
        try:
            assert pool.recover() == [died["run_id"]]
            wait_for(reached.is_set)
            follower = c.running_goals.on_session(sid)
            assert follower is not None
            thread, box = run_in_thread(lambda: c.interrupt(sid))
            try:
                wait_for(lambda: follower.inbox.queue.qsize() > 0)  # the ask, and nothing else
            finally:
                go_on.set()
                thread.join(60)
        finally:
            go_on.set()
            pool.close()
    assert written == []
    doc = box.get("result")
    assert isinstance(doc, dict), box
    assert doc["goal_run"] == paused_by_owner_interrupt(died["run_id"])
    events = run_events(cli.state, "g")
    assert [e["event"] for e in events][-2:] == ["recovered", "ended"]
    assert "process_gone" not in events[-1]  # ended by the run itself, in this process
    ran = [t for t in goal_loop_turns(cli.state, sid) if t.run_id == died["run_id"]]
    assert (doc["turn"]["id"], doc["turn"]["status"]) == (ran[-1].turn_id, "interrupted")
    assert all(t.status != "running" for t in ran)


# -- the usage limit -------------------------------------------------------------------------
@pytest.mark.parametrize("asked_by", ["goal run", "goal set"])
def test_resume_after_usage_limit_waits_for_the_reset_and_goes_on(
    cli: OwnerCli, mock: MockResponsesServer, asked_by: str
) -> None:
    sid = _goal_with_session(cli)
    flag = "--resume-after-usage-limit"
    if asked_by == "goal set":
        done = cli("goal", "set", "g", flag)
        assert done.returncode == 0, done.stderr
    resets_at = int(time.time()) + 2
    mock.script(
        "mock:text=one step done",
        f"mock:usage_limit={resets_at}",
        default="mock:text=after the reset",
    )
    run = ["goal", "run", "g", "--token-budget", "12000"]
    code, doc = cli.json(*run, *([flag] if asked_by == "goal run" else []))
    assert code == 3, doc  # it went on after the reset, to its budget
    events = run_events(cli.state, "g")
    kinds = [e["event"] for e in events]
    assert kinds.index("usage_wait") < kinds.index("usage_resumed") < kinds.index("ended")
    assert next(e for e in events if e["event"] == "usage_wait")["usage_resets_at"] == resets_at
    resumed_at = next(e["at"] for e in events if e["event"] == "usage_resumed")
    assert any(t.created_at > resumed_at for t in goal_loop_turns(cli.state, sid))

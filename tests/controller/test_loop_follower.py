"""controller/loop_follower.py on the scripted host: codex's goal loop followed once, and
each of its stop rules.

A continuation turn is a recorded turn of the pinned codex (`turn.json`, or `steer.json`'s
turn that stays open until interrupted), started on a thread the controller holds, as codex's
loop starts one; the follower takes codex's notifications from its own queue. Every follow
says which rule ended it (`why`), and the turn ledger is the oracle for what was recorded: a
broken rule ends the follow by another rule, or records another outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.goal_loop import GoalLoopWatch, HostGoalState
from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.controller.loop_follower import LoopFollower, LoopTurns, StopRules
from loopx_chat.errors import CodexError
from loopx_chat.state.session_store import SessionStore
from tests.helpers.fakes import Scripted
from tests.helpers.fakes.replay import Answer
from tests.helpers.fakes.scripted_host import Script
from tests.helpers.goal_runs import marker_writes
from tests.helpers.waiting import joined, run_in_thread, wait_for

QUICK = ControllerConfig(timeouts=Timeouts(startup=5, request=5, idle=30, hard=60, close_grace=1))
OPEN = Script(answers={"turn/start": Answer("steer", "turn/start")})  # open until interrupted
SAFETY = 30.0  # a rule that does not fire ends the follow by this one instead: the test fails


def _goal(status: str) -> HostGoalState:
    return HostGoalState(status=status, token_budget=None, tokens_used=0, time_used_seconds=0)


@contextmanager
def _loop_turn(
    tmp_path: Path, scripted: Scripted, script: Script | None = None
) -> Iterator[tuple[ChatController, str, Any]]:
    """A held thread on which codex's loop has just started a turn."""
    home = tmp_path / "bound"
    home.mkdir()
    with scripted.controller(tmp_path, home.resolve(), script, QUICK) as c:
        sid = c.open_session("g", tmp_path).session_id
        with c.held_thread(sid) as warm:
            warm.thread.start_turn("mock:text=on my own")
            yield c, sid, warm


def _statuses(tmp_path: Path, sid: str) -> list[tuple[str, str | None, str | None]]:
    turns = SessionStore(tmp_path / "state").list_turns(sid)
    return [(str(t.status), t.origin, t.run_id) for t in turns]


@pytest.mark.parametrize(
    ("status", "rules", "why"),
    [
        # The goal left `active`: the follow ends once its turn is recorded.
        ("complete", StopRules(loop_ended=True, quiet_sec=SAFETY), "loop_ended"),
        # Still `active`: only codex's silence ends it.
        ("active", StopRules(loop_ended=True, quiet_sec=0.05, most_sec=SAFETY), "quiet_sec"),
        ("active", StopRules(quiet_sec=0.05, most_sec=SAFETY), "quiet_sec"),
    ],
)
def test_a_finished_turn_is_recorded_and_the_rule_that_ends_the_follow_is_the_one_set(
    tmp_path: Path, scripted: Scripted, status: str, rules: StopRules, why: str
) -> None:
    with _loop_turn(tmp_path, scripted) as (c, sid, warm):
        follower = LoopFollower(LoopTurns(c.turns, sid, warm), rules)
        assert follower.follow(GoalLoopWatch(warm.thread), _goal(status)) == 1
        assert warm.running_turn_id is None
    assert follower.why == why
    assert _statuses(tmp_path, sid) == [("completed", "goal_loop", None)]


def test_at_most_n_seconds_ends_a_follow_whose_turn_is_still_open(
    tmp_path: Path, scripted: Scripted
) -> None:
    """Quiet never ends a follow while a turn is open; `most_sec` does, and the open turn is
    recorded interrupted (letting the thread go ends it)."""
    with _loop_turn(tmp_path, scripted, OPEN) as (c, sid, warm):
        follower = LoopFollower(LoopTurns(c.turns, sid), StopRules(quiet_sec=0.01, most_sec=0.3))
        worker, box = run_in_thread(lambda: follower.follow(GoalLoopWatch(warm.thread)))
        worker.join(SAFETY)
        follower.let_go()  # a follow the rule did not end ends here, and the test fails
        assert joined(worker, box) == 1
        assert follower.why == "most_sec"
        assert _statuses(tmp_path, sid) == [("interrupted", "goal_loop", None)]


def test_let_go_ends_the_follow_and_keeps_a_runs_id(tmp_path: Path, scripted: Scripted) -> None:
    """A LetGo ends a follow no other rule would end: the turn codex started is recorded
    (with the run's id when one is given), gets `hand_over_sec` to end, then is recorded
    interrupted."""
    with _loop_turn(tmp_path, scripted, OPEN) as (c, sid, warm):
        turns = LoopTurns(c.turns, sid, warm, run_id="run-1")
        follower = LoopFollower(turns, StopRules(hand_over_sec=0.05))
        worker, box = run_in_thread(
            lambda: follower.follow(GoalLoopWatch(warm.thread), _goal("active"))
        )
        wait_for(lambda: _statuses(tmp_path, sid) == [("running", "goal_loop", "run-1")])
        follower.let_go(hand_over=True)
        assert joined(worker, box) == 1
        assert follower.why == "let_go" and follower.done.is_set()
    assert _statuses(tmp_path, sid) == [("interrupted", "goal_loop", "run-1")]


def test_codex_ending_ends_the_follow_with_its_error_and_the_open_turn_interrupted(
    tmp_path: Path, scripted: Scripted
) -> None:
    with _loop_turn(tmp_path, scripted, OPEN) as (c, sid, warm):
        follower = LoopFollower(LoopTurns(c.turns, sid), StopRules(most_sec=SAFETY))
        scripted.codex.hosts[0].close()
        with pytest.raises(CodexError) as ended:
            follower.follow(GoalLoopWatch(warm.thread))
        assert ended.value.error_code == "app_server_exited"
        assert follower.error is ended.value and follower.why is None
        c.drop_thread(sid)
    assert _statuses(tmp_path, sid) == [("interrupted", "goal_loop", None)]


def test_the_owner_pause_is_asked_through_the_queue_and_answered_when_the_follow_ends(
    tmp_path: Path, scripted: Scripted
) -> None:
    """A Pause asked of a follow that ends before taking it is answered (None), never left
    waiting: its caller pauses the goal another way."""
    with _loop_turn(tmp_path, scripted) as (c, sid, warm):
        follower = LoopFollower(LoopTurns(c.turns, sid), StopRules(quiet_sec=0.05, most_sec=SAFETY))
        follower.follow(GoalLoopWatch(warm.thread))
        assert follower.pause("owner", timeout=SAFETY) is None
        assert follower.answered.is_set()


def test_a_goal_stop_record_that_could_not_be_read_is_read_again_at_the_next_look(
    tmp_path: Path,
) -> None:
    # The look reads the record only when its stat moved: a read that failed must not use
    # that move up, or a `goal stop` written once would never be seen.
    from types import SimpleNamespace

    from loopx_chat.controller.host_loops import HostLoops
    from loopx_chat.errors import StateError

    path = tmp_path / "lifecycle.jsonl"
    path.write_text("{}\n")
    answers: list[object] = [StateError("locked", error_code="state_unreadable")]
    answers.append({"actor": "owner-cli"})

    def stopped(goal_id: str) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    records = SimpleNamespace(lifecycle_path=lambda goal_id: path, stopped=stopped)
    look = HostLoops._stop_look(SimpleNamespace(records=records), "g")  # type: ignore[arg-type]
    with pytest.raises(StateError):
        look()
    assert look() == "owner-cli"  # the file did not change since: read again all the same


def test_a_loop_loopx_chat_did_not_start_is_in_the_one_registry_until_let_go(
    tmp_path: Path, scripted: Scripted
) -> None:
    """The service's `HostLoops` keeps no list: a LoopFollower it follows is in the
    controller's registry, the one place asked whether a loop on the session is followed,
    while no gate seam reaches it; the service's close lets it go through the registry, and
    nothing is taken up after."""
    from types import SimpleNamespace

    from loopx_chat.controller.host_loops import HostLoops

    with _loop_turn(tmp_path, scripted, OPEN) as (c, sid, warm):
        registry = c.running_goals
        follower = LoopFollower(LoopTurns(c.turns, sid, warm), StopRules(most_sec=SAFETY))
        worker, box = run_in_thread(lambda: follower.follow(GoalLoopWatch(warm.thread)))
        assert registry.background("g", follower, worker, foreign=True)
        wait_for(lambda: _statuses(tmp_path, sid) == [("running", "goal_loop", None)])
        assert registry.follows_session(sid, foreign=True)
        assert registry.background_runs(foreign=True) == {"g": (follower, worker)}
        assert not registry.follows_session(sid)  # not a run of ours
        assert registry.follower("g") is None and registry.background_runs() == {}
        again = LoopFollower(LoopTurns(c.turns, sid), StopRules())
        assert not registry.background("g", again, worker, foreign=True)  # followed once
        HostLoops.close(SimpleNamespace(registry=registry))  # type: ignore[arg-type]
        assert joined(worker, box) == 1 and follower.why == "let_go"
        assert not registry.follows_session(sid, foreign=True)
        assert registry.background_runs(foreign=True) == {}
        # Shutting down: no loop is taken up after.
        assert not registry.background("g", again, worker, foreign=True)
    assert _statuses(tmp_path, sid) == [("interrupted", "goal_loop", None)]


def test_a_run_adopting_a_loop_lets_go_of_the_registrys_entry(
    tmp_path: Path, scripted: Scripted
) -> None:
    from types import SimpleNamespace

    from loopx_chat.controller.host_loops import HostLoops

    with _loop_turn(tmp_path, scripted, OPEN) as (c, sid, warm):
        registry = c.running_goals
        follower = LoopFollower(LoopTurns(c.turns, sid, warm), StopRules(hand_over_sec=0.05))
        worker, box = run_in_thread(lambda: follower.follow(GoalLoopWatch(warm.thread)))
        assert registry.background("g", follower, worker, foreign=True)
        # The follower has taken codex's turn/started: a let-go put in its inbox before it
        # routed codex's notifications there would be taken before them (seen under load).
        wait_for(lambda: _statuses(tmp_path, sid) == [("running", "goal_loop", None)])
        loops = SimpleNamespace(registry=registry)
        assert HostLoops.let_go(loops, "g") == sid  # type: ignore[arg-type]
        assert joined(worker, box) == 1 and follower.why == "let_go"
        assert HostLoops.let_go(loops, "g") is None  # type: ignore[arg-type]
        assert not registry.follows_session(sid, foreign=True)


def test_a_loop_not_ours_and_a_run_of_ours_are_followed_by_one_class_and_one_state_table(
    tmp_path: Path, scripted: Scripted
) -> None:
    """One class follows every goal loop: a run of ours (`GoalRunner.follower`) is a
    `LoopFollower` too, and a loop no run of ours runs moves through `run_states.MOVES` as a
    run does: it is followed `running`, and the goal codex reports at the end moves it."""
    from types import SimpleNamespace

    from loopx_chat.controller.goal_run import GoalRunner

    with _loop_turn(tmp_path, scripted) as (c, sid, warm):
        follower = LoopFollower(
            LoopTurns(c.turns, sid, warm), StopRules(loop_ended=True, quiet_sec=SAFETY)
        )
        assert follower.follow(GoalLoopWatch(warm.thread), _goal("complete")) == 1
        plan = SimpleNamespace(session=SimpleNamespace(session_id=sid), goal_id="g")
        runner = SimpleNamespace(controller=c)
        run = GoalRunner.follower(runner, SimpleNamespace(run_id="run-1"), plan)  # type: ignore[arg-type]
    assert type(run) is LoopFollower and run.loop.session_id == sid and run.ours is not None
    assert run.state.state == "authorized" and follower.ours is None
    assert follower.state.state == "complete"  # moved by `completed`, the one move there


def test_a_second_start_of_a_goal_the_service_runs_is_refused_naming_its_run() -> None:
    """`RunPool.start` of a goal it runs already refuses with `thread_busy` and names the run
    it holds: the run's record is on the follower's `OurRun` (a loop not ours has none)."""
    import threading
    from types import SimpleNamespace

    from loopx_chat.controller.goal_run import GoalRunner
    from loopx_chat.controller.run_pool import RunPool

    plan = SimpleNamespace(session=SimpleNamespace(session_id="s-1"), goal_id="g")
    runner = SimpleNamespace(controller=SimpleNamespace(turns=None))
    run = GoalRunner.follower(runner, SimpleNamespace(run_id="run-1"), plan)  # type: ignore[arg-type]
    registry = SimpleNamespace(background_runs=lambda: {"g": (run, None)})
    pool = SimpleNamespace(_lock=threading.Lock(), closed=False, registry=registry)
    with pytest.raises(CodexError) as refused:
        RunPool.start(pool, "g")  # type: ignore[arg-type]
    assert refused.value.error_code == "thread_busy" and "(run run-1)" in refused.value.message


def test_a_stop_inside_the_record_of_a_turn_codex_started_leaves_no_turn_running(
    tmp_path: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or SIGTERM) that lands while a continuation turn's start is being written,
    after its record and before the session names it: settling the loop records it
    interrupted. It was left `running` for good (seen once in a full run under load, in
    `test_ctrl_c_pauses_the_goal_and_exits_130`): nothing named it to settle."""
    from loopx_chat.codex.goal_loop import LoopEvent
    from loopx_chat.state import outcome_slot

    home = tmp_path / "bound"
    home.mkdir()
    with scripted.controller(tmp_path, home.resolve(), None, QUICK) as c:
        sid = c.open_session("g", tmp_path).session_id
        loop = LoopTurns(c.turns, sid, run_id="run-1")

        def stopped_here(folder: Path) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(outcome_slot, "ensure", stopped_here)
        with pytest.raises(KeyboardInterrupt):
            loop.on(LoopEvent("turn_started", "codex-turn-1"))
        monkeypatch.undo()
        loop.settle("controller_stopped")
    assert _statuses(tmp_path, sid) == [("interrupted", "goal_loop", "run-1")]


def test_chat_interrupt_of_a_loops_turn_in_this_process_goes_to_its_followers_inbox(
    tmp_path: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: in the process that follows a loop (the service), `chat interrupt` of its
    turn wrote the session's marker file, which that process's own follower then read back
    at its next look. It is now put in the follower's inbox: the follower stops the turn (a
    loop not ours: only the turn), and no marker is ever written."""
    from loopx_chat.controller.host_loops import STOP_LOOK_SEC

    written = marker_writes(monkeypatch)
    with _loop_turn(tmp_path, scripted, OPEN) as (c, sid, warm):
        marker = tmp_path / "state" / "sessions" / sid / "interrupt.request"
        rules = StopRules(most_sec=SAFETY, stop_look_sec=STOP_LOOK_SEC)  # as the service's
        follower = LoopFollower(LoopTurns(c.turns, sid, warm), rules)
        worker, box = run_in_thread(lambda: follower.follow(GoalLoopWatch(warm.thread)))
        assert c.running_goals.background("g", follower, worker, foreign=True)
        wait_for(lambda: _statuses(tmp_path, sid) == [("running", "goal_loop", None)])
        # The ledger writes the turn, then the session's active turn: wait for both.
        wait_for(lambda: SessionStore(tmp_path / "state").load(sid).active_turn_id is not None)
        asked = c.interrupt_turn(sid)
        assert not marker.exists()
        wait_for(lambda: _statuses(tmp_path, sid) == [("interrupted", "goal_loop", None)])
        assert follower.interrupted == {asked.upstream_turn_id}  # stopped by its follower
        follower.let_go()
        assert joined(worker, box) == 1
    assert written == [] and not marker.exists()


def _counted(monkeypatch: pytest.MonkeyPatch, path: Path) -> dict[str, int]:
    """How often `path` is stat'ed and opened from now on (by any module)."""
    import os

    counts = {"stat": 0, "open": 0}
    real_stat, real_open = os.stat, os.open

    def stat(p: Any, *args: Any, **kwargs: Any) -> Any:
        counts["stat"] += isinstance(p, (str, Path)) and os.fspath(p) == str(path)
        return real_stat(p, *args, **kwargs)

    def open_(p: Any, *args: Any, **kwargs: Any) -> Any:
        counts["open"] += isinstance(p, (str, Path)) and os.fspath(p) == str(path)
        return real_open(p, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "open", open_)
    return counts


def test_the_marker_of_another_process_costs_a_look_one_stat_and_is_read_once_a_change(
    tmp_path: Path, scripted: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: the follower opened the session's marker at every look (five a second),
    also when there was none, and read one naming no turn of the loop (a chat turn's, or a
    stale one) again at every look. A look is now one stat; the marker is read only when
    that moved: a stale one once, and left; the one naming the loop's turn is taken, once."""
    from loopx_chat.codex.goal_loop import LoopEvent

    home = tmp_path / "bound"
    home.mkdir()
    with scripted.controller(tmp_path, home.resolve(), None, QUICK) as c:
        sid = c.open_session("g", tmp_path).session_id
        marker = tmp_path / "state" / "sessions" / sid / "interrupt.request"
        loop = LoopTurns(c.turns, sid, run_id="run-1")
        loop.on(LoopEvent("turn_started", "codex-turn-1"))
        (ours,) = loop.ids
        counts = _counted(monkeypatch, marker)

        def looks(n: int) -> tuple[list[bool], int, int]:
            """`n` looks: what each said, and the stats and opens of the marker they made."""
            before = dict(counts)
            said = [loop.interrupt_asked() for _ in range(n)]
            return said, counts["stat"] - before["stat"], counts["open"] - before["open"]

        assert looks(50) == ([False] * 50, 50, 0)  # no marker: one stat a look, no open
        c._ask_marker(sid, "a-chat-turn")  # as another process writes it
        assert looks(50) == ([False] * 50, 50, 1)  # read once, and left
        assert marker.read_text() == "a-chat-turn"
        c._ask_marker(sid, ours)
        assert looks(1) == ([True], 1, 1) and not marker.exists()  # taken
        assert looks(50) == ([False] * 50, 50, 0)  # taken once
        monkeypatch.undo()
        loop.settle("controller_stopped")


def test_the_look_of_a_loop_not_ours_calls_the_follower_by_its_public_names() -> None:
    """Issue 34: `StopLook.look` stopped the turn through `LoopFollower._interrupt`, a
    private method of another class; it is `send_interrupt` now (no change in behaviour)."""
    import ast
    import inspect

    from loopx_chat.controller import loop_follower

    tree = ast.parse(inspect.getsource(loop_follower.StopLook))
    private = [
        f"{ast.unparse(node.value)}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    assert private == []

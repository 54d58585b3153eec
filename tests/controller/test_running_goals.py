"""`controller.running_goals`: the per-process registry a gate recorded here asks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from loopx_chat.controller.running_goals import RunningGoals
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.run_block import RunBlock


class Follower:
    """A run as the registry sees it: it records what it was asked to look at."""

    loop = SimpleNamespace(session_id="s-1")  # the session its loop's turns are on

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def our_run(self) -> SimpleNamespace:  # its run's gates: this fake itself
        return SimpleNamespace(gates=self)

    def look_now(self, gate_id: str | None, *, window_passed: bool = False) -> RunBlock:
        self.asked.append(f"window passed {gate_id}" if window_passed else gate_id)
        return RunBlock(True, "blocked", "run-1")

    def post_gate(self, gate_id: str) -> None:
        self.asked.append(f"posted {gate_id}")


def test_a_gate_asks_the_run_of_its_goal_only_while_it_follows(tmp_path: Path) -> None:
    goals = GateStore(tmp_path)
    registry, run = RunningGoals(), Follower()
    gate = goals.request_gate("g", "Ship?")
    other = goals.request_gate("h", "Other?")
    assert registry.gate_opened(gate) is None  # no run here
    assert not registry.follows_session("s-1")
    with registry.following("g", run):
        assert registry.follows_session("s-1") and not registry.follows_session("s-2")
        assert registry.gate_opened(gate) == RunBlock(True, "blocked", "run-1")
        assert registry.gate_opened(other) is None
        registry.gate_decided("g")
        registry.gate_decided("h")
        registry.gate_decided("g", gate.gate_id)  # the desk answers codex for it next
        advisory = goals.request_gate("g", "FYI", blocking=False)
        assert registry.gate_opened(advisory) == RunBlock(None, "advisory gate")
        assert registry.after_gate(goals, gate).run_blocked is True
    asked = [gate.gate_id, None, f"window passed {gate.gate_id}", gate.gate_id]
    assert run.asked == asked
    assert registry.follower("g") is None and not registry.follows_session("s-1")
    registry.gate_posted(gate)  # no run here: nowhere to put it
    assert run.asked == asked
    # No run here and none in another process: the answer says so without waiting.
    assert registry.after_gate(goals, gate) == RunBlock(None, "no running goal")


def test_a_newer_run_of_the_goal_is_not_unregistered_by_an_older_one(tmp_path: Path) -> None:
    registry, old, new = RunningGoals(), Follower(), Follower()
    with registry.following("g", old):
        ctx = registry.following("g", new)
        ctx.__enter__()
    assert registry.follower("g") is new  # the old one's exit leaves the newer in place
    ctx.__exit__(None, None, None)
    assert registry.follower("g") is None


def test_a_background_run_is_held_from_its_start_until_its_thread_ends(tmp_path: Path) -> None:
    """The service's pool keeps no list of its own: a run it starts is in the registry from
    its launch (counted against the cap, pausable) until its thread ends, and gates ask it
    only while it follows its goal."""
    import threading

    goals = GateStore(tmp_path)
    registry, run = RunningGoals(), Follower()
    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=True)
    registry.background("g", run, thread)
    thread.start()
    gate = goals.request_gate("g", "Ship?")
    assert list(registry.background_runs()) == ["g"]
    assert registry.gate_opened(gate) is None and not registry.follows_session("s-1")
    with registry.following("g", run):
        assert registry.follower("g") is run and registry.follows_session("s-1")
        assert registry.background_runs()["g"] == (run, thread)
    assert registry.follower("g") is None  # its follow is over: no gate asks it
    assert list(registry.background_runs()) == ["g"]  # still held while its thread runs
    release.set()
    thread.join()
    assert registry.background_runs() == {}


def test_a_host_gate_is_only_put_in_the_runs_inbox_never_waited_on(tmp_path: Path) -> None:
    """Codex's reader records a host gate and hands it on without waiting on the run."""
    goals = GateStore(tmp_path)
    registry, run = RunningGoals(), Follower()
    gate = goals.request_gate("g", "Run it?")
    advisory = goals.request_gate("g", "FYI", blocking=False)
    with registry.following("g", run):
        assert registry.gate_posted(gate) is None
        registry.gate_posted(advisory)  # advisory: the run has nothing to block
    assert run.asked == [f"posted {gate.gate_id}"]


def test_a_goal_has_one_follower_a_loop_not_ours_is_not_taken_up_over_a_run(
    tmp_path: Path,
) -> None:
    """One registry of one kind of follower: while a run of ours follows the goal, a loop
    loopx-chat did not start on it is not taken up (it would be a second follower of the same
    loop); once the run is over, it is."""
    import threading

    registry, run = RunningGoals(), Follower()
    loop = SimpleNamespace(done=threading.Event(), loop=SimpleNamespace(session_id="s-1"))
    worker = threading.Thread(target=lambda: None)
    with registry.following("g", run):
        assert not registry.background("g", loop, worker, foreign=True)  # type: ignore[arg-type]
        assert registry.follower("g") is run
    assert registry.background("g", loop, worker, foreign=True)  # type: ignore[arg-type]
    assert registry.follows_session("s-1", foreign=True) and registry.follower("g") is None

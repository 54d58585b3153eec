"""A goal run's one ordered input queue, in-process: codex's notifications (a recorded
approval turn of the pinned codex, replayed by `ScriptedHost`), the host gate its request
became and the owner's inputs come out of `RunInbox` in the order they came in, and are
handled in that order; codex's reader puts the host gate there without waiting on anyone
(nothing takes from the inbox until the turn is over)."""

from __future__ import annotations

from pathlib import Path

from loopx_chat.codex.goal_loop import GoalLoopWatch
from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.thread import CodexThread
from loopx_chat.controller.host_requests import Choice, HostRequestDesk
from loopx_chat.controller.run_inbox import GateOpened, PauseAsked, RunInbox
from loopx_chat.controller.running_goals import RunningGoals
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.run_block import RunBlock
from tests.helpers.fakes.replay import Answer
from tests.helpers.fakes.scripted_host import Script, ScriptedCodex, asking_thread


class _Run:
    """A run as the registry sees it: its inbox, and nothing that waits."""

    session_id = "s"

    def __init__(self, inbox: RunInbox) -> None:
        self.inbox = inbox

    def look_now(self, gate_id: str | None) -> RunBlock:
        raise AssertionError("codex's reader must never wait on the run")

    def post_gate(self, gate_id: str) -> None:
        self.inbox.put(GateOpened(gate_id))


def _thread(tmp_path: Path, codex: ScriptedCodex, desk: HostRequestDesk) -> CodexThread:
    thread: CodexThread = asking_thread(tmp_path, codex, desk.take)
    desk.bind(str(thread.thread_id), "s", "g")
    return thread


def test_inputs_are_handled_in_the_order_they_came(tmp_path: Path) -> None:
    desk = HostRequestDesk(GateStore(tmp_path / "state"), decision_timeout=600)
    registry = RunningGoals()
    desk.on_gate = registry.gate_posted
    codex = ScriptedCodex(Script(answers={"turn/start": Answer("approval", "turn/start")}))
    thread = _thread(tmp_path, codex, desk)
    host = codex.hosts[0]
    while thread.proc.next_notification(0) is not None:
        pass  # what codex said while the thread loaded: before the run
    inbox = RunInbox()
    thread.proc.route(inbox.queue)
    before = len(host.sent)
    with registry.following("g", _Run(inbox)):
        thread.start_turn("mock:shell=touch approval-probe")
        (live,) = desk.live_gates()  # codex waits on the owner; its gate is in the inbox
        inbox.put(PauseAsked())  # the owner acts meanwhile
        desk.decide("g", live.gate_id, Choice("approve"), actor="owner-cli")

    # Take and handle every input in turn, as the run does: codex's through its decoder.
    watch = GoalLoopWatch(thread)
    taken: list[object] = []
    handled: list[str] = []
    while (got := inbox.take(0))[0]:
        item = got[1]
        taken.append(item)
        if isinstance(item, Notification):
            event = watch.see(item)
            if event is not None and event.kind != "delta":
                handled.append(event.kind)
        else:
            handled.append(type(item).__name__)

    # codex's notifications came through in the order the host sent them ...
    notes = [m["method"] for m in host.sent[before:] if "method" in m and "id" not in m]
    assert [n.method for n in taken if isinstance(n, Notification)] == notes
    # ... its request's gate right after the notifications before the request, the owner's
    # Pause next, and what codex said once answered after both.
    request_at = notes.index("serverRequest/resolved")
    assert taken[request_at : request_at + 2] == [GateOpened(live.gate_id), PauseAsked()]
    assert handled == ["turn_started", "GateOpened", "PauseAsked", "usage", "usage", "turn_ended"]
    thread.proc.route(None)
    assert thread.proc.next_notification(0) is None  # nothing of codex's was left behind
    thread.close()


def test_unrouting_gives_codexs_notifications_back_and_keeps_the_runs_own(tmp_path: Path) -> None:
    desk = HostRequestDesk(GateStore(tmp_path / "state"), decision_timeout=600)
    codex = ScriptedCodex(Script(answers={"turn/start": Answer("approval", "turn/start")}))
    thread = _thread(tmp_path, codex, desk)
    while thread.proc.next_notification(0) is not None:
        pass  # what codex said while the thread loaded
    inbox = RunInbox()
    thread.proc.route(inbox.queue)
    inbox.put(PauseAsked())
    thread.start_turn("mock:shell=touch approval-probe")  # codex asks, nobody answers
    thread.proc.route(None)
    first = thread.proc.next_notification(0)
    assert first is not None and first.method == "thread/status/changed"
    assert inbox.owner_inputs() == [PauseAsked()]  # the run's own stay in its inbox
    thread.close()

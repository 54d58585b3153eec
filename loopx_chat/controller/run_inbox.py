"""The one ordered input queue of a followed goal loop, and the typed records that go into it.

Owns `RunInbox`: while a loop is followed (`loop_follower.LoopFollower`: a run of ours, or a
loop loopx-chat did not start), codex's app-server delivers its notifications straight into
its inbox (`HostConnection.route`), and every other input is put there too, by whichever
thread has it: a host request that became a host gate (by the app-server's reader, after the
notifications that came before it), a gate recorded or decided in this process (by the
service), the owner's Pause, the owner's `chat interrupt` of a turn of the loop asked in this
process, the service stopping, letting a loop not ours go. The follower
takes them one at a time, in the order they came, on its own thread. A caller that wants to
know what became of its gate waits on the record's `Answer`; the app-server's reader never
waits on the follower (it only puts), so the follower may always wait on codex.

It never decides anything and never touches Codex or records: records only carry ids.
"""

from __future__ import annotations

import contextlib
import queue
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loopx_chat.codex.host_connection import Notification

if TYPE_CHECKING:
    from loopx_chat.goals.run_block import RunBlock


class Answer:
    """Where the run says what became of a gate, for the one caller that waits on it."""

    def __init__(self) -> None:
        self._slot: queue.Queue[RunBlock] = queue.Queue(maxsize=1)

    def give(self, block: RunBlock) -> None:
        with contextlib.suppress(queue.Full):  # answered once: the first answer stands
            self._slot.put_nowait(block)

    def wait(self, timeout: float) -> RunBlock | None:
        try:
            return self._slot.get(timeout=timeout)
        except queue.Empty:
            return None


@dataclass(frozen=True)
class GateOpened:
    """A gate of the goal was recorded in this process (a host gate: by codex's request);
    `window_passed`: the desk is about to answer codex for it, the owner's window over."""

    gate_id: str
    answer: Answer | None = field(default=None, compare=False)
    window_passed: bool = False


@dataclass(frozen=True)
class GateDecided:
    """A gate of the goal was decided in this process."""

    answer: Answer | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PauseAsked:
    """The owner's Pause, by `actor`: of a run, or of a loop loopx-chat did not start."""

    actor: str = "owner"


@dataclass(frozen=True)
class InterruptAsked:
    """The owner's `chat interrupt` of a turn of the loop, asked in the process that follows
    it (another process's is the session's interrupt marker, `LoopTurns.interrupt_asked`)."""

    turn_id: str


@dataclass(frozen=True)
class StopAsked:
    """The process that runs it is stopping: pause the goal now."""


@dataclass(frozen=True)
class LetGo:
    """Stop following a loop not ours: `hand_over` (a Run adopts it) lets its turn end first."""

    hand_over: bool = False


OwnerInput = GateOpened | GateDecided | PauseAsked | InterruptAsked | StopAsked | LetGo
# What a run takes, in order: codex's notifications (None: its app-server ended) and the rest.
RunInput = Notification | OwnerInput | None


class RunInbox:
    """One run's inputs, in the order they came; any thread puts, only the run takes."""

    def __init__(self) -> None:
        self.queue: queue.Queue[RunInput] = queue.Queue()

    def put(self, item: OwnerInput) -> None:
        self.queue.put(item)

    def take(self, timeout: float) -> tuple[bool, RunInput]:
        """(True, the next input) within `timeout`, or (False, None)."""
        try:
            return True, self.queue.get(timeout=timeout)
        except queue.Empty:
            return False, None

    def owner_inputs(self) -> list[OwnerInput]:
        """Take what is left that is not codex's (the run is over: each is answered)."""
        left: list[OwnerInput] = []
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return left
            if item is not None and not isinstance(item, Notification):
                left.append(item)

"""An in-process codex host that replays recorded transcripts, through the adapter's seam.

What this module owns:
  * `ScriptedCodex`, a `ConnectionFactory` (pass it as `ChatController(connect=...)` or
    `HostLaunch(connect=...)`), and the `ScriptedHost` connections it starts, each a
    `HostConnection` that answers every request with what the pinned real codex said in a
    recording (tests/fixtures/codex-transcripts/<version>/, which the drift test keeps true):
    `replay.Conversation` picks the recorded exchange, `replay.Replayer` fills its ids, home,
    work folder and clock.
  * Faults, as data (`Script`): another recording answers a method (a refusal codex gave),
    an answer never comes (a truncated recording), the stream closes after a given message
    (a truncation, then the end of stdout), an answer comes late (a delay), the exit code a
    closed host reports (`exit_early.json`'s), the home it reports (what codex says when a
    wrapper changed its CODEX_HOME).
  * What a test may assert on: every connection started, with its launch and the client
    messages it received, and the decisions the policy gave to server requests.

What it must never do:
  * write message text of its own: every message comes from a recording;
  * spawn anything, or stand in for what needs a real process (signals, pipes, exit codes
    of a real binary): those tests stay on fake_codex.py (beside this module) or the real codex.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopx_chat.codex.host_connection import (
    Notification,
    ProcessGone,
    RpcError,
    ServerRequest,
    ServerRequestPolicy,
    rehome,
    waiting,
)
from tests.helpers.fakes.replay import ANSWERS, Answer, Conversation, Replayer, load

# Pids no real process can have (Linux caps them at 2**22, macOS far lower), so a scripted
# host registered in the app-server registry is never taken for, or signalled as, a real one.
_PIDS = itertools.count((1 << 22) + 1)


@dataclass(frozen=True)
class CloseAt:
    """The host's stdout closes when the client sends `method`: before any answer when
    `after` is None, else right after the first replayed message whose method is `after`."""

    method: str
    after: str | None = None


@dataclass(frozen=True)
class Script:
    """How one scripted host departs from the plain recorded conversation; all data."""

    answers: Mapping[str, Answer] = field(default_factory=dict)
    silent: frozenset[str] = frozenset()  # requests whose answer never comes
    close_at: CloseAt | None = None
    delays: Mapping[str, float] = field(default_factory=dict)  # seconds before an answer
    reported_home: str | None = None  # the home codex reports; the launch's when None
    exit_code: int | None = None  # what a closed host reports as its exit code

    @classmethod
    def replaying(cls, scenario: str, *methods: str, **faults: Any) -> Script:
        """`methods` answered as in the recording `scenario` (its first of each)."""
        return cls(answers={m: Answer(scenario, m) for m in methods}, **faults)


def recorded_exit_code() -> int:
    """The exit code the pinned codex gave when it could not start (exit_early.json)."""
    (entry,) = load("exit_early")
    return int(entry["message"]["exit_code"])


@dataclass
class Launched:
    """What the factory was called with, as a test may check it."""

    executable: Path
    codex_home: Path
    work_dir: Path
    config_args: tuple[str, ...]
    stderr_log: Path
    policy: ServerRequestPolicy


class ScriptedHost:
    """One scripted app-server: a `HostConnection` replaying recordings in-process."""

    def __init__(self, launched: Launched, script: Script) -> None:
        self.launched = launched
        self._script = script
        self.pid = next(_PIDS)
        self.protocol_fault: str | None = None  # a scripted host never breaks the protocol
        self.received: list[dict[str, Any]] = []  # client messages, in order
        self.sent: list[dict[str, Any]] = []  # the replayed messages, in order
        self.decisions: list[dict[str, Any]] = []  # what the policy answered to server requests
        self.closed_by_client = False
        reported = script.reported_home or str(launched.codex_home)
        self._talk = Conversation(
            Replayer(cwd=str(launched.work_dir), home=reported), script.answers
        )
        self._lock = threading.RLock()  # a holder may reply while the recording plays
        self._ids = itertools.count(1)
        self._notes: queue.Queue[Any] = queue.Queue()
        self._route_lock = threading.RLock()  # a tap may fire a request that notifies
        self._tap: Callable[[Notification], None] | None = None
        self._ended = threading.Event()

    @property
    def script(self) -> Script:
        return self._script

    @script.setter
    def script(self, script: Script) -> None:
        """Follow another script from the next request on (a later turn's fault)."""
        with self._lock:
            self._script = script
            self._talk.answers = {**ANSWERS, **script.answers}

    # -- HostConnection -----------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return not self._ended.is_set()

    def request(
        self,
        method: str,
        params: Mapping[str, Any],
        timeout: float,
        *,
        after_send: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        message = {"id": next(self._ids), "method": method, "params": dict(params)}
        self._receive(message)
        if after_send is not None:
            after_send()
        deadline = time.monotonic() + timeout
        delay = self.script.delays.get(method, 0.0)
        if delay and self._ended.wait(min(delay, timeout)):
            raise ProcessGone(f"scripted host ended during {method}")
        if delay >= timeout or method in self.script.silent:
            if self._ended.wait(max(deadline - time.monotonic(), 0.0)):
                raise ProcessGone(f"scripted host ended during {method}")
            raise TimeoutError(f"{method} got no response in {timeout:g}s")
        response = self._answer(message)
        if response is None:
            raise ProcessGone(f"scripted host ended during {method}")
        error = response.get("error")
        if isinstance(error, dict):
            raise RpcError(method, str(error.get("message")))
        result = response.get("result")
        return result if isinstance(result, dict) else {}

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = dict(params)
        self._receive(message)

    def next_notification(self, timeout: float) -> Notification | None:
        try:
            note = self._notes.get(timeout=timeout)
        except queue.Empty:
            return None
        if note is not None:
            return note
        self._notes.put(None)  # the end stays the end for the next caller
        raise ProcessGone("scripted host ended")

    def route(self, inbox: queue.Queue[Any] | None) -> None:
        with self._route_lock:
            target: queue.Queue[Any] = queue.Queue() if inbox is None else inbox
            rehome(self._notes, target)
            self._notes = target

    def fire(self, method: str, params: Mapping[str, Any]) -> bool:
        try:
            self.request(method, params, 1.0)
        except (RpcError, ProcessGone, TimeoutError):
            return False
        return True

    def tap(self, hook: Callable[[Notification], None] | None) -> None:
        with self._route_lock:
            self._tap = hook
            for note in waiting(self._notes) if hook is not None else ():
                hook(note)

    def _note(self, item: Notification | None) -> None:
        with self._route_lock:
            if self._tap is not None and item is not None:
                self._tap(item)
            self._notes.put(item)

    def close(self, grace: float = 3.0) -> int | None:
        self.closed_by_client = True
        self._end()
        return self.wait_exit(grace)

    def wait_exit(self, timeout: float) -> int | None:
        return self.script.exit_code if self._ended.is_set() else None

    # -- the conversation ---------------------------------------------------------------
    def _receive(self, message: dict[str, Any]) -> None:
        if self._ended.is_set():
            raise ProcessGone(f"scripted host ended before {message.get('method')}")
        self.received.append(message)

    def _answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Replay the recorded answer; the response to `message`, or None when the stream
        closed before it came."""
        close = self.script.close_at
        closing = close is not None and close.method == message["method"]
        response: dict[str, Any] | None = None
        if not closing or (close is not None and close.after is not None):
            cut = close.after if closing and close is not None else None
            with self._lock:
                replies = self._talk.play(
                    self._talk.answer(message),
                    message,
                    stop_after=None if cut is None else (lambda m: m.get("method") == cut),
                )
                response = self._deliver(replies, message["id"])
            if cut is not None and not any(m.get("method") == cut for m in replies):
                raise LookupError(f"the recorded answer to {message['method']} has no {cut}")
        if closing:
            self._end()
        return response

    def _deliver(self, replies: Sequence[dict[str, Any]], request_id: int) -> dict[str, Any] | None:
        response: dict[str, Any] | None = None
        self.sent.extend(replies)
        for reply in replies:
            method = reply.get("method")
            if method is None:
                if reply.get("id") == request_id:
                    response = reply
            elif "id" in reply:
                self._answer_server_request(reply)
            else:
                params = reply.get("params")
                self._note(Notification(method, params if isinstance(params, dict) else {}))
        return response

    def _answer_server_request(self, request: dict[str, Any]) -> None:
        """The policy's holder is offered the request first, as the real connection's reader
        does: one it keeps is answered later through `reply`, and the recording goes on only
        then; any other is answered by the policy at once."""
        policy = self.launched.policy
        params = request.get("params")
        asked = ServerRequest(
            request["id"], str(request["method"]), params if isinstance(params, dict) else {}
        )
        if policy.holder is not None and policy.holder(self, asked):
            return
        result, error = policy.answer(asked.method)
        self._replied(request["id"], result, error)

    def reply(
        self,
        request_id: Any,
        *,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
    ) -> bool:
        if self._ended.is_set():
            return False
        with self._lock:
            self._replied(request_id, None if error is not None else dict(result or {}), error)
        return True

    def _replied(
        self, request_id: Any, result: Mapping[str, Any] | None, error: Mapping[str, Any] | None
    ) -> None:
        reply: dict[str, Any] = {"id": request_id}
        if error is not None:
            reply["error"] = dict(error)
        else:
            reply["result"] = dict(result or {})
        self.decisions.append(reply)
        self.received.append(reply)
        self._deliver(self._talk.respond(reply), -1)

    def _end(self) -> None:
        if not self._ended.is_set():
            self._ended.set()
            self._note(None)


class ScriptedCodex:
    """A `ConnectionFactory` of scripted hosts; `script` may be replaced between starts."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.hosts: list[ScriptedHost] = []

    def __call__(self, **launch: Any) -> ScriptedHost:
        """Start one host for a launch (the `ConnectionFactory` keywords)."""
        launched = Launched(
            executable=launch["executable"],
            codex_home=launch["codex_home"],
            work_dir=launch["work_dir"],
            config_args=tuple(launch["config_args"]),
            stderr_log=launch["stderr_log"],
            policy=launch["policy"] or ServerRequestPolicy(),
        )
        host = ScriptedHost(launched, self.script)
        self.hosts.append(host)
        return host

    def thread_ids(self) -> list[str]:
        """The threads the hosts' replayed answers loaded, in order."""
        return [
            m["result"]["thread"]["id"]
            for h in self.hosts
            for m in h.sent
            if isinstance(m.get("result"), dict) and isinstance(m["result"].get("thread"), dict)
        ]

    def requests(self, method: str) -> list[dict[str, Any]]:
        """Every client request of `method`, over all hosts, in start order."""
        return [m for h in self.hosts for m in h.received if m.get("method") == method]


def scripted_launch(
    tmp_path: Path, codex: ScriptedCodex, options: Any = None, **timeouts: float
) -> Any:
    """A `HostLaunch` whose app-servers are `codex`'s scripted hosts, on a home under
    `tmp_path` (`options`: `ThreadOptions`, the defaults when None; `timeouts`: short ones)."""
    from loopx_chat.codex.thread import HostLaunch, ThreadOptions, Timeouts

    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    quick = {"startup": 2, "request": 2, "idle": 2, "hard": 30, "close_grace": 1}
    return HostLaunch(
        executable=tmp_path / "never-run",
        codex_home=home.resolve(),
        work_dir=tmp_path,
        environ={},
        log_path=tmp_path / "stderr.log",
        options=options or ThreadOptions(),
        timeouts=Timeouts(**{**quick, "interrupt_settle": 1, **timeouts}),
        connect=codex,
    )


def asking_thread(tmp_path: Path, codex: ScriptedCodex, holder: Callable[..., bool]) -> Any:
    """A `CodexThread` opened on a scripted host with approval policy `untrusted`, codex's
    requests offered to `holder` (the host-request desk's `take`)."""
    from loopx_chat.codex.thread import CodexThread, ThreadOptions

    options = ThreadOptions(
        approval_policy="untrusted", server_requests=ServerRequestPolicy(holder=holder)
    )
    thread = CodexThread.open(scripted_launch(tmp_path, codex, options), resume_thread_id=None)
    assert thread.thread_id is not None
    return thread

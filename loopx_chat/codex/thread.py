"""Open or resume one Codex thread on a pinned home and run turns on it.

Owns the handshake (`initialize` with `experimentalApi`, the `codexHome` check,
`initialized`), `thread/start` / `thread/resume` with `sandbox` and `approvalPolicy` every
time, the catalog-compatibility retry (once, same pinned home), and the turn loop with its
idle, hard, first-output and interrupt timers; what codex says about the turn is decoded by
`turn_events.TurnEvents`, the decoder goal loops use too. It reports turns as compact
outcomes (ids, status, error code, token counts); agent text goes only to the caller's
`on_delta` callback, never into state.

It speaks to an app-server only through `host_connection.HostConnection`, started by the
launch's `connect` factory (the real subprocess, `AppServerProcess.spawn`, by default).
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from loopx_chat import __version__
from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.catalog import catalog_incompatible, write_builtin_catalog
from loopx_chat.codex.errors_map import HOST_REMEDY, classify_rpc_error, upstream_meaning
from loopx_chat.codex.host_connection import (
    ConnectionFactory,
    HostConnection,
    ProcessGone,
    RpcError,
    ServerRequestPolicy,
)
from loopx_chat.codex.turn_defaults import (
    APPROVAL,
    FIRST_OUTPUT_TIMEOUT_SEC,
    HARD_TIMEOUT_SEC,
    IDLE_TIMEOUT_SEC,
    SANDBOX,
)
from loopx_chat.codex.turn_events import TurnEvents, TurnOutcome
from loopx_chat.errors import CodexError, Remedy
from loopx_chat.state.session_records import TokenCounts, TurnStatus

HOME_HOST_REMEDY = Remedy(
    summary="The Codex app-server runs on a different home than loopx-chat pinned.",
    next_action="Check for a wrapper that rewrites CODEX_HOME, then restart loopx-chat.",
)


# How often a refused `turn/interrupt` is asked again, and how long `abandon_turn` keeps at it.
INTERRUPT_RETRY_SEC = 0.05
ABANDON_RETRY_SEC = 2.0
# How long a `turn/interrupt` waits for its answer. codex answers at once while the turn runs;
# codex 0.160.0-0.168.0 never answer one that arrives after an interrupted turn ended (0.169.0
# and later say "no active turn to interrupt"; seen on 0.160.0 and 0.171.0), so waiting the
# request timeout (30 s) would hold the caller for nothing: the turn's own `turn/completed`
# says how it ended.
INTERRUPT_ANSWER_SEC = 2.0
# How many ended turns a thread remembers, so an interrupt for one of them is never sent.
ENDED_TURNS_KEPT = 64


@dataclass(frozen=True)
class Timeouts:
    startup: float = 30.0
    request: float = 30.0
    idle: float = IDLE_TIMEOUT_SEC  # no notification at all for this long during a turn
    hard: float = HARD_TIMEOUT_SEC  # whole turn
    first_output: float = FIRST_OUTPUT_TIMEOUT_SEC  # nothing produced yet for this long
    close_grace: float = 3.0
    interrupt_settle: float = 5.0


@dataclass(frozen=True)
class ThreadOptions:
    sandbox: str = SANDBOX
    approval_policy: str = APPROVAL
    config_args: tuple[str, ...] = ()
    server_requests: ServerRequestPolicy = field(default_factory=ServerRequestPolicy)
    # Turns in codex's Plan collaboration mode: the only mode in which the model may ask the
    # owner a question (`request_user_input`).
    plan: bool = False


# A sandbox mode as `turn/start`'s `sandboxPolicy` (thread/start and thread/resume take the
# mode's name; a turn takes the policy object, for itself and the thread's later turns).
SANDBOX_POLICIES: dict[str, dict[str, str]] = {
    "read-only": {"type": "readOnly"},
    "workspace-write": {"type": "workspaceWrite"},
}


class _LegacyCatalog(Exception):
    pass


@dataclass(frozen=True)
class HostLaunch:
    """Everything one app-server start needs; the catalog retry reuses it unchanged."""

    executable: Path
    codex_home: Path  # the pinned home, passed explicitly to every process
    work_dir: Path
    environ: Mapping[str, str]
    log_path: Path  # the app-server's stderr
    options: ThreadOptions
    timeouts: Timeouts
    # Work that need not precede the spawn, run while codex boots (after `initialize` is
    # sent, before its answer); it runs for each process a launch starts, so it must be
    # idempotent. What it raises ends the process it ran for.
    while_starting: Callable[[], None] | None = None
    # How the app-server is started: the real subprocess unless a test passes its own host.
    connect: ConnectionFactory = AppServerProcess.spawn


def _spawn_handshaked(launch: HostLaunch, config_args: list[str]) -> HostConnection:
    """A started app-server that answered `initialize` for the pinned home, or an error."""
    proc = launch.connect(
        executable=launch.executable,
        codex_home=launch.codex_home,
        work_dir=launch.work_dir,
        environ=launch.environ,
        config_args=config_args,
        stderr_log=launch.log_path,
        policy=launch.options.server_requests,
    )
    try:
        CodexThread._handshake(
            proc, launch.codex_home, launch.timeouts, launch.log_path, launch.while_starting
        )
    except BaseException:
        proc.close(launch.timeouts.close_grace)
        raise
    return proc


PROTOCOL_REMEDY = Remedy(
    summary="The Codex app-server broke the JSON-RPC protocol and was stopped.",
    next_action="Check that --codex-bin / LOOPX_CHAT_CODEX_BIN is a real codex (not a wrapper "
    "that prints to stdout), then retry; the session resumes in a fresh app-server.",
)


def _exited_error(proc: HostConnection, log_path: Path, when: str) -> CodexError:
    if proc.protocol_fault is not None:
        return CodexError(
            f"Codex app-server sent {proc.protocol_fault} {when} and was stopped",
            error_code="app_server_protocol",
            remedy=PROTOCOL_REMEDY,
        )
    code = proc.wait_exit(2.0)
    return CodexError(
        f"Codex app-server exited (code {code}) {when}; its stderr is in {log_path}",
        error_code="app_server_exited",
        remedy=Remedy(
            summary="Codex app-server stopped unexpectedly.",
            next_action="Read the stderr log named above, fix the cause, then retry.",
        ),
    )


class CodexThread:
    """A warm app-server process with one thread loaded."""

    def __init__(
        self,
        proc: HostConnection,
        thread_id: str,
        timeouts: Timeouts,
        log_path: Path,
        options: ThreadOptions | None = None,
        model: str | None = None,
    ) -> None:
        self.proc = proc
        self.thread_id = thread_id
        self.timeouts = timeouts
        self.log_path = log_path
        self.options = options or ThreadOptions()
        # The sandbox codex applies to the thread's next turn: the one it was opened with,
        # until a turn names another (`start_turn` sends it when `options.sandbox` differs).
        self._sandbox_in_effect: str | None = self.options.sandbox
        # Likewise the approval policy (thread/start and thread/resume set it) and the
        # collaboration mode (unknown after a resume: another client may have left Plan on).
        # Naming either in `turn/start` costs codex 2-3 ms before it answers, every turn.
        self._approval_in_effect: str | None = self.options.approval_policy
        self._mode_in_effect: str | None = None
        self.model = model  # as thread/start or thread/resume reported it (Plan mode needs it)
        self.active_turn_id: str | None = None
        self._ended_turns: dict[str, None] = {}  # ordered: the last ENDED_TURNS_KEPT
        # The thread's cumulative usage as codex last reported it (a resume reports it too):
        # a turn is charged the growth of this total, never another turn's `last` figure.
        self.usage_total: TokenCounts | None = None

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(cls, launch: HostLaunch, *, resume_thread_id: str | None) -> CodexThread:
        load = functools.partial(cls._open_once, launch, resume_thread_id=resume_thread_id)
        try:
            return load(catalog_path=None)
        except _LegacyCatalog:
            pass
        catalog = write_builtin_catalog(launch.executable, launch.environ)
        try:
            # The retry is a second process: it gets the same pinned home, never a re-derived one.
            thread = load(catalog_path=catalog)
        except _LegacyCatalog:
            raise catalog_incompatible("the built-in catalog was rejected too") from None
        finally:
            with contextlib.suppress(OSError):
                catalog.unlink()
        return thread

    @classmethod
    def _open_once(
        cls,
        launch: HostLaunch,
        *,
        resume_thread_id: str | None,
        catalog_path: Path | None,
    ) -> CodexThread:
        config_args = list(launch.options.config_args)
        if catalog_path is not None:
            config_args.append(f"model_catalog_json={json.dumps(str(catalog_path))}")
        proc = _spawn_handshaked(launch, config_args)
        try:
            thread_id, model = cls._load_thread(
                proc,
                resume_thread_id=resume_thread_id,
                work_dir=launch.work_dir,
                options=launch.options,
                timeouts=launch.timeouts,
                retry_allowed=catalog_path is None,
                log_path=launch.log_path,
            )
        except BaseException:
            proc.close(launch.timeouts.close_grace)
            raise
        return cls(proc, thread_id, launch.timeouts, launch.log_path, launch.options, model)

    @staticmethod
    def _handshake(
        proc: HostConnection,
        codex_home: Path,
        timeouts: Timeouts,
        log_path: Path,
        while_starting: Callable[[], None] | None = None,
    ) -> None:
        try:
            result = proc.request(
                "initialize",
                {
                    "clientInfo": {
                        "name": "loopx_chat",
                        "title": "loopx-chat",
                        "version": __version__,
                    },
                    "capabilities": {"experimentalApi": True},
                },
                timeouts.startup,
                after_send=while_starting,
            )
        except ProcessGone:
            raise _exited_error(proc, log_path, "before answering initialize") from None
        except TimeoutError:
            raise CodexError(
                f"Codex app-server did not answer initialize within {timeouts.startup:g}s",
                error_code="startup_timeout",
                remedy=HOST_REMEDY,
            ) from None
        except RpcError:
            raise CodexError(
                "Codex app-server rejected initialize.",
                error_code="app_server_rejected",
                remedy=HOST_REMEDY,
            ) from None
        reported = result.get("codexHome")
        if not isinstance(reported, str) or Path(reported).resolve() != codex_home:
            raise CodexError(
                f"Codex app-server reports home {reported!r}, "
                f"but loopx-chat pinned {str(codex_home)!r}",
                error_code="codex_home_host_mismatch",
                remedy=HOME_HOST_REMEDY,
            )
        try:
            proc.notify("initialized")
        except ProcessGone:
            raise _exited_error(proc, log_path, "after initialize") from None

    @staticmethod
    def _load_thread(
        proc: HostConnection,
        *,
        resume_thread_id: str | None,
        work_dir: Path,
        options: ThreadOptions,
        timeouts: Timeouts,
        retry_allowed: bool,
        log_path: Path,
    ) -> tuple[str, str | None]:
        """(thread id, the model codex reports for it)."""
        params: dict[str, Any] = {
            "cwd": str(work_dir),
            # Resume restores most settings but not the sandbox: pass both every time.
            "sandbox": options.sandbox,
            "approvalPolicy": options.approval_policy,
        }
        if resume_thread_id is not None:
            method = "thread/resume"
            params.update(threadId=resume_thread_id, excludeTurns=True)
        else:
            method = "thread/start"

        def rejected(exc: RpcError) -> Exception:
            if upstream_meaning(method, exc.message) != "legacy_catalog":
                return classify_rpc_error(method, exc.message)
            if retry_allowed:
                return _LegacyCatalog()
            return catalog_incompatible("the built-in catalog was rejected too")

        result = _rpc(
            proc,
            method,
            params,
            timeouts.request,
            log_path,
            timeout_code="startup_timeout",
            rejected=rejected,
        )
        thread_id = _returned_id(result, "thread")
        if resume_thread_id is not None and thread_id != resume_thread_id:
            raise CodexError(
                "Codex app-server resumed an unexpected thread.",
                error_code="app_server_protocol",
                remedy=HOST_REMEDY,
            )
        model = result.get("model")
        return thread_id, model if isinstance(model, str) else None

    # -- turns --------------------------------------------------------------------------
    def start_turn(
        self, text: str, *, after_send: Callable[[], None] | None = None
    ) -> tuple[str, bool]:
        """Send `turn/start`; returns (upstream turn id, steered). Steer = same active id.
        `after_send` runs once the request is written, while codex works on it (see
        `AppServerProcess.request`).

        Codex keeps a turn's approval policy, sandbox and collaboration mode for the
        thread's later turns, so each goes only when it differs from what codex applies now
        (naming one costs codex 2-3 ms before it answers, measured on 0.171.0). The mode
        is Plan when the options ask for it, else Default, named on the first turn after a
        load: on a thread left in Plan mode codex's goal loop starts no continuation turn
        at all (verified on 0.171.0, after a resume too). A `turn/start` that fails leaves
        all three unknown, so the next turn names them again."""
        params: dict[str, Any] = {
            "threadId": self.thread_id,
            "input": [{"type": "text", "text": text, "text_elements": []}],
        }
        approval = self.options.approval_policy
        if approval != self._approval_in_effect:
            params["approvalPolicy"] = approval
        sandbox = self.options.sandbox
        if sandbox != self._sandbox_in_effect and sandbox in SANDBOX_POLICIES:
            params["sandboxPolicy"] = SANDBOX_POLICIES[sandbox]
        mode = "plan" if self.options.plan else "default"
        if (self.options.plan or self.model) and mode != self._mode_in_effect:
            params["collaborationMode"] = {
                "mode": mode,
                "settings": {
                    "model": self.model,
                    "reasoning_effort": None,
                    "developer_instructions": None,
                },
            }
        try:
            result = _rpc(
                self.proc,
                "turn/start",
                params,
                self.timeouts.request,
                self.log_path,
                after_send=after_send,
            )
        except BaseException:
            self._approval_in_effect = self._sandbox_in_effect = self._mode_in_effect = None
            raise
        turn_id = _returned_id(result, "turn")
        steered = self.active_turn_id is not None and turn_id == self.active_turn_id
        self.active_turn_id = turn_id
        if steered:  # a steer joins the running turn: what it named may not have applied
            self._approval_in_effect = None if "approvalPolicy" in params else approval
            self._sandbox_in_effect = None if "sandboxPolicy" in params else sandbox
            if "collaborationMode" in params:
                self._mode_in_effect = None
        else:
            self._approval_in_effect, self._sandbox_in_effect = approval, sandbox
            if "collaborationMode" in params:
                self._mode_in_effect = mode
        return turn_id, steered

    def wait_turn(
        self,
        turn_id: str,
        *,
        on_delta: Callable[[str], None] | None = None,
        should_interrupt: Callable[[], bool] = lambda: False,
        on_notice: Callable[[str], None] | None = None,
        timeouts: Timeouts | None = None,
    ) -> TurnOutcome:
        """Consume notifications until `turn_id` completes, a timeout fires or the process dies
        (`timeouts`: this turn's own idle and turn limits, else the thread's).

        What codex says while it retries (an unreachable model) goes to `on_notice` as our own
        line (`turn_notices`); a turn that has produced nothing within `first_output` is
        stopped with `first_output_timeout`, retries or not.

        The turn's tokens are the thread total at its end minus the total before it: codex
        repeats the previous total (and the previous turn's `last`) for a turn that is
        interrupted or fails before the model answers, and that must cost nothing.
        """
        limits = timeouts or self.timeouts
        events = TurnEvents(self)  # the turn's tokens and outcome: the one decoder's
        events.begin(turn_id)
        started = last_event = began = time.monotonic()
        produced = False  # a reply, reasoning, a tool call, a token count or an owner wait
        # While codex waits on the owner (an approval, a question), neither the idle nor the
        # turn timeout runs: the time spent waiting is added back when the wait ends.
        waiting_since: float | None = None
        interrupt_sent_for: str | None = None
        settle_deadline: float | None = None
        retry_at: float | None = None  # when to ask again for an interrupt codex refused
        while True:
            now = time.monotonic()
            if interrupt_sent_for is None:
                reason: str | None = None
                if should_interrupt():
                    reason = "interrupted"
                elif waiting_since is not None:
                    pass
                elif now - last_event > limits.idle:
                    reason = "idle_timeout"
                elif now - started > limits.hard:
                    reason = "hard_timeout"
                elif not produced and now - began > limits.first_output:
                    reason = "first_output_timeout"
                if reason is not None:
                    interrupt_sent_for = reason
                    settle_deadline = now + self.timeouts.interrupt_settle
                    retry_at = None if self._send_interrupt(turn_id) else now + INTERRUPT_RETRY_SEC
            elif settle_deadline is not None and now > settle_deadline:
                # The server never confirmed the interrupt: treat the turn as over.
                self.turn_ended(turn_id)
                return events.stopped(turn_id, _timeout_code(interrupt_sent_for))
            elif retry_at is not None and now >= retry_at:
                retry_at = None if self._send_interrupt(turn_id) else now + INTERRUPT_RETRY_SEC
            try:
                note = self.proc.next_notification(timeout=0.1)
            except ProcessGone:
                self.active_turn_id = None
                code = "app_server_protocol" if self.proc.protocol_fault else "app_server_exited"
                return events.stopped(turn_id, code)
            if note is None:
                continue
            last_event = time.monotonic()
            event = events.see(note)
            if event is None or event.turn_id not in (None, turn_id):
                continue
            kind = event.kind
            if kind == "delta" or kind == "produced":  # only a delta has text
                produced = True
                if on_delta is not None and event.text is not None:
                    on_delta(event.text)
            elif kind == "status":
                produced = produced or event.waiting
                if event.waiting and waiting_since is None:
                    waiting_since = last_event
                elif not event.waiting and waiting_since is not None:
                    started += last_event - waiting_since
                    waiting_since = None
            elif kind == "notice" and on_notice is not None and event.text is not None:
                on_notice(event.text)
            elif kind == "turn_ended" and event.outcome is not None:
                self.turn_ended(turn_id)
                timeout_code = _timeout_code(interrupt_sent_for)
                if timeout_code is not None and event.outcome.status == TurnStatus.INTERRUPTED:
                    return replace(event.outcome, error_code=timeout_code)
                return event.outcome

    def turn_ended(self, turn_id: str) -> None:
        """codex said `turn_id` is over: it is no longer active, and is never interrupted."""
        if self.active_turn_id == turn_id:
            self.active_turn_id = None
        self._ended_turns[turn_id] = None
        while len(self._ended_turns) > ENDED_TURNS_KEPT:
            del self._ended_turns[next(iter(self._ended_turns))]

    def abandon_turn(self, turn_id: str) -> None:
        """Interrupt a turn nobody will wait for, and stop counting it as the active one.
        A turn codex already said is over is not asked again (see INTERRUPT_ANSWER_SEC)."""
        if turn_id in self._ended_turns and self.active_turn_id != turn_id:
            return
        # The turn was started a moment ago: see `_send_interrupt` for why it is asked again.
        deadline = time.monotonic() + ABANDON_RETRY_SEC
        while not self._send_interrupt(turn_id) and time.monotonic() < deadline:
            time.sleep(INTERRUPT_RETRY_SEC)
        if self.active_turn_id == turn_id:
            self.active_turn_id = None

    def _send_interrupt(self, turn_id: str) -> bool:
        """Ask codex to interrupt the turn; False when codex refused (ask again soon).

        codex answers `turn/start` before the turn can be interrupted: for the first few
        milliseconds `turn/interrupt` fails with "no active turn to interrupt" and the turn
        runs on (seen with codex 0.171: 6 of 6 interrupts sent at once were refused, and the
        turn ran until the model stream timed out). A refused interrupt is therefore sent
        again until codex takes it or the turn ends. A dead process or a request that timed
        out is not retried: the notification loop sees both.
        """
        try:
            self.proc.request(
                "turn/interrupt",
                {"threadId": self.thread_id, "turnId": turn_id},
                min(self.timeouts.request, INTERRUPT_ANSWER_SEC),
            )
        except RpcError:
            return False
        except (ProcessGone, TimeoutError):
            return True
        return True

    def read_history(self) -> list[dict[str, Any]]:
        """Turns with their user and agent text, read from the host on demand (never stored)."""
        return _read_history(self.proc, self.thread_id, self.timeouts, self.log_path)

    def close(self) -> int | None:
        return self.proc.close(self.timeouts.close_grace)

    @property
    def alive(self) -> bool:
        return self.proc.alive


class ThreadReader:
    """An app-server with no thread loaded, for reading a thread from disk.

    It never resumes the thread, so it takes no writer lock: history can be read while another
    client (ours or not) drives the thread. Codex then reports that client's in-flight turn as
    `interrupted`; the caller decides whether it knows better.
    """

    def __init__(self, proc: HostConnection, timeouts: Timeouts, log_path: Path) -> None:
        self.proc = proc
        self.timeouts = timeouts
        self.log_path = log_path

    thread_id: str | None = None  # it loads none

    @classmethod
    def open(cls, launch: HostLaunch) -> ThreadReader:
        proc = _spawn_handshaked(launch, list(launch.options.config_args))
        return cls(proc, launch.timeouts, launch.log_path)

    def read_history(self, thread_id: str) -> list[dict[str, Any]]:
        return _read_history(self.proc, thread_id, self.timeouts, self.log_path)

    def request(self, thread_id: str, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """One call about a thread this process never loads (thread metadata, the goal).

        Codex keeps a thread's goal in the home's state database, so a goal read or written
        here is what a process holding the thread sees too; and since nothing resumes the
        thread, an `active` goal cannot set off a continuation turn.
        """
        params = {"threadId": thread_id, **params}
        return _rpc(self.proc, method, params, self.timeouts.request, self.log_path)

    def close(self) -> int | None:
        return self.proc.close(self.timeouts.close_grace)


def _read_history(
    proc: HostConnection, thread_id: str, timeouts: Timeouts, log_path: Path
) -> list[dict[str, Any]]:
    params = {"threadId": thread_id, "includeTurns": True}
    result = _rpc(proc, "thread/read", params, timeouts.request, log_path)
    thread = result.get("thread")
    if not isinstance(thread, dict):
        thread = {}
    return [_render_turn(t) for t in thread.get("turns") or [] if isinstance(t, dict)]


def _rpc(
    proc: HostConnection,
    method: str,
    params: Mapping[str, Any],
    timeout: float,
    log_path: Path,
    *,
    timeout_code: str = "request_timeout",
    rejected: Callable[[RpcError], Exception] | None = None,
    after_send: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """One request, with every way it can fail as a CodexError (or what `rejected` returns
    for an error answer); upstream text reaches only the classifier, never the message."""
    try:
        return proc.request(method, params, timeout, after_send=after_send)
    except RpcError as exc:
        if rejected is not None:
            raise rejected(exc) from None
        raise classify_rpc_error(method, exc.message) from None
    except ProcessGone:
        raise _exited_error(proc, log_path, f"during {method}") from None
    except TimeoutError:
        raise CodexError(
            f"Codex app-server did not answer {method} within {timeout:g}s",
            error_code=timeout_code,
            remedy=HOST_REMEDY,
        ) from None


def _returned_id(result: dict[str, Any], kind: str) -> str:
    item = result.get(kind)
    found = item.get("id") if isinstance(item, dict) else None
    if not isinstance(found, str) or not found:
        raise CodexError(
            f"Codex app-server did not return a {kind} id.",
            error_code="app_server_protocol",
            remedy=HOST_REMEDY,
        )
    return found


def _timeout_code(reason: str | None) -> str | None:
    return reason if reason in ("idle_timeout", "hard_timeout", "first_output_timeout") else None


def _render_turn(turn: Mapping[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, str]] = []
    for item in turn.get("items") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "userMessage":
            text = " ".join(
                part.get("text", "")
                for part in item.get("content") or []
                if isinstance(part, dict) and part.get("type") == "text"
            )
            messages.append({"role": "user", "text": text})
        elif item.get("type") == "agentMessage" and isinstance(item.get("text"), str):
            messages.append({"role": "agent", "text": item["text"]})
    return {"turn_id": turn.get("id"), "status": turn.get("status"), "messages": messages}

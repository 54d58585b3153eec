"""The chat controller: sessions on one pinned Codex home, driven through app-servers.

Owns the orchestration rules of the spec's "Managed Codex home ownership":
- the home is resolved once, at construction, from the environment snapshot it is given;
- resume and submit compare a session's `codex_home` with ours before any state write,
  before any spawn and before a turn is accepted (`codex_home_mismatch`);
- new managed sessions store the bound home; legacy sessions (no home) get it only after
  their upstream thread is restored; attached-host sessions never spawn and are never bound;
- submit is idempotent by `client_turn_id`; one writer per thread (`thread_busy`);
- turn records are compact; agent text only streams to the caller.

It never mutates the process environment and never spawns anything itself: the codex
adapter does, through the `connect` factory it is given (`AppServerProcess.spawn` unless a
test passes an in-process host; see `codex/host_connection.py`). Interrupts from another
process arrive as a marker file in the session folder.
Which threads stay loaded between turns, and when they are let go, is `warm_threads`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.binary import CodexBinary, find_codex
from loopx_chat.codex.host_connection import (
    ConnectionFactory,
    HostConnection,
    ProcessGone,
    RpcError,
    ServerRequest,
)
from loopx_chat.codex.thread import (
    CodexThread,
    HostLaunch,
    ThreadOptions,
    ThreadReader,
    Timeouts,
    TurnOutcome,
)
from loopx_chat.codex.turn_defaults import DECISION_TIMEOUT_SEC
from loopx_chat.controller.home_ownership import (
    AppServerRegistry,
    HomeLock,
    RegisteredServer,
)
from loopx_chat.controller.parked_outcomes import ParkedOutcomes
from loopx_chat.controller.running_goals import RunningGoals
from loopx_chat.controller.thread_lock import DEFAULT_HOLD_AFTER_TURN_SEC, ThreadWriterLock
from loopx_chat.controller.turn_ledger import (
    TurnLedger,
    TurnNotRecorded,
    TurnResult,
    message_digest,
)
from loopx_chat.controller.turn_settings import (
    TurnSettings,
    policy_given,
    turn_timeouts,
    with_policy,
)
from loopx_chat.controller.warm_threads import ResumedGoal, Warm, WarmThreads
from loopx_chat.errors import CodexError, LoopxChatError, Remedy, UsageError
from loopx_chat.home import CodexHomeBinding, resolve_codex_home
from loopx_chat.pids import start_time
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.private_files import (
    PRIVATE_FILE_MODE,
    atomic_write_bytes,
    ensure_private_dir,
    state_write,
)
from loopx_chat.state.session_records import (
    SessionRecord,
    SessionStatus,
    TokenCounts,
    TurnRecord,
    TurnStatus,
    validate_session_id,
)
from loopx_chat.state.session_store import SessionStore

if TYPE_CHECKING:
    from loopx_chat.controller.host_requests import HostRequestDesk

STDERR_LOG = "app-server.stderr.log"

# How often a running turn looks for another process's interrupt marker. The check runs
# before every notification (a streamed reply has hundreds), and a stat each time was a
# measurable share of a turn's own cost; a person's interrupt waits at most this long more.
MARKER_CHECK_SEC = 0.05


class _MarkerWatch:
    """Whether the interrupt marker exists, asked of the filesystem at most every
    `MARKER_CHECK_SEC`; once seen, it stays seen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._next_check = 0.0
        self._seen = False

    def present(self) -> bool:
        now = time.monotonic()
        if not self._seen and now >= self._next_check:
            self._next_check = now + MARKER_CHECK_SEC
            self._seen = os.path.exists(self.path)
        return self._seen


MISMATCH_MESSAGE = (
    "This managed session belongs to a different Codex home. Restart loopx-chat with its "
    "original LOOPX_CHAT_CODEX_HOME; do not copy or rebind its history."
)
MISSING_HOME_REMEDY = Remedy(
    summary="The pinned Codex home does not exist.",
    next_action="Create the folder, or start loopx-chat with LOOPX_CHAT_CODEX_HOME pointing at "
    "an existing Codex home.",
)

WORK_DIR_REMEDY = Remedy(
    summary="This session's work folder no longer exists.",
    next_action="Restore the folder (or recreate it at the same path) and send again, or start "
    "a new session in another folder with `loopx-chat chat new --cwd DIR`.",
)


@dataclass(frozen=True)
class ControllerConfig:
    """How a controller drives codex. Its defaults are the chat defaults (idle 180 s, turn
    900 s, sandbox read-only: `Timeouts` and `ThreadOptions`); the CLI shows and overrides
    them from `DEFAULT_CONFIG`, never from numbers of its own."""

    timeouts: Timeouts = field(default_factory=Timeouts)
    options: ThreadOptions = field(default_factory=ThreadOptions)
    warm_idle_close_sec: float = DEFAULT_HOLD_AFTER_TURN_SEC
    # How many threads may be loaded at once (None: no cap). The service sets it, since its
    # clients open sessions; one CLI command loads one thread.
    max_warm: int | None = None
    # How long an approval or question codex asks waits for the owner (host_requests).
    decision_timeout: float = DECISION_TIMEOUT_SEC
    # Which of `options.approval_policy` / `options.plan` the command gave itself: those win
    # over the goal's goal_state (`turn_policy`); the others are only the default.
    policy_given: frozenset[str] = frozenset()


DEFAULT_CONFIG = ControllerConfig()


class _Host(Protocol):
    """What `_spawn` registers: a started app-server and the thread it loaded, if any."""

    @property
    def proc(self) -> HostConnection: ...

    @property
    def thread_id(self) -> str | None: ...

    def close(self) -> int | None: ...


_H = TypeVar("_H", bound=_Host)


class ChatController:
    def __init__(
        self,
        *,
        store: SessionStore,
        environ: Mapping[str, str],
        cwd: Path,
        codex_bin: str | None = None,
        config: ControllerConfig | None = None,
        connect: ConnectionFactory = AppServerProcess.spawn,
    ) -> None:
        """`connect` starts each app-server: the real subprocess unless a test passes an
        in-process host (the seam of `codex/host_connection.py`)."""
        # Capture once; the service's startup environment is not session identity.
        self._environ: dict[str, str] = dict(environ)
        self.binding: CodexHomeBinding = resolve_codex_home(self._environ, cwd)
        self.store = store
        self.config = config or ControllerConfig()
        self._codex_bin = codex_bin
        self._connect = connect
        self._binary: CodexBinary | None = None
        self._home_lock = HomeLock(store.root, self.binding.path)
        self._registry = AppServerRegistry(store.root)
        self._warm = WarmThreads(
            idle_close_sec=self.config.warm_idle_close_sec,
            registry=self._registry,
            quiesce_requested=self._home_lock.quiesce_requested,
            max_warm=self.config.max_warm,
            on_let_go=self._forget_thread,
        )
        self.control = ControlLog(store.root)
        self.turns = TurnLedger(store, self.control)
        # Turns Codex finished while the disk was full: recorded once space returns.
        self.parked = ParkedOutcomes(self.turns)
        self._start_recorded = False
        # Modules a caller will need once codex answers (a goal run: the host-request desk
        # `held_thread` binds, the rollout reader of its end), imported while codex starts
        # (`_while_codex_starts`) instead of on the way from its answer to the goal set.
        self.while_starting_imports: list[str] = []
        # Sessions whose thread this controller loaded while codex ran a goal loop that no
        # run of ours authorized (`_notice_host_loop`); the CLI says so on stderr.
        self.host_loop_notices: list[str] = []
        # The runs of this process by goal (the one registry of them): a gate recorded here
        # blocks its run at once, and a thread a run follows is never a foreign loop.
        self.running_goals = RunningGoals()
        # What codex asks (approvals, questions) is offered to the host-request desk first
        # on a thread whose owner let codex ask at all (`_asking`: its policy is not `never`,
        # or Plan mode; the command's flag, the goal's goal_state or the default decides,
        # `turn_policy`); on any other thread anything codex sends anyway is answered at
        # once by the policy, as before.
        self._host_desk: HostRequestDesk | None = None
        self._host_desk_lock = threading.Lock()
        self._asking: set[str] = set()
        options = self.config.options
        holder = replace(options.server_requests, holder=self._hold_host_request)
        self.config = replace(self.config, options=replace(options, server_requests=holder))

    @property
    def host_requests(self) -> HostRequestDesk:
        """The desk holding codex's live approvals and questions (made on first use)."""
        with self._host_desk_lock:
            if self._host_desk is None:
                from loopx_chat.controller.host_requests import HostRequestDesk
                from loopx_chat.goals.gate_store import GateStore

                self._host_desk = HostRequestDesk(
                    GateStore(self.store.root), decision_timeout=self.config.decision_timeout
                )
                self._host_desk.on_gate = self.running_goals.gate_posted
                self._host_desk.before_window = self.running_goals.gate_decided
            return self._host_desk

    def _forget_thread(self, thread: CodexThread) -> None:
        """A thread was let go: what was kept for its requests goes with it (loaded again,
        its next turn binds it again)."""
        self._asking.discard(thread.thread_id)
        if self._host_desk is not None:
            self._host_desk.unbind(thread.thread_id)

    def _hold_host_request(self, proc: Any, request: ServerRequest) -> bool:
        if str(request.params.get("threadId", "")) not in self._asking:
            return False
        return self.host_requests.take(proc, request)

    def thread_options(
        self,
        goal_id: str,
        approval_policy: str | None = None,
        settings: TurnSettings | None = None,
    ) -> ThreadOptions:
        """The options a thread of `goal_id` runs with: `approval_policy` (a run's own), else
        the turn's or the command's flag, else the goal's goal_state, else this controller's
        default (`turn_policy`)."""
        from loopx_chat.controller.turn_policy import goal_options

        options = goal_options(
            self.store.root,
            goal_id,
            with_policy(self.config.options, settings),
            self.config.policy_given | policy_given(settings),
        )
        if approval_policy is not None:
            options = replace(options, approval_policy=approval_policy)
        return options

    def apply_policy(
        self,
        thread: CodexThread,
        goal_id: str,
        approval_policy: str | None = None,
        settings: TurnSettings | None = None,
    ) -> None:
        """Bring a loaded thread's approval policy and Plan mode up to date for its next turn
        (`turn/start` carries both; the policy then holds for the thread's later turns)."""
        from loopx_chat.controller.turn_policy import asks

        options = self.thread_options(goal_id, approval_policy, settings)
        if (options.approval_policy, options.plan) != (
            thread.options.approval_policy,
            thread.options.plan,
        ):
            thread.options = replace(
                thread.options, approval_policy=options.approval_policy, plan=options.plan
            )
        if asks(thread.options):
            self._asking.add(thread.thread_id)
        else:
            self._asking.discard(thread.thread_id)

    def record_start(self) -> None:
        """Which owner gates were open when this controller started (a metrics input).

        Recorded once, when the controller first does real work (or a service starts), so a
        refused call (another home, a busy thread) leaves owner-local state untouched.
        """
        if self._start_recorded:
            return
        self._start_recorded = True
        from loopx_chat.goals.gate_store import GateStore  # only once a controller works

        goals = GateStore(self.store.root)
        try:
            pending = [
                g for gid in goals.goal_ids() for g in goals.gates(gid) if g.status == "pending"
            ]
        except LoopxChatError:
            pending = []  # an unreadable gate log is reported by `gate list`, not here
        open_ids = [g.gate_id for g in pending]
        self.control.record("controller_started", open_gate_ids=open_ids, pid=os.getpid())
        if any(g.host and g.host.get("state") == "live" for g in pending):
            with contextlib.suppress(LoopxChatError):
                # A request held by a process that is gone was forgotten by codex too.
                self.host_requests.expire_orphans(pending)

    @property
    def codex_home(self) -> Path:
        return self.binding.path

    # -- helpers ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _using(self, session_id: str) -> Iterator[None]:
        """Hold the session's lock; afterwards, however the work ended, a loaded thread that
        is not in a turn starts its idle timer (so no error path keeps an app-server and its
        writer lock forever)."""
        with self._warm.session_lock(session_id):
            try:
                yield
            finally:
                self._warm.idle_soon(session_id)

    def find_binary(self) -> CodexBinary:
        """The codex this controller spawns (looked up once); `host_tool_unavailable` if none."""
        if self._binary is None:
            self._binary = find_codex(self._codex_bin, self._environ)
        return self._binary

    @property
    def environ(self) -> dict[str, str]:
        """A copy of the environment snapshot taken at construction."""
        return dict(self._environ)

    def _check_home(self, record: SessionRecord) -> None:
        if record.agent_id != "codex" or record.session_mode == "attached_host":
            return
        if record.codex_home is not None and record.codex_home != str(self.binding.path):
            raise CodexError(MISMATCH_MESSAGE, error_code="codex_home_mismatch")

    def _ensure_home_exists(self) -> None:
        home = self.binding.path
        if home.is_dir():
            return
        if self.binding.source == "default" and not home.exists():
            ensure_private_dir(home)  # what codex itself does for the default home
            return
        raise CodexError(
            f"Codex home {home} does not exist or is not a folder",
            error_code="codex_home_missing",
            remedy=MISSING_HOME_REMEDY,
        )

    def _load_checked(self, session_id: str, *, managed: bool = False) -> SessionRecord:
        record = self.store.load(validate_session_id(session_id))
        if record.agent_id != "codex":
            # Listed and projected like any session, but never driven: nothing is spawned.
            raise UsageError(
                f"session {record.session_id} belongs to agent {record.agent_id!r}; loopx-chat "
                "drives only Codex sessions",
                error_code="agent_unsupported",
            )
        self._check_home(record)
        if managed and record.session_mode == "attached_host":
            raise CodexError(
                "attached-host sessions have no managed app-server",
                error_code="app_server_rejected",
            )
        return record

    def _open_thread(
        self,
        session_id: str,
        work_dir: Path,
        resume_thread_id: str | None,
        goal_id: str,
        approval_policy: str | None = None,
    ) -> CodexThread:
        """Start or resume the thread with the goal's policy (`thread/start` and
        `thread/resume` carry it; a continuation turn of codex's loop runs with it)."""
        thread = self._spawn(
            session_id,
            work_dir,
            lambda launch: CodexThread.open(launch, resume_thread_id=resume_thread_id),
            self.thread_options(goal_id, approval_policy),
        )
        self.apply_policy(thread, goal_id, approval_policy)
        return thread

    def _spawn(
        self,
        session_id: str,
        work_dir: Path,
        open_host: Callable[[HostLaunch], _H],
        options: ThreadOptions | None = None,
    ) -> _H:
        """Start an app-server of the bound home for `session_id` and register it."""
        self._ensure_home_exists()
        if not work_dir.is_dir():
            # Before any spawn: codex would fail to start in it, which reads like a broken install.
            raise CodexError(
                f"the session's work folder {work_dir} does not exist any more",
                error_code="work_dir_missing",
                remedy=WORK_DIR_REMEDY,
            )
        executable = self.find_binary().path
        folder = self.store.session_dir(session_id)
        with state_write(folder):
            ensure_private_dir(folder)
        launch = HostLaunch(
            executable=executable,
            codex_home=self.binding.path,
            work_dir=work_dir,
            environ=self._environ,
            log_path=folder / STDERR_LOG,
            options=options or self.config.options,
            timeouts=self.config.timeouts,
            while_starting=self._while_codex_starts,
            connect=self._connect,
        )
        # A place under the warm cap first: refused as `busy` before anything is spawned.
        # The caller's `add` (or its failure path's `unreserve`) ends the reservation.
        self._warm.reserve(session_id)
        # Held while spawning, so an exclusive operation either sees our registered
        # app-server or keeps us from starting one (home_exclusive_hold).
        with self._home_lock.spawn_guard():
            host = open_host(launch)
            try:
                self._registry.register(
                    RegisteredServer(
                        pid=host.proc.pid,
                        create_time=start_time(host.proc.pid) or 0.0,
                        codex_home=str(self.binding.path),
                        sqlite_home=str(self.binding.sqlite_home),
                        thread_id=host.thread_id,
                        session_id=session_id,
                    )
                )
            except BaseException:
                host.close()  # an app-server nobody can see must not outlive this call
                raise
        return host

    def _while_codex_starts(self) -> None:
        """What a first spawn needs done but not before it: codex takes 50-100 ms to answer
        `initialize`, and this runs in that wait instead of ahead of the spawn.

        Only now, with a home and a codex to run, does this controller do real work, so its
        start is recorded here (a refusal before the spawn leaves state untouched). The modules
        a caller listed in `while_starting_imports` are imported here too."""
        self.record_start()
        import importlib

        for name in self.while_starting_imports:
            importlib.import_module(name)

    def open_session(
        self,
        goal_id: str,
        work_dir: Path,
        mode: str = "new",
    ) -> SessionRecord:
        if mode not in ("new", "resume_latest"):
            raise UsageError(f"unknown open mode {mode!r}", error_code="usage_error")
        from loopx_chat.goals.gate_store import validate_goal_id  # a turn never needs it

        validate_goal_id(goal_id)  # it names folders and shows on every status screen
        if mode == "resume_latest":
            latest = self._latest_session(goal_id)
            if latest is not None:
                return self.resume_session(latest.session_id)
        work = work_dir.expanduser().resolve()
        if not work.is_dir():
            raise UsageError(f"work dir {work} is not a folder", error_code="usage_error")
        session_id = uuid.uuid4().hex
        try:
            thread = self._open_thread(session_id, work, None, goal_id)
        except BaseException:
            self._warm.unreserve(session_id)  # a failed open holds no place; `add` keeps one
            raise
        lock = ThreadWriterLock(self.store.root, self.binding.path, thread.thread_id)
        try:
            lock.acquire()
            now = self.store.now()
            record = self.store.create(
                SessionRecord(
                    session_id=session_id,
                    goal_id=goal_id,
                    created_at=now,
                    updated_at=now,
                    last_activity_at=now,
                    upstream_thread_id=thread.thread_id,
                    codex_home=str(self.binding.path),
                    work_dir=str(work),
                )
            )
        except BaseException:
            self._warm.unreserve(session_id)
            thread.close()
            lock.release()
            raise
        self._warm.add(session_id, thread, lock)
        self._warm.idle_soon(session_id)
        self._record_session_opened(record)
        return record

    def _record_session_opened(self, record: SessionRecord) -> None:
        """Which owner gates were open when this new session began, and which its first
        screen showed (the gates-preserved metric's denominator and numerator)."""
        # The status reader (projection, quota, reconcile, rollouts) loads only when a session
        # opens: a turn on an existing session never needs it.
        from loopx_chat.goals.gate_store import GateStore
        from loopx_chat.goals.status import session_start_gates

        try:
            open_ids, shown_ids = session_start_gates(
                self.store, GateStore(self.store.root), str(self.binding.path), record.goal_id
            )
        except LoopxChatError:
            return  # an unreadable goal is reported by status, not by a metrics event
        self.control.record(
            "session_opened",
            goal_id=record.goal_id,
            session_id=record.session_id,
            open_gate_ids=open_ids,
            shown_gate_ids=shown_ids,
        )

    def _latest_session(self, goal_id: str) -> SessionRecord | None:
        candidates = [
            s
            for s in self.store.list().sessions
            if s.goal_id == goal_id
            and s.session_mode == "managed_runtime"
            and s.codex_home in (None, str(self.binding.path))
        ]
        return max(candidates, key=lambda s: s.updated_at, default=None)

    def resume_session(self, session_id: str) -> SessionRecord:
        record = self._load_checked(session_id)  # home check before anything else
        if record.session_mode == "attached_host":
            return record
        held = self._warm.get(session_id)
        if held is not None and held.pinned:
            # Loaded and held for codex's loop (a run, or one we follow): resumed already.
            # Waiting for the session's lock would wait for the loop to end.
            return record
        with self._using(session_id):
            record = self._load_checked(session_id)
            self._ensure_warm(record)
            return self.store.load(session_id)

    @contextlib.contextmanager
    def held_thread(self, session_id: str, approval_policy: str | None = None) -> Iterator[Warm]:
        """The session's thread, loaded (resumed if needed, with `approval_policy` when
        given) and kept from the idle close for as long as the caller holds it: a goal run
        follows codex's own loop on it. What codex asks on it goes to the host-request
        desk, bound to the session's goal, when its policy lets codex ask."""
        self._load_checked(session_id, managed=True)
        with self._using(session_id):
            record = self._load_checked(session_id)
            loaded = self._warm.get(session_id)
            warm = self._ensure_warm(record, approval_policy=approval_policy)
            if warm is loaded:
                warm.resumed_goal = None  # resumed before this hold: the goal may have moved
            self.apply_policy(warm.thread, record.goal_id, approval_policy)
            self.host_requests.bind(warm.thread.thread_id, record.session_id, record.goal_id)
            self._warm.cancel_idle_close(warm)
            warm.pinned = True
            try:
                yield warm
            finally:
                warm.pinned = False

    def record_host_loop_turns(self, session_id: str) -> None:
        """Before this process lets a thread go that runs a loop nobody here started, record
        the continuation turns codex ran on it meanwhile (`origin: goal_loop`, no run), like
        any other turn; one still running is recorded interrupted, since closing the thread
        ends it. Reads until codex has been quiet for 0.1 s, or 0.5 s in all: the loop
        spends while the thread is held, and a loop without a budget never goes quiet.
        The host goal is never touched."""
        from loopx_chat.codex.goal_loop import GoalLoopWatch
        from loopx_chat.controller.loop_follower import LoopFollower, LoopTurns, StopRules

        warm = self._warm.get(session_id)
        if warm is None or session_id not in self.host_loop_notices:
            return
        rules = StopRules(quiet_sec=0.1, most_sec=0.5)
        follower = LoopFollower(LoopTurns(self.turns, session_id), rules)
        with self._warm.session_lock(session_id), contextlib.suppress(CodexError):
            follower.follow(GoalLoopWatch(warm.thread))

    def holds(self, session_id: str) -> bool:
        """Whether this controller has the session's thread loaded (its writer lock is ours)."""
        return self._warm.get(session_id) is not None

    def drop_thread(self, session_id: str) -> None:
        """Let the session's loaded thread go (its app-server died or broke the protocol)."""
        self._warm.drop(session_id)

    def _ensure_warm(
        self,
        record: SessionRecord,
        client_turn_id: str | None = None,
        text: str | None = None,
        approval_policy: str | None = None,
    ) -> Warm:
        """The session's loaded thread (resumed if needed). With `approval_policy` (a goal
        run's own), a thread loaded with another policy is loaded again: codex's loop runs
        with the policy of `thread/resume`, and a second resume of a loaded thread does not
        change it (verified on 0.171.0)."""
        warm = self._warm.alive(record.session_id)
        if (
            warm is not None
            and approval_policy is not None
            and warm.running_turn_id is None
            and warm.thread.options.approval_policy != approval_policy
        ):
            self._warm.drop(record.session_id)
            warm = None
        if warm is not None:
            return warm
        if not record.upstream_thread_id:
            raise CodexError(
                "This session has no upstream thread to resume",
                error_code="resume_failed",
            )
        lock = ThreadWriterLock(self.store.root, self.binding.path, record.upstream_thread_id)
        try:
            lock.acquire()
        except CodexError:
            self._record_busy(record, client_turn_id, text)
            raise
        try:
            work = Path(record.work_dir) if record.work_dir else self.binding.path
            thread = self._open_thread(
                record.session_id,
                work,
                record.upstream_thread_id,
                record.goal_id,
                approval_policy,
            )
        except CodexError as exc:
            self._warm.unreserve(record.session_id)
            lock.release()
            if exc.error_code == "busy":
                raise  # nothing was tried: the session stays as it was
            if exc.error_code == "thread_busy":
                self._record_busy(record, client_turn_id, text)
            self._record_resume_failure(record, exc)
            raise
        except BaseException:
            self._warm.unreserve(record.session_id)
            lock.release()
            raise
        warm = self._warm.add(record.session_id, thread, lock)
        warm.resumed_goal = self._notice_host_loop(record, thread)
        changes: dict[str, Any] = {}
        if record.codex_home is None:
            # A legacy session is bound only now, after its thread was restored here.
            changes["codex_home"] = str(self.binding.path)
        if record.status == SessionStatus.RESUME_FAILED:
            changes.update(status=SessionStatus.READY, last_error_code=None)
        if changes:
            self.store.update(record.session_id, **changes)
        return warm

    def _notice_host_loop(self, record: SessionRecord, thread: CodexThread) -> ResumedGoal | None:
        """Resuming a thread whose goal is `active` restarts codex's own loop at once. When
        no run of ours authorized it (it was set in Codex's own UI, or by a run that is
        gone), say so: a sighting in the goal's records and `host_loop_notices` for the
        caller to show. The host goal is never changed here. What codex answered (None: it
        did not), which a goal run that resumed the thread starts from rather than ask again."""
        try:
            result = thread.proc.request(
                "thread/goal/get", {"threadId": thread.thread_id}, self.config.timeouts.request
            )
        except (RpcError, ProcessGone, TimeoutError):
            return None
        from loopx_chat.codex.goal_loop import HostGoalState  # imports only what a thread has

        goal = result.get("goal")
        resumed = ResumedGoal(HostGoalState.from_wire(goal))
        if not isinstance(goal, dict) or goal.get("status") != "active":
            return resumed
        if self.running_goals.follows_session(record.session_id):
            return resumed  # a run of this process is taking it up
        from loopx_chat.goals.gate_store import GateStore
        from loopx_chat.goals.goal_runs import GoalRuns  # only a thread with an active goal

        runs = GoalRuns(GateStore(self.store.root))
        with contextlib.suppress(LoopxChatError):
            latest = runs.latest(record.goal_id)
            if (
                latest is not None
                and latest.live
                and latest.pid == os.getpid()
                and latest.session_id == record.session_id
            ):
                return resumed  # the run this process follows
            runs.record_host_loop(record.goal_id, record.session_id, record.upstream_thread_id)
        self.host_loop_notices.append(record.session_id)
        return resumed

    def _record_busy(
        self,
        record: SessionRecord,
        client_turn_id: str | None = None,
        text: str | None = None,
    ) -> None:
        """A refused writer. It avoided duplicate compute only when it asked for the very
        turn that runs: the same client_turn_id, or the same message text (its digest) while
        that turn runs. A different request refused is not counted."""
        same_by: str | None = None
        if record.active_turn_id:
            with contextlib.suppress(LoopxChatError):
                running = self.store.load_turn(record.session_id, record.active_turn_id)
                if running.status == TurnStatus.RUNNING:
                    if client_turn_id is not None and running.client_turn_id == client_turn_id:
                        same_by = "client_turn_id"
                    elif text is not None and running.text_digest == message_digest(text):
                        same_by = "text_digest"
        self.control.record(
            "thread_busy_refused",
            goal_id=record.goal_id,
            session_id=record.session_id,
            thread_id=record.upstream_thread_id,
            same_work=same_by is not None,
            same_by=same_by,
        )

    def _refuse_held_for_loop(self, record: SessionRecord, client_turn_id: str | None) -> None:
        """A chat turn on a thread held for codex's own loop (a goal run, or a loop the
        service follows) would wait for the loop to end, which may be never: refuse it now.
        A replay of a turn already on record is still answered by the caller."""
        if client_turn_id is not None and self.store.find_turn_by_client_id(
            record.session_id, client_turn_id
        ):
            return
        goal = record.goal_id
        raise CodexError(
            f"Codex is running goal {goal}'s own loop on session {record.session_id}'s thread",
            error_code="thread_busy",
            remedy=Remedy(
                summary="A goal run, or a loop loopx-chat did not start that this process "
                "follows, holds the thread; a chat turn there would wait for the loop to end.",
                next_action="Pause it (the goal's card; a run also stops with "
                f"`loopx-chat goal stop {goal}`), then send again; or talk to Codex in "
                "another session: "
                f'`loopx-chat chat new --goal {goal} "…"`.',
            ),
        )

    def _record_resume_failure(self, record: SessionRecord, exc: CodexError) -> None:
        if exc.error_code in (
            "thread_busy",
            "host_tool_unavailable",
            "codex_home_missing",
            "work_dir_missing",
        ):
            return  # nothing about the session itself changed
        if exc.error_code == "resume_failed":
            self.store.update(
                record.session_id,
                status=SessionStatus.RESUME_FAILED,
                active_turn_id=None,
                last_error_code="resume_failed",
            )
        else:
            self.store.update(record.session_id, last_error_code=exc.error_code)

    # -- turns --------------------------------------------------------------------------
    def submit_turn(
        self,
        session_id: str,
        text: str,
        client_turn_id: str | None = None,
        on_delta: Callable[[str], None] | None = None,
        on_started: Callable[[TurnRecord], None] | None = None,
        may_start: Callable[[], bool] | None = None,
        on_notice: Callable[[str], None] | None = None,
        settings: TurnSettings | None = None,
    ) -> TurnResult:
        """Run one turn (or steer the running one, or replay a recorded `client_turn_id`).

        `may_start` is asked once, right before anything is sent upstream: a caller that has
        already given up (an HTTP request that timed out) answers False and the turn never
        runs (`turn_not_accepted`). `on_notice` gets what codex says while it retries (one
        line of ours each, `codex.turn_notices`). `settings`: the turn's own sandbox, policy
        and limits (a `chat` command's flags sent to the service); a steer keeps the running
        turn's.
        """
        record = self._load_checked(session_id)  # before any write, spawn or acceptance
        if client_turn_id is not None:
            validate_session_id(client_turn_id)
        if record.session_mode == "attached_host":
            return self.turns.queue_attached(record, client_turn_id)
        warm = self._warm.get(session_id)
        if warm is not None and warm.pinned:
            self._refuse_held_for_loop(record, client_turn_id)
        if warm is not None and warm.running_turn_id is not None:
            # A replay of a finished turn wins over steering the running one; the turns are
            # scanned here only when a turn runs (the locked path below checks every time).
            if client_turn_id is not None and (
                existing := self.store.find_turn_by_client_id(session_id, client_turn_id)
            ):
                return self.turns.replayed(record, existing)
            steered = self._steer(record, warm, text, client_turn_id, may_start)
            if steered is not None:
                return steered
            # The turn ended meanwhile: this is a new turn, run the normal way.
        with self._using(session_id):
            record = self._load_checked(session_id)
            if client_turn_id is not None:
                existing = self.store.find_turn_by_client_id(session_id, client_turn_id)
                if existing is not None:
                    return self.turns.replayed(record, existing)
            warm = self._ensure_warm(record, client_turn_id, text)
            digest = message_digest(text)
            _check_may_start(may_start)
            self.apply_policy(warm.thread, record.goal_id, settings=settings)
            sandbox = (settings and settings.sandbox) or self.config.options.sandbox
            if warm.thread.options.sandbox != sandbox:
                warm.thread.options = replace(warm.thread.options, sandbox=sandbox)
            desk = self.host_requests
            desk.bind(
                warm.thread.thread_id,
                record.session_id,
                record.goal_id,
                settings.decision_timeout if settings else None,
            )
            carried = desk.carries(record.goal_id, record.session_id)
            if carried:
                lines = (f"[loopx-chat] {line}" for _, line in carried)
                text = "\n".join(lines) + "\n\n" + text
            result = self._run_turn(
                session_id,
                warm,
                text,
                client_turn_id,
                on_delta,
                on_started,
                digest,
                on_notice,
                turn_timeouts(self.config.timeouts, settings),
            )
            desk.mark_carried(record.goal_id, carried)  # codex took the turn that says them
            return result

    def _steer(
        self,
        record: SessionRecord,
        warm: Warm,
        text: str,
        client_turn_id: str | None,
        may_start: Callable[[], bool] | None,
    ) -> TurnResult | None:
        """Add `text` to the running turn; None when no turn is running any more."""
        with warm.steer_lock:
            running = warm.running_turn_id
            if running is None:
                return None
            if client_turn_id is not None and client_turn_id in warm.steered_client_ids:
                # A retry of a steer already delivered: nothing is sent again.
                return TurnResult(record, self.store.load_turn(record.session_id, running), False)
            _check_may_start(may_start)
            upstream_id, steered = warm.thread.start_turn(text)
            if not steered:
                # Codex finished the turn just before our message and started a new turn with
                # it, which no one would watch: stop it (without reading the notifications the
                # running turn's loop still needs), and let the caller send again.
                warm.thread.abandon_turn(upstream_id)
                raise CodexError(
                    "the running turn ended just as this message arrived; the new turn it "
                    "started was stopped. Send the message again",
                    error_code="turn_not_active",
                )
            if client_turn_id is not None:
                warm.steered_client_ids.add(client_turn_id)
            turn = self.turns.mark_steered(record.session_id, running)
        return TurnResult(record, turn, created=False)

    def _run_turn(
        self,
        session_id: str,
        warm: Warm,
        text: str,
        client_turn_id: str | None,
        on_delta: Callable[[str], None] | None,
        on_started: Callable[[TurnRecord], None] | None,
        text_digest: str | None = None,
        on_notice: Callable[[str], None] | None = None,
        timeouts: Timeouts | None = None,
    ) -> TurnResult:
        # A stale marker goes before the turn is recorded: once `begin` names this turn as
        # active, another process may write a marker for it, and that one must stay.
        self.turns.interrupt_marker(session_id).unlink(missing_ok=True)
        turn = self.turns.draft(session_id, client_turn_id, text_digest)
        outcome: TurnOutcome | None = None
        try:
            # Inside the `try`: a SIGTERM raises wherever the main thread is, and one that lands
            # while the turn is being recorded must still settle it (`stopped` below).
            # This process runs the turn before the record names it: an interrupt that reads the
            # record the moment `begin` wrote it finds the turn ours, not a dead controller's
            # to settle (it was recorded interrupted while it ran on, seen under load).
            warm.interrupt.clear()
            # The running record is written while codex works on `turn/start` (its writes
            # cost a turn about 1 ms, measured in bench_controller): it is on disk before
            # `start_turn` returns, so everything after sees what it saw before.
            unrecorded: list[Exception] = []

            def record_running() -> None:
                try:
                    self.turns.begin(turn)
                except Exception as exc:  # raised once codex's answer is in, below
                    # (A stop, SIGTERM or Ctrl-C, is not held: it ends the turn at once.)
                    unrecorded.append(exc)

            # Held until codex named the turn: a steer that saw the record `begin` wrote
            # waits for that id, or it would take codex's steer for a new turn and stop it.
            with warm.steer_lock:
                warm.running_turn_id = turn.turn_id
                warm.steered_client_ids.clear()
                try:
                    upstream_id, _ = warm.thread.start_turn(text, after_send=record_running)
                except CodexError as exc:
                    outcome = TurnOutcome("", TurnStatus.FAILED, exc.error_code, TokenCounts())
                    self.turns.finish(turn, outcome)
                    if exc.error_code in (
                        "app_server_exited",
                        "app_server_protocol",
                        "thread_busy",
                    ):
                        self._warm.drop(session_id)
                    raise
            if unrecorded:
                # Not recorded (a full disk): codex must not run a turn nobody follows.
                warm.thread.abandon_turn(upstream_id)
                raise unrecorded[0]
            # Kept in memory until the turn ends: one state write less on the hot path.
            turn = replace(turn, upstream_turn_id=upstream_id)
            if on_started is not None:
                on_started(turn)
            marker = _MarkerWatch(self.turns.interrupt_marker(session_id))
            outcome = warm.thread.wait_turn(
                upstream_id,
                on_delta=on_delta,
                should_interrupt=lambda: warm.interrupt.is_set() or marker.present(),
                on_notice=on_notice,
                timeouts=timeouts,
            )
            # Recorded while the turn still counts as running, so a shutdown that waits for
            # running turns never exits before their outcome is on disk.
            try:
                result = self.turns.finish(turn, outcome)
            except TurnNotRecorded as exc:
                if exc.kept:
                    self.parked.add(session_id)
                raise
        except BaseException:
            if outcome is None:
                # Stopped from outside (SIGTERM, Ctrl-C): the turn is interrupted, not lost.
                self.turns.stopped(turn)
                self._warm.drop(session_id)
            raise
        finally:
            with warm.steer_lock:
                warm.running_turn_id = None
            self.turns.interrupt_marker(session_id).unlink(missing_ok=True)
            if self._host_desk is not None:
                self._host_desk.turn_ended(warm.thread.thread_id)
        if outcome.error_code in ("app_server_exited", "app_server_protocol"):
            self._warm.drop(session_id)
        else:
            self._warm.schedule_idle_close(warm)
        return result

    def _ask_marker(self, session_id: str, turn_id: str) -> None:
        marker = self.turns.interrupt_marker(session_id)
        with state_write(marker):
            atomic_write_bytes(marker, turn_id.encode(), mode=PRIVATE_FILE_MODE)

    def interrupt_turn(self, session_id: str) -> TurnRecord:
        """Ask the controller running this session's turn to interrupt it (any process). A
        goal loop's turn is stopped by its loop's follower: here, through its inbox; in
        another process, by the marker it looks for between inputs
        (`LoopTurns.interrupt_asked`)."""
        record = self._load_checked(session_id)
        if not record.active_turn_id:
            raise CodexError("This session has no active turn", error_code="turn_not_active")
        warm = self._warm.get(session_id)
        if warm is not None and warm.running_turn_id == record.active_turn_id:
            turn = self.store.load_turn(session_id, record.active_turn_id)
            if turn.origin != "goal_loop":
                warm.interrupt.set()
            elif (follower := self.running_goals.on_session(session_id)) is not None:
                follower.ask_interrupt(turn.turn_id)  # never a file its own process reads
            else:
                # No follower of it in the registry (only a CLI command's short follow before
                # it lets a thread go is not there, and no interrupt in its process reaches
                # it): the marker, as from another process.
                self._ask_marker(session_id, turn.turn_id)
            return turn
        follower = self.running_goals.on_session(session_id)
        if follower is not None and follower.ours is not None:
            turn = self.store.load_turn(session_id, record.active_turn_id)
            if turn.run_id == follower.ours.record.run_id and (
                warm is None or warm.running_turn_id is None
            ):
                # A run this process is taking up (a service start's recovery), its process
                # dead in this turn, its thread maybe still loading (the lock probe below
                # would see our own lock as someone else's): the run settles the turn and
                # takes the ask from its inbox.
                follower.ask_interrupt(turn.turn_id)
                return turn
        if warm is not None:
            # We hold the thread and run no turn: the recorded one was left by a controller
            # that died. (The lock probe below would see our own lock as someone else's.)
            self.turns.settle_orphan(session_id)
            return self.store.load_turn(session_id, record.active_turn_id)
        lock = (
            ThreadWriterLock(self.store.root, self.binding.path, record.upstream_thread_id)
            if record.upstream_thread_id
            else None
        )
        if lock is not None and lock.held_elsewhere():
            self._ask_marker(session_id, record.active_turn_id)
            return self.store.load_turn(session_id, record.active_turn_id)
        # Nobody is running it: the controller died mid-turn. Record that, nothing to signal.
        self.turns.settle_orphan(session_id)
        return self.store.load_turn(session_id, record.active_turn_id)

    def interrupt(self, session_id: str) -> dict[str, Any]:
        """`chat interrupt`'s answer, here and in the service: the turn asked to stop, and
        `goal_run`, None unless it is a continuation turn of a goal run, which its run stops
        now and pauses (`run_gates`), or, when the run's process is gone, is paused for it
        here (`run_interrupt`; also when it died between turns and no turn runs, or a resume
        here restarted its loop): then the run as recorded once it ended, waited for
        (bounded), and its last turn, the one it stopped (None when it had none);
        `interrupt_not_acknowledged` when its live process did not say."""
        turn: TurnRecord | None
        try:
            asked = self.interrupt_turn(session_id)
        except CodexError as exc:
            if exc.error_code != "turn_not_active":
                raise
            from loopx_chat.controller.run_interrupt import run_after_interrupt

            turn, run = None, run_after_interrupt(self, session_id, None)
            if run is None:
                raise  # nothing runs, and no run is left for a service start to take up
        else:
            turn, run = asked, None
            if asked.origin == "goal_loop":
                from loopx_chat.controller.run_interrupt import run_after_interrupt

                run = run_after_interrupt(self, session_id, asked)
            if run is None:
                return {"turn": asked.public_dict(), "goal_run": None}  # a chat turn's, or done
        if turn is not None and turn.run_id != run.run_id:
            turn = self.store.load_turn(session_id, turn.turn_id)  # a loop's turn, as it ended
        else:
            # The run's last turn: the one it stopped (the one named may have ended meanwhile).
            done = [t for t in self.store.list_turns(session_id) if t.run_id == run.run_id]
            turn = done[-1] if done else None
        fields = ("goal_id", "run_id", "state", "host_status", "ended_by", "reason")
        return {
            "turn": turn.public_dict() if turn is not None else None,
            "goal_run": {k: getattr(run, k) for k in fields},
        }

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """The thread's turns with their text, read from the host now (never stored).

        A thread this controller holds is read through its own app-server. Any other is read
        by a short-lived app-server that loads no thread, so no writer lock is taken and
        history works while another client drives the thread.
        """
        record = self._load_checked(session_id)
        if record.session_mode == "attached_host" or not record.upstream_thread_id:
            return []
        with self._using(session_id):
            warm = self._warm.get(session_id)
            if warm is not None and warm.thread.alive:
                self._warm.cancel_idle_close(warm)
                return warm.thread.read_history()
            with self._reader(record) as reader:
                turns = reader.read_history(record.upstream_thread_id)
        return self._in_flight_marked(session_id, record.upstream_thread_id, turns)

    @contextlib.contextmanager
    def _reader(self, record: SessionRecord) -> Iterator[ThreadReader]:
        """A registered app-server that loads no thread, closed and unregistered after use."""
        work = Path(record.work_dir) if record.work_dir else self.binding.path
        reader = self._spawn(record.session_id, work, ThreadReader.open)
        try:
            yield reader
        finally:
            reader.close()
            self._registry.unregister(reader.proc.pid)

    def _in_flight_marked(
        self, session_id: str, thread_id: str, turns: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Codex shows a reader the turn another process is running as `interrupted`. When
        our state says a turn of this session is running and one of our app-servers holds the
        thread, the last turn is that one: it is shown as `inProgress`, as its owner sees it.
        (In the moment between our turn record and codex writing the turn, an older
        interrupted last turn would be shown so too.)"""
        if not turns or turns[-1].get("status") != "interrupted":
            return turns
        if not self.store.load(session_id).active_turn_id:
            return turns
        if not any(entry.thread_id == thread_id for entry in self._registry.live()):
            return turns
        return [*turns[:-1], {**turns[-1], "status": "inProgress"}]

    @contextlib.contextmanager
    def thread_metadata(
        self, session_id: str
    ) -> Iterator[Callable[[str, dict[str, Any]], dict[str, Any]]]:
        """Calls about the session's thread (its goal) through an app-server that loads no
        thread: nothing is resumed, so no writer lock is taken and codex never starts a
        goal-continuation turn (resuming a thread whose goal is `active` does, at once).

        Home check first; attached-host sessions have no managed app-server.
        """
        record = self._load_checked(session_id)
        if record.session_mode == "attached_host" or not record.upstream_thread_id:
            raise CodexError(
                "this session has no managed Codex thread to read or write",
                error_code="app_server_rejected",
            )
        thread_id = record.upstream_thread_id
        # No session lock: nothing loaded is touched, so a goal read never waits for a turn.
        with self._reader(record) as reader:
            yield lambda method, params: reader.request(thread_id, method, params)

    # -- lifecycle ----------------------------------------------------------------------
    def warm_pids(self) -> dict[str, int]:
        return self._warm.pids()

    def close(self, grace: float = 5.0) -> None:
        """Interrupt running turns, close every app-server and release thread locks."""
        self._warm.close(grace)
        self.parked.close()
        if self._host_desk is not None:
            self._host_desk.close()

    def __enter__(self) -> ChatController:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_may_start(may_start: Callable[[], bool] | None) -> None:
    if may_start is not None and not may_start():
        raise CodexError(
            "the caller gave up before the turn could start; it did not run",
            error_code="turn_not_accepted",
        )

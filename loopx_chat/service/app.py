"""Routes of the local service, mapped onto one controller. No sockets here.

Owns request validation (loopback Host, JSON content type and loopback Origin on writes,
1 MiB bodies), the JSON shapes of the API, error-to-status mapping, and the background turn
workers that let `POST .../turns` answer once the turn is accepted while
`GET .../events` streams its progress. Responses carry ids, statuses, codes and compact
projections; the only text that ever leaves is the agent's reply on the events stream of the
session that asked for it.
"""

from __future__ import annotations

import json
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from loopx_chat import __version__
from loopx_chat.codex.binary import codex_version
from loopx_chat.codex.rollouts.host_facts import scan_host, scanner_for
from loopx_chat.codex.turn_defaults import TURN_BODY_LIMIT
from loopx_chat.controller.chat_controller import ChatController, TurnResult
from loopx_chat.controller.host_loops import HostLoops
from loopx_chat.controller.run_pool import DEFAULT_MAX_RUNNING, RunPool
from loopx_chat.controller.turn_settings import from_wire
from loopx_chat.errors import LoopxChatError, Outcome, Remedy, StateError, UsageError, spec_for
from loopx_chat.goals.gate_store import (
    DECISIONS,
    GATE_ACTORS,
    HOST_GATE_PREFIX,
    GateStore,
    validate_goal_id,
)
from loopx_chat.goals.gate_store import Gate as GoalGate
from loopx_chat.goals.goal_facts import goal_exists, require_goal
from loopx_chat.goals.goal_ledger import approval_policy_field
from loopx_chat.goals.goal_runs import GoalRuns
from loopx_chat.goals.status import record_displayed, record_owner_view
from loopx_chat.goals.status_index import PageFacts, StatusIndex
from loopx_chat.service import access, host_gates
from loopx_chat.service.access import LOGIN_PATH, SCRIPT_PATH, Access, AccessDecision
from loopx_chat.service.device_auth import (
    DIGEST_HEADER,
    login_url,
    server_proof,
    signed_headers,
    vouches_before_body,
)
from loopx_chat.service.device_registry import DeviceRegistry
from loopx_chat.service.events import EventHub
from loopx_chat.service.logline import log
from loopx_chat.service.page import (
    CSP,
    PAGE_SCRIPT,
    PAGE_SHELL,
    GateView,
    GoalActions,
    render_cards,
    run_view,
)
from loopx_chat.service.public_url import PublicOrigin
from loopx_chat.service.security import (
    content_type_refusal,
    fetch_site_refusal,
    host_refusal,
    origin_refusal,
)
from loopx_chat.service.status_cache import StatusCache
from loopx_chat.state.private_files import state_os_error
from loopx_chat.state.safe_read import JsonRefused, parse_json
from loopx_chat.state.service_runtime import home_identity
from loopx_chat.state.session_records import TurnRecord, validate_session_id
from loopx_chat.valid_text import checked_tree

MAX_BODY = 1 << 20
# A turn of the owner's (over the owner's socket, or signed by one of the owner's devices)
# may carry any message the CLI takes; every other request, and anyone else's, is read up
# to MAX_BODY (decided before the body is read: `ServiceApp.body_limit`).
TURN_BODY_MAX = TURN_BODY_LIMIT
ACCEPT_WAIT_SEC = 60.0
CAPABILITIES_SCHEMA = "loopx_chat_capabilities_v1"
RUNTIME_IDENTITY_SCHEMA = "loopx_runtime_identity_v1"
STATUS_POLL_SEC = 0.5
MAX_STREAMS = 64  # event streams open at once, across every client

# Each outcome kind of `errors.ERRORS` as its HTTP status: the only place a status for an
# error code is decided (a test keeps every kind here, and every literal status below equal).
HTTP_STATUS: Mapping[Outcome, int] = {
    Outcome.INVALID: 400,
    Outcome.UNAUTHORIZED: 401,
    Outcome.FORBIDDEN: 403,
    Outcome.NOT_FOUND: 404,
    Outcome.NOT_ALLOWED: 405,
    Outcome.CONFLICT: 409,
    Outcome.TOO_LARGE: 413,
    Outcome.DEPENDENCY: 424,
    Outcome.INTERNAL: 500,
    # The disk, the folder or a bound is full: nothing the request did wrong; retry later
    # (a full bound's answer says when: RETRY_AFTER_SEC).
    Outcome.UNAVAILABLE: 503,
    Outcome.TIMEOUT: 504,
}
RETRY_AFTER_SEC = {
    "busy": 5,
    "too_many_streams": 5,
    "too_many_running": 30,
    "too_many_login_codes": 60,
}


@dataclass(frozen=True)
class Request:
    method: str  # HEAD arrives as GET
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: str  # the ServiceApp method: (request, access decision, *path groups)


_ID = r"([^/]+)"
_TURN_PATH = re.compile(rf"/api/chat/sessions/{_ID}/turns")
ROUTES: tuple[Route, ...] = tuple(
    Route(method, re.compile(pattern), handler)
    for method, pattern, handler in (
        ("GET", r"/", "_shell"),
        ("GET", re.escape(LOGIN_PATH), "_shell"),
        ("GET", re.escape(SCRIPT_PATH), "_script"),
        ("POST", r"/api/auth/login", "_login_route"),
        ("POST", r"/api/auth/prove", "_prove_route"),
        ("POST", r"/api/auth/codes", "_codes_route"),
        ("POST", r"/api/auth/pair", "_pair_route"),
        ("GET", r"/api/page", "_page_data"),
        ("GET", r"/status\.json", "_status_json"),
        ("GET", r"/api/status/events", "_status_events_route"),
        ("POST", r"/api/status/rendered", "_rendered_route"),
        ("POST", rf"/api/goals/{_ID}/gates", "_open_gate_route"),
        ("POST", rf"/api/goals/{_ID}/gates/{_ID}/decision", "_decide_route"),
        ("POST", rf"/api/goals/{_ID}/run", "_run_route"),
        ("POST", rf"/api/goals/{_ID}/pause", "_pause_route"),
        ("GET", rf"/api/goals/{_ID}/run", "_run_state_route"),
        ("GET", rf"/api/goals/{_ID}/contract", "_contract_route"),
        ("POST", rf"/api/goals/{_ID}/accept", "_accept_route"),
        ("POST", rf"/api/goals/{_ID}/reopen", "_reopen_route"),
        ("GET", r"/api/chat/capabilities", "_capabilities"),
        ("GET", r"/api/chat/sessions", "_list_sessions"),
        ("POST", r"/api/chat/sessions", "_open_route"),
        ("GET", rf"/api/chat/sessions/{_ID}", "_session"),
        ("POST", rf"/api/chat/sessions/{_ID}/resume", "_resume"),
        ("POST", rf"/api/chat/sessions/{_ID}/turns", "_turns"),
        ("POST", rf"/api/chat/sessions/{_ID}/interrupt", "_interrupt"),
        ("GET", rf"/api/chat/sessions/{_ID}/events", "_session_events"),
    )
)

# What a device paired without `--full` may not reach: everything that starts work (a chat
# session or turn, a thread's resume, a run or a reopened run). Reading the cards, deciding
# gates and Codex's requests, holding (a gate), pausing and accepting stay open to it.
FULL_ONLY: frozenset[str] = frozenset(
    {"_open_route", "_resume", "_turns", "_run_route", "_reopen_route"}
)

UNAUTHORIZED_PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>loopx-chat: owner only</title></head>
<body><h1>This page belongs to the user who runs loopx-chat</h1>
<p>Only its owner can open it. In the owner's terminal, run <code>loopx-chat open</code>:
it signs this browser in with a one-time code.</p></body></html>
"""


def body_limit_words(limit: int) -> str:
    return f"request bodies are limited to {limit >> 20} MiB"


def http_status(code: str) -> int:
    """The HTTP status of an error code, from its outcome in `errors.ERRORS`."""
    return HTTP_STATUS[spec_for(code).outcome]


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    stream: Iterator[bytes] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    authenticated: bool = False  # the owner sent the request this answers


def json_response(status: int, doc: Mapping[str, Any]) -> Response:
    return Response(status, (json.dumps(doc, sort_keys=True) + "\n").encode())


def error_response(status: int, code: str, message: str, gate: Any = None) -> Response:
    return json_response(status, {"ok": False, "error": message, "error_code": code, "gate": gate})


# An absolute or home-relative path inside an error message: the CLI shows them (the user is
# at their own terminal), the service does not (its answers reach a browser).
_LOCAL_PATH = re.compile(r"(?<![\w.:/-])~?/[^\s'\"`]*[^\s'\"`.,;:)]")


def without_paths(text: str) -> str:
    return _LOCAL_PATH.sub("<path>", text)


def _without_paths_in_problems(doc: dict[str, Any]) -> dict[str, Any]:
    """A problem row's message names a local file: the service shows it without paths."""
    queue = doc["attention_queue"]
    for n, goal in enumerate(queue):
        if goal.get("status") == "problem":  # a copy: the index keeps the row as folded
            queue[n] = {
                **goal,
                "error": without_paths(goal["error"]),
                "answers": {k: without_paths(v) for k, v in goal["answers"].items()},
            }
    return doc


def error_doc(exc: LoopxChatError, *, redact: bool = True) -> dict[str, Any]:
    """An error as the API shows it: local paths cut, except for the owner's own CLI, which
    prints the message the direct path would print in the same terminal."""
    doc = exc.to_dict()
    if redact:
        doc["error"] = without_paths(exc.message)
        if isinstance(doc["gate"], dict):
            doc["gate"] = {
                k: without_paths(v) if isinstance(v, str) else v for k, v in doc["gate"].items()
            }
    return doc


def from_error(exc: LoopxChatError, *, redact: bool = True) -> Response:
    doc = error_doc(exc, redact=redact)
    response = error_response(
        http_status(exc.error_code), exc.error_code, doc["error"], doc["gate"]
    )
    retry = RETRY_AFTER_SEC.get(exc.error_code)
    if retry is not None:
        response = replace(response, headers=(*response.headers, ("Retry-After", str(retry))))
    return response


def unauthorized(headers: Mapping[str, str], path: str) -> Response:
    """401 for a request without the owner's secret: a page saying how to get in for a
    browser, a JSON error for a program. Neither names a goal, a session or the secret."""
    challenge = (("WWW-Authenticate", 'Bearer realm="loopx-chat"'), ("Cache-Control", "no-store"))
    if access.wants_html(headers, path):
        return Response(401, UNAUTHORIZED_PAGE, "text/html; charset=utf-8", headers=challenge)
    response = error_response(
        401,
        "unauthorized",
        "this service answers its owner only: send the secret from the state dir as "
        "`Authorization: Bearer ...`, or open the page with `loopx-chat open`",
    )
    return replace(response, headers=challenge)


WORK_DIR_LIMIT = 4096


def checked_work_dir(value: object) -> Path:
    """A `work_dir` from a request as a path, or `usage_error` saying what is wrong with it."""
    if not isinstance(value, str):
        raise UsageError("work_dir must be a string")
    if len(value) > WORK_DIR_LIMIT:
        raise UsageError(f"work_dir is longer than {WORK_DIR_LIMIT} characters")
    if "\0" in value:
        raise UsageError("work_dir must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("work_dir is not valid Unicode (a lone surrogate)") from None
    try:
        path = Path(value).expanduser()
    except RuntimeError:
        raise UsageError("work_dir names a home folder of an unknown user") from None
    if str(path).startswith("~"):
        raise UsageError("work_dir names a home folder of an unknown user")
    return path


@dataclass
class _Worker:
    """What a turn's worker (the OS thread that runs it) reports back to the request."""

    accepted: threading.Event = field(default_factory=threading.Event)
    # Set when the worker is done with the turn: its result or error is final.
    finished: threading.Event = field(default_factory=threading.Event)
    result: TurnResult | None = None
    error: LoopxChatError | None = None
    turn: TurnRecord | None = None
    # Exactly one of these happens: the controller starts the turn, or the request gives up
    # (504) and the turn never runs. Decided under `lock`.
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: bool = False
    abandoned: bool = False
    host_loop: bool = False  # codex runs a loop we did not start on this thread (said at the end)

    def may_start(self) -> bool:
        with self.lock:
            if not self.abandoned:
                self.started = True
            return self.started

    def give_up(self) -> bool:
        """True when the turn had not started and now never will."""
        with self.lock:
            if not self.started and self.result is None and self.error is None:
                self.abandoned = True
            return self.abandoned


class ServiceApp:
    def __init__(
        self,
        controller: ChatController,
        goals: GateStore,
        *,
        port: int,
        work_dir: Path,
        secret: str,
        max_streams: int = MAX_STREAMS,
        max_running: int = DEFAULT_MAX_RUNNING,
        state_dir: Path | None = None,
        public: PublicOrigin | None = None,
    ) -> None:
        if len(secret) < 43:
            raise ValueError("the owner secret must carry at least 32 random bytes")
        self.secret = secret
        self._streams = threading.BoundedSemaphore(max_streams)
        self.controller = controller
        self.goals = goals
        # Goal runs this service follows: each keeps its thread loaded while the goal runs.
        self.runs = RunPool(controller, goals, max_running=max_running)
        # Loops loopx-chat did not start on threads this service loaded: their turns are
        # recorded while it holds them, and the owner may Pause them.
        self.host_loops = HostLoops(controller, goals)
        self.port = port
        # The origin the owner's reverse proxy serves (`--public-url`), accepted besides
        # loopback by the Host and Origin checks; None: loopback only.
        self.public = public
        self.work_dir = work_dir
        self.hub = EventHub()
        self._codex: dict[str, Any] | None = None
        controller.record_start()
        self._scanner = scanner_for(controller.store.root, controller.codex_home)
        self._scan_lock = threading.Lock()  # one scanner, one scan at a time
        # Each goal's row is folded again only when its files change (goals/status_index.py).
        self._status_cache = StatusCache(
            StatusIndex(controller.store, goals, str(controller.codex_home)),
            self._host_threads,
            _without_paths_in_problems,
        )
        # The cards' HTML for the last (status, actions) pair: a look with nothing changed
        # renders nothing.
        self._cards_memo: tuple[object, Any, str] | None = None
        self._actions_memo: dict[str, tuple[object, tuple[str, ...], GoalActions]] = {}
        # The page's streams wake at once on a change made in this process (a host request
        # codex sent, a write through this service); another process's write still shows on
        # the next poll.
        self._changed = threading.Condition()
        self._generation = 0
        controller.host_requests.listeners.append(lambda _live: self.state_changed())
        # The owner's browsers and devices: each signs its requests with its own key.
        self.devices = DeviceRegistry(state_dir or goals.root)
        # Notes per goal for its card (a notice that could not be sent); set by `serve`.
        self.card_notes: Callable[[], Mapping[str, tuple[str, ...]]] = dict

    # -- entry ---------------------------------------------------------------------------
    def handle(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        owner_channel: bool = False,
    ) -> Response:
        """One request's response; `authenticated` on it says whether the owner sent it
        (the server gives an unauthenticated connection a small share and a short life).
        `owner_channel`: it came over the owner's Unix socket, whose peer uid was checked."""
        if not owner_channel:
            refusal = host_refusal(headers.get("host"), self.port, self.public)
            if refusal:
                return error_response(403, "forbidden_host", refusal)
        path, _, query = path.partition("?")
        decision = access.decide(
            method,
            path,
            query,
            headers,
            self.secret,
            body=body,
            owner_channel=owner_channel,
            devices=self.devices.lookup,
            nonces=self.devices.nonces,
            now_ms=int(time.time() * 1000),
            run_id=self.devices.run_id,
        )
        if decision.access is Access.HEALTH:
            return json_response(200, {"ok": True})
        if decision.access is Access.REFUSED:
            return unauthorized(headers, path)
        response = self._handle(method, path, query, headers, body, decision)
        if decision.device_id is not None:
            self.devices.seen(decision.device_id)
        return replace(response, authenticated=decision.authenticated)

    def _handle(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
        decision: AccessDecision,
    ) -> Response:
        # The shell may be reached from anywhere (`open`'s file, a notice's link): it holds
        # no data, and nothing it serves counts as the owner having seen anything.
        shell = decision.access is Access.PUBLIC and method in ("GET", "HEAD")
        refusal = None if shell else fetch_site_refusal(headers.get("sec-fetch-site"))
        if refusal:
            return error_response(403, "forbidden_request", refusal)
        writes = method not in ("GET", "HEAD")
        if writes:
            refusal = origin_refusal(
                headers.get("origin"), self.port, self.public
            ) or content_type_refusal(headers.get("content-type"))
            if refusal:
                return error_response(403, "forbidden_request", refusal)
        turn = method == "POST" and _TURN_PATH.fullmatch(path) is not None
        limit = TURN_BODY_MAX if turn and decision.access is Access.OWNER else MAX_BODY
        if len(body) > limit:
            return error_response(413, "body_too_large", body_limit_words(limit))
        try:
            # No CSRF token: nothing rides along with a cross-site request any more (no
            # cookie), and a device's signature can only be made by script of this origin.
            # HEAD is GET without the body (the server drops it).
            request = Request("GET" if method == "HEAD" else method, path, query, headers, body)
            return self._route(request, decision)
        except LoopxChatError as exc:
            return from_error(exc, redact=decision.surface != "cli")
        except OSError as exc:  # a state failure nobody below mapped: still a known condition
            return from_error(
                state_os_error(exc, exc.filename or "the state dir", writing=False),
                redact=decision.surface != "cli",
            )
        finally:
            if writes:
                # A client reads its own writes: the next status read looks at the disk again,
                # and the open pages look now.
                self.state_changed()

    def body_limit(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        *,
        owner_channel: bool = False,
    ) -> int:
        """The largest body this request may have, decided from the request line and headers
        before a byte of the body is read: a turn the owner sends (over the owner's socket,
        or signed by one of the owner's devices that declares its body's digest) may carry
        any message the CLI takes (`TURN_BODY_MAX`); everything else, and everyone else's,
        `MAX_BODY`."""
        path = target.partition("?")[0]
        if method != "POST" or _TURN_PATH.fullmatch(path) is None:
            return MAX_BODY
        return (
            TURN_BODY_MAX
            if owner_channel or self._signed_before_body(method, target, headers)
            else MAX_BODY
        )

    def _signed_before_body(self, method: str, target: str, headers: Mapping[str, str]) -> bool:
        signed = signed_headers(headers)
        digest = (headers.get(DIGEST_HEADER) or "").strip()
        if signed is None or not digest or len(digest) > 64:
            return False
        found = self.devices.lookup(signed.device_id)
        if found is None:
            return False
        return vouches_before_body(
            signed,
            found[0],
            method,
            target,
            digest,
            int(time.time() * 1000),
            self.devices.nonces,
            self.devices.run_id,
        )

    def _route(self, request: Request, decision: AccessDecision) -> Response:
        allowed: list[str] = []
        for route in ROUTES:
            match = route.pattern.fullmatch(request.path)
            if match is None:
                continue
            if route.method != request.method:
                allowed.append(route.method)
                continue
            if route.handler in FULL_ONLY:
                self._require_full(decision)
            return getattr(self, route.handler)(request, decision, *match.groups())
        if allowed:
            return error_response(
                405, "method_not_allowed", f"{request.method} is not allowed here"
            )
        return error_response(404, "not_found", "no such endpoint")

    def _full(self, decision: AccessDecision) -> bool:
        device = self.devices.device(decision.device_id)
        return device is None or device.full

    def _require_full(self, decision: AccessDecision) -> None:
        """A device paired without `--full` decides, holds and pauses; it starts nothing."""
        device = self.devices.device(decision.device_id)
        if device is not None and not device.full:
            raise UsageError(
                f"the device {device.name} may decide, hold and pause, but not start chat "
                "turns, runs or writebacks",
                error_code="device_not_full",
                remedy=Remedy(
                    summary="It was paired without --full (least privilege).",
                    next_action="Start it at the machine, or pair the device again with "
                    "`loopx-chat pair --full`.",
                ),
            )

    # -- routes ------------------------------------------------------------------------------
    def _shell(self, request: Request, decision: AccessDecision) -> Response:
        """The page without data: its script signs in (a one-time code in the fragment) or
        proves the service and loads the cards through signed calls."""
        return Response(
            200,
            PAGE_SHELL,
            "text/html; charset=utf-8",
            headers=(
                ("Content-Security-Policy", CSP),
                ("X-Frame-Options", "DENY"),
                ("Cache-Control", "no-store"),
            ),
        )

    def _script(self, request: Request, decision: AccessDecision) -> Response:
        return Response(
            200,
            PAGE_SCRIPT.encode(),
            "text/javascript; charset=utf-8",
            headers=(("Content-Security-Policy", CSP), ("Cache-Control", "no-store")),
        )

    def _status_json(self, request: Request, decision: AccessDecision) -> Response:
        status, body_bytes = self._status_cache.get()
        if "viewer=owner" in request.query.split("&"):
            record_owner_view(self.goals, status, "api_owner")
        return Response(200, body_bytes)

    def _capabilities(self, request: Request, decision: AccessDecision) -> Response:
        return json_response(200, self.capabilities())

    def _list_sessions(self, request: Request, decision: AccessDecision) -> Response:
        listing = self.controller.store.list()
        return json_response(
            200,
            {
                "ok": True,
                "sessions": [s.public_dict() for s in listing.sessions],
                "problems": [
                    {k: without_paths(v) for k, v in p.to_dict().items()} for p in listing.problems
                ],
            },
        )

    def _session(self, request: Request, decision: AccessDecision, session_id: str) -> Response:
        session_id = validate_session_id(session_id)
        record = self.controller.store.load(session_id)
        turns = self.controller.store.list_turns(session_id)
        return json_response(
            200,
            {
                "ok": True,
                "session": record.public_dict(),
                "turns": [t.public_dict() for t in turns],
            },
        )

    def _resume(self, request: Request, decision: AccessDecision, session_id: str) -> Response:
        session_id = validate_session_id(session_id)
        try:
            record = self.controller.resume_session(session_id)
        finally:
            self.host_loops.take_up()  # a resume restarts an `active` goal's loop at once
        return json_response(
            200, {"ok": True, "session": record.public_dict(), **self._loop_seen(session_id)}
        )

    def _loop_seen(self, session_id: str) -> dict[str, Any]:
        """`host_loop: true` when codex runs a loop loopx-chat did not start on the session's
        thread, so a delegated command says so as the direct one does."""
        followed = self.controller.running_goals.follows_session(session_id, foreign=True)
        return {"host_loop": True} if followed else {}

    def _interrupt(self, request: Request, decision: AccessDecision, session_id: str) -> Response:
        session_id = validate_session_id(session_id)
        done = self.controller.interrupt(session_id)
        return json_response(200, {"ok": True, "session_id": session_id, **done})

    def _turns(self, request: Request, decision: AccessDecision, session_id: str) -> Response:
        session_id = validate_session_id(session_id)
        redact = decision.surface != "cli"
        if "text/event-stream" in (request.headers.get("accept") or ""):
            return self._submit_streaming(session_id, self._json(request.body), redact=redact)
        return self._submit(session_id, self._json(request.body), redact=redact)

    def _session_events(
        self, request: Request, decision: AccessDecision, session_id: str
    ) -> Response:
        return self._events(validate_session_id(session_id), decision.device_id)

    def _open_route(self, request: Request, decision: AccessDecision) -> Response:
        return self._open(self._json(request.body))

    def _rendered_route(self, request: Request, decision: AccessDecision) -> Response:
        if decision.surface != "page":
            # The sixth metric's clock stops when a person's browser shows the blocker; a
            # program saying so would forge it.
            raise UsageError(
                "only the owner's page reports what it rendered",
                error_code="forbidden_request",
            )
        return self._rendered(self._json(request.body))

    def _decide_route(
        self, request: Request, decision: AccessDecision, goal_id: str, gate_id: str
    ) -> Response:
        return self._decide(
            goal_id, gate_id, self._json(request.body), actor=decision.actor or "owner-api"
        )

    def _open_gate_route(
        self, request: Request, decision: AccessDecision, goal_id: str
    ) -> Response:
        """Open an owner gate, as `gate request` does: a goal this service runs is set
        `blocked` (a turn started since interrupted) before this answers."""
        doc = self._json(request.body)
        question = doc.get("question")
        if not isinstance(question, str) or not question.strip():
            raise UsageError("question (what the person must decide) is required")
        actor = doc.get("actor", "owner" if decision.surface == "page" else "operator")
        if not isinstance(actor, str):
            raise UsageError(f"actor must be one of {', '.join(GATE_ACTORS)}")
        blocking = doc.get("blocking", True)
        if not isinstance(blocking, bool):
            raise UsageError("blocking must be true or false")
        gid = self._goal_of(
            goal_id,
            doc,
            "A gate is opened on a goal that exists.",
            'Start the goal first, or send "create_goal": true (`loopx-chat gate request` does).',
        )
        gate = self.goals.request_gate(gid, question, actor=actor, blocking=blocking)
        block = self.controller.running_goals.after_gate(self.goals, gate)
        self._status_cache.invalidate()
        status, _ = self._status_cache.get()
        return json_response(
            201, {**self._cards_event(status), "gate": gate.to_dict(), **block.to_dict()}
        )

    def _run_route(self, request: Request, decision: AccessDecision, goal_id: str) -> Response:
        """Run: let Codex work on the goal on its own loop, under the owner's authority."""
        doc = self._json(request.body)
        budget = doc.get("token_budget")
        if budget is not None and (
            not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0
        ):
            raise UsageError("token_budget must be a positive integer", error_code="usage_error")
        session_id = doc.get("session_id")
        if session_id is not None:
            session_id = validate_session_id(session_id)
        approval = approval_policy_field(doc.get("approval"))  # `approval_policy_unknown`
        plan_mode = doc.get("plan", False)
        if not isinstance(plan_mode, bool):
            raise UsageError("plan must be true or false", error_code="input_invalid")
        max_turns = doc.get("max_turns")
        if max_turns is not None and (
            not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns <= 0
        ):
            raise UsageError("max_turns must be a positive integer", error_code="usage_error")
        resume = doc.get("resume_after_usage_limit")
        if resume is not None and not isinstance(resume, bool):
            raise UsageError(
                "resume_after_usage_limit must be true or false", error_code="input_invalid"
            )
        gid = validate_goal_id(goal_id)
        if not goal_exists(self.controller.store, self.goals, gid):
            raise StateError(f"no goal {gid}", error_code="goal_not_found")
        # A loop loopx-chat did not start, followed here, is adopted: the run follows it.
        adopted = self.host_loops.let_go(gid)
        try:
            run = self.runs.start(
                gid,
                session_id=session_id,
                token_budget=budget,
                actor=decision.actor or "owner-api",
                surface="page" if decision.surface == "page" else "api",
                approval_policy=approval,
                plan_mode=plan_mode,
                max_turns=max_turns,
                resume_after_usage_limit=resume,
            )
        except BaseException:  # refused or failed: the adopted loop is followed again
            if adopted is not None:
                self.host_loops.follow_again(adopted)
            raise
        self._status_cache.invalidate()
        status, _ = self._status_cache.get()
        return json_response(202, {**self._cards_event(status), "run": run.to_dict()})

    def _accept_route(self, request: Request, decision: AccessDecision, goal_id: str) -> Response:
        """Accept the run Codex says is done: a human_reward on its last turn; run closed."""
        reason = self._json(request.body).get("reason")
        if reason is not None and not isinstance(reason, str):
            raise UsageError("reason must be a string", error_code="usage_error")
        run = self.runs.runner.accept(validate_goal_id(goal_id), reason or None, actor="owner")
        self._status_cache.invalidate()
        status, _ = self._status_cache.get()
        return json_response(200, {**self._cards_event(status), "run": run.to_dict()})

    def _reopen_route(self, request: Request, decision: AccessDecision, goal_id: str) -> Response:
        """Reopen it: active again, with the owner's note as the next objective."""
        note = self._json(request.body).get("note")
        if not isinstance(note, str) or not note.strip():
            raise UsageError("note (what is still missing) is required", error_code="usage_error")
        run = self.runs.start(
            validate_goal_id(goal_id),
            actor=decision.actor or "owner-api",
            surface="page" if decision.surface == "page" else "api",
            reopen_note=note,
        )
        self._status_cache.invalidate()
        status, _ = self._status_cache.get()
        return json_response(202, {**self._cards_event(status), "run": run.to_dict()})

    def _pause_route(self, request: Request, decision: AccessDecision, goal_id: str) -> Response:
        """Pause: the host goal is set paused; its running turn finishes and is recorded.
        A loop loopx-chat did not start is paused the same way, on the owner's record."""
        gid = validate_goal_id(goal_id)
        try:
            result: dict[str, Any] = {"run": self.runs.pause(gid).to_dict()}
        except StateError as exc:
            if exc.error_code != "run_not_found":
                raise
            paused = self.host_loops.pause(gid, actor=decision.actor or "owner-api")
            result = {"host_loop": {k: paused[k] for k in ("actor", "at", "host_status")}}
        self._status_cache.invalidate()
        status, _ = self._status_cache.get()
        return json_response(200, {**self._cards_event(status), **result})

    def _run_state_route(
        self, request: Request, decision: AccessDecision, goal_id: str
    ) -> Response:
        run = GoalRuns(self.goals).latest(validate_goal_id(goal_id))
        if run is None:
            raise StateError(f"goal {goal_id} has no run", error_code="run_not_found")
        running = self.runs.running().get(goal_id) == run.run_id
        return json_response(200, {"ok": True, "run": run.to_dict(), "running_here": running})

    def _contract_route(self, request: Request, decision: AccessDecision, goal_id: str) -> Response:
        """The goal's public read-only contract (session_runtime_readonly_projection_v0)."""
        from loopx_chat.goals.contract_view import collect_contracts

        (contract,) = collect_contracts(
            self.controller.store, self.goals, str(self.controller.codex_home), goal_id
        )
        return json_response(200, contract)

    def _status_events_route(self, request: Request, decision: AccessDecision) -> Response:
        return self._status_events(decision.device_id)

    # -- the first screen ----------------------------------------------------------------
    def status_snapshot(self) -> tuple[dict[str, Any], bytes]:
        """The status document and its bytes, as the page and /status.json see it now."""
        return self._status_cache.get()

    def page_actions(self, status: Mapping[str, Any]) -> dict[str, GoalActions]:
        """Gates, the next handoff and advisory proposals of each goal on the page, from
        the facts folded with its row (nothing is read again); a goal whose entry, notes
        and run did not move and that holds no host gate keeps its previous actions."""
        entries = self._status_cache.index.entries
        actions: dict[str, GoalActions] = {}
        memo: dict[str, tuple[object, tuple[str, ...], GoalActions]] = {}
        notes = self.card_notes()
        running = self.runs.running()
        for row in status.get("attention_queue", []):
            goal_id = str(row.get("goal_id"))
            blockers = tuple(str(r) for r in row.get("shown_blocker_refs", ()))
            entry = entries.get(goal_id)
            page = entry.page if entry is not None else None
            if row.get("status") == "problem" or page is None:
                actions[goal_id] = GoalActions(blockers=blockers)
                continue
            goal_notes = tuple(notes.get(goal_id, ()))
            previous = self._actions_memo.get(goal_id)
            live = goal_id in running or any(g.host is not None for g in page.gates)
            if (
                previous is not None
                and previous[0] is entry
                and previous[1] == goal_notes
                and not live
            ):
                actions[goal_id] = previous[2]
                memo[goal_id] = previous
                continue
            actions[goal_id] = self._goal_actions(goal_id, page, blockers, goal_notes, running)
            if not live:  # a running goal's or a host gate's card is built on every look
                memo[goal_id] = (entry, goal_notes, actions[goal_id])
        self._actions_memo = memo
        return actions

    def _goal_actions(
        self,
        goal_id: str,
        page: PageFacts,
        blockers: tuple[str, ...],
        notes: tuple[str, ...],
        running: Mapping[str, str],
    ) -> GoalActions:
        run = page.run
        seen = page.host_loop_seen
        # A stopped run's card says what it spent too (its budget bar, Done): every run's turns.
        turns = (
            [t for t in self.controller.store.list_turns(run.session_id) if t.run_id == run.run_id]
            if run is not None
            else []
        )
        return GoalActions(
            gates=tuple(
                GateView(
                    gate_id=g.gate_id,
                    question=g.question,
                    blocking=g.blocking,
                    status=g.status,
                    created_at=g.created_at,
                    decision=g.decision,
                    reason=g.reason,
                    updated_at=g.updated_at,
                    html=None if g.host is None else self._host_gate_html(goal_id, g),
                )
                for g in page.gates
            ),
            next_action=page.next_action,
            proposals=page.proposals,
            blockers=blockers,
            notes=notes,
            run=run_view(
                run,
                goal_id in running,
                len(turns),
                sum(t.tokens.total_tokens for t in turns),
                host_loop_seen_at=str(seen["at"]) if seen else None,
                host_loop_paused=page.host_loop_paused,
            ),
        )

    def _host_gate_html(self, goal_id: str, gate: GoalGate) -> str:
        live = self.controller.host_requests.live(gate.gate_id)
        return host_gates.render_host_gate(goal_id, gate, live.details if live else None)

    def _cards_event(self, status: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "type": "cards",
            "ok": True,
            "generated_at": _clock(),
            "cards_html": self._cards(status),
            "goal_count": len(status.get("attention_queue", [])),
            # Finished goals step aside: counted in the header, never rendered as cards.
            "archived_count": int((status.get("archive") or {}).get("count") or 0),
        }

    def _cards(self, status: Mapping[str, Any]) -> str:
        """The cards' HTML, rendered again only when the status or an action moved."""
        actions = self.page_actions(status)
        memo = self._cards_memo
        if memo is not None and memo[0] is status and memo[1] == actions:
            return memo[2]
        html = render_cards(status, actions)
        self._cards_memo = (status, actions, html)
        return html

    def _status_events(self, device_id: str | None = None) -> Response:
        """Server-sent `cards` events: the page's cards again whenever the status changed
        (any process's write shows within about half a second). A device's stream ends
        within that half second once the device is revoked."""

        def stream() -> Iterator[bytes]:
            last: bytes | None = None
            sent_at = time.monotonic()
            while device_id is None or self.devices.active(device_id):
                seen = self._generation
                status, raw = self._status_cache.get()
                if raw != last:
                    last = raw
                    sent_at = time.monotonic()
                    yield _sse(self._cards_event(status))
                elif time.monotonic() - sent_at >= 15:
                    sent_at = time.monotonic()
                    yield b": keepalive\n\n"
                with self._changed:
                    self._changed.wait_for(partial(self._moved_on, seen), STATUS_POLL_SEC)

        return self._event_stream(stream())

    def _moved_on(self, seen: int) -> bool:
        """Whether the page's state changed since generation `seen` (under `_changed`)."""
        return self._generation != seen

    def state_changed(self) -> None:
        """Something this process did changed what the page shows: look again now."""
        self._status_cache.invalidate()
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def _event_stream(self, events: Iterator[bytes], on_close: Any = None) -> Response:
        """An SSE response that holds one of the service's `max_streams` places until it ends
        or its client goes; none left is `503 too_many_streams`, and nothing is subscribed."""
        if not self._streams.acquire(blocking=False):
            if on_close is not None:
                on_close()
            raise LoopxChatError(
                "too many event streams are open on this service; close a page and retry",
                error_code="too_many_streams",
            )
        return Response(
            200,
            content_type="text/event-stream",
            stream=HeldStream(events, self._streams.release, on_close),
            headers=(("Cache-Control", "no-store"),),
        )

    # -- the owner's devices --------------------------------------------------------------
    def _page_data(self, request: Request, decision: AccessDecision) -> Response:
        """What the shell shows: the header's words and the cards."""
        status, _ = self._status_cache.get()
        return json_response(
            200,
            {
                **self._cards_event(status),
                "codex_home_source": self.controller.binding.source,
                "version": __version__,
                "device": decision.device,
                # A device paired without --full: the page leaves out what it may not start.
                "full": self._full(decision),
                # The desk's browser (`open`, full): the page offers "Pair a phone".
                "may_pair": self._may_pair(decision),
            },
        )

    def _may_pair(self, decision: AccessDecision) -> bool:
        device = self.devices.device(decision.device_id)
        return device is not None and device.may_pair

    def _codes_route(self, request: Request, decision: AccessDecision) -> Response:
        """A one-time login code, for the owner's CLI (`open`, `pair`) or a program."""
        if decision.surface == "page":
            raise UsageError(
                "a signed-in browser cannot make login codes; run `loopx-chat open`",
                error_code="forbidden_request",
            )
        doc = self._json(request.body) if request.body else {}
        name, full, desk = doc.get("name"), doc.get("full", True), doc.get("desk", False)
        if not isinstance(desk, bool):
            raise UsageError("desk must be a boolean")
        code, expires = self.devices.issue_code(self._grant_name(name, full), full=full, desk=desk)
        return json_response(
            200,
            {
                "ok": True,
                "code": code,
                "expires_in_sec": int(expires - time.time()),
                "public_url": self.public.base_url if self.public else None,
            },
        )

    @staticmethod
    def _grant_name(name: object, full: object) -> str | None:
        if (name is not None and not isinstance(name, str)) or not isinstance(full, bool):
            raise UsageError("name must be a string and full a boolean")
        return name

    def _pair_route(self, request: Request, decision: AccessDecision) -> Response:
        """ "Pair a phone" on the desk's page: a pairing code minted as `pair` mints it
        (`DeviceRegistry.issue_code`, the same live-code limit), shown as a QR code drawn by
        the CLI's encoder, the URL, the name and the expiry. Only the browser `open` signed
        in at the machine, with full rights, may ask; a paired device (a phone) or one
        without --full may not mint a way in for another. The answer is never cached, logged
        or kept: it leaves in this response only."""
        device = self.devices.device(decision.device_id)
        if device is None or not device.may_pair:
            raise UsageError(
                "only the browser signed in at the machine (`loopx-chat open`) may pair "
                "another device",
                error_code="pairing_not_allowed",
                remedy=Remedy(
                    summary="A paired device cannot let others in (least privilege).",
                    next_action="At the machine, run `loopx-chat pair` or use `Pair a phone` "
                    "on the page `loopx-chat open` opens.",
                ),
            )
        from loopx_chat.service.pairing_qr import qr_svg

        doc = self._json(request.body) if request.body else {}
        name, full = doc.get("name") or None, doc.get("full", False)
        code, expires = self.devices.issue_code(self._grant_name(name, full), full=full)
        base = self.public.base_url if self.public else f"http://127.0.0.1:{self.port}"
        url = login_url(base, code)
        response = json_response(
            200,
            {
                "ok": True,
                "url": url,
                "name": name,
                "full": full,
                "expires_in_sec": int(expires - time.time()),
                "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
                "qr_svg": qr_svg(url),
            },
        )
        return replace(response, headers=(("Cache-Control", "no-store"),))

    def _login_route(self, request: Request, decision: AccessDecision) -> Response:
        """A one-time code becomes this browser's own device key (once; never again)."""
        doc = self._json(request.body)
        device = self.devices.redeem(doc.get("code"))
        if device is None:
            raise LoopxChatError(
                "this sign-in link is used, expired or wrong; run `loopx-chat open` again",
                error_code="login_code_invalid",
            )
        log(f"signed in a new device: {device.name}")
        return json_response(
            200,
            {"ok": True, "device_id": device.device_id, "name": device.name, "key": device.key},
        )

    def _prove_route(self, request: Request, decision: AccessDecision) -> Response:
        """The service shows it holds the device's key before the page signs anything."""
        doc = self._json(request.body)
        device_id, challenge = doc.get("device_id"), doc.get("challenge")
        found = self.devices.lookup(device_id) if isinstance(device_id, str) else None
        if found is None or not isinstance(challenge, str) or not 16 <= len(challenge) <= 128:
            raise LoopxChatError(
                "this browser's sign-in is not known here (revoked, or another service); "
                "run `loopx-chat open`",
                error_code="login_code_invalid",
            )
        return json_response(
            200,
            {
                "ok": True,
                "proof": server_proof(found[0], challenge, self.devices.run_id),
                "run_id": self.devices.run_id,
                "server_time_ms": int(time.time() * 1000),
            },
        )

    def _decide(
        self, goal_id: str, gate_id: str, doc: Mapping[str, Any], *, actor: str
    ) -> Response:
        """A gate decision from the page or a program, recorded as `gate resolve` records it,
        with who made it (`owner-page`, `owner-api`, `owner-cli`)."""
        gid = require_goal(self.controller.store, self.goals, goal_id)
        if gate_id.startswith(HOST_GATE_PREFIX):
            # What codex asked: answered to the live request when this service holds it.
            gate = host_gates.decide(self.controller.host_requests, gid, gate_id, doc, actor=actor)
        else:
            decision = doc.get("decision")
            reason = doc.get("reason")
            if decision not in DECISIONS:
                raise UsageError("decision must be approve or reject", error_code="usage_error")
            if reason is not None and not isinstance(reason, str):
                raise UsageError("reason must be a string", error_code="usage_error")
            gate = self.goals.resolve_gate(
                gid, gate_id, str(decision), reason or None, decided_by=actor
            )
        # A goal this service runs goes on (or stays paused, rejected) before this answers.
        self.controller.running_goals.gate_decided(gid)
        self._status_cache.invalidate()
        status, _ = self._status_cache.get()
        return json_response(200, {**self._cards_event(status), "gate": gate.to_dict()})

    def _rendered(self, doc: Mapping[str, Any]) -> Response:
        """The page says which blockers a browser really rendered: the sixth metric's clock
        stops here, never on a script's read of /status.json."""
        shown = doc.get("shown")
        if not isinstance(shown, dict):
            raise UsageError("shown must map goal ids to blocker ids", error_code="usage_error")
        cleaned: dict[str, list[str]] = {}
        for goal_id, refs in shown.items():
            if isinstance(refs, list) and all(isinstance(r, str) for r in refs):
                cleaned[validate_goal_id(goal_id)] = refs[:20]
        recorded = record_displayed(self.goals, cleaned, surface="page")
        return json_response(200, {"ok": True, "recorded": recorded})

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _json(body: bytes) -> dict[str, Any]:
        try:
            doc = parse_json(body or b"{}")
        except JsonRefused as exc:
            raise LoopxChatError(
                f"the request body is not usable JSON ({exc.reason})",
                error_code="invalid_text" if exc.not_utf8 else "bad_json",
            ) from None
        if not isinstance(doc, dict):
            raise LoopxChatError("the request body must be a JSON object", error_code="bad_json")
        checked_tree(doc, "the request body")  # invalid_text: a lone surrogate anywhere in it
        return doc

    def warm_up(self) -> None:
        """At start, before anyone asks: the codex version `capabilities` reports (a CLI
        checking whose service this is gives it 1 s, less than a cold `codex --version`
        may take), then the rollout index."""
        self.capabilities()
        self.warm_host_facts()

    def warm_host_facts(self) -> None:
        """Bring the rollout index up to date before anyone asks, so the first status read
        after a start (at login, under launchd) does not wait for a full scan of the home.
        Only the index is written: nothing is recorded as displayed."""
        with self._scan_lock:
            scan_host(self._scanner)

    def _host_threads(self) -> Mapping[str, Any] | None:
        """The host's thread facts now (the scanner reads only what changed), or None."""
        with self._scan_lock:
            scan, _ = scan_host(self._scanner)
        return scan.threads if scan else None

    def capabilities(self) -> dict[str, Any]:
        if self._codex is None or not self._codex["available"]:
            # "Unavailable" is asked again each time: codex may have been installed since.
            try:
                binary = self.controller.find_binary()
                version = codex_version(binary, self.controller.environ, self.controller.codex_home)
                self._codex = {"available": True, "version": version}
            except LoopxChatError:
                self._codex = {"available": False, "version": None}
        binding = self.controller.binding
        return {
            "ok": True,
            "schema_version": CAPABILITIES_SCHEMA,
            "runtime_identity": {
                "schema_version": RUNTIME_IDENTITY_SCHEMA,
                "package_version": __version__,
                "package": "loopx-chat",
                "python": ".".join(map(str, sys.version_info[:3])),
            },
            "codex": self._codex,
            # How many Codex threads this service holds loaded now (at most `--max-warm`).
            "loaded_threads": len(self.controller.warm_pids()),
            "codex_home": {
                "path": str(binding.path),
                "source": binding.source,
                "id": home_identity(binding.path),
            },
        }

    def _goal_of(self, goal_id: str, doc: Mapping[str, Any], summary: str, next_action: str) -> str:
        """The request's goal id, checked; `goal_not_found` unless it exists or the body
        says `"create_goal": true`."""
        create_goal = doc.get("create_goal", False)
        if not isinstance(create_goal, bool):
            raise UsageError("create_goal must be true or false", error_code="usage_error")
        gid = validate_goal_id(goal_id)
        if not create_goal and not goal_exists(self.controller.store, self.goals, gid):
            raise StateError(
                f"no goal {gid}",
                error_code="goal_not_found",
                remedy=Remedy(summary=summary, next_action=next_action),
            )
        return gid

    def _open(self, doc: dict[str, Any]) -> Response:
        goal_id = doc.get("goal_id")
        if not isinstance(goal_id, str) or not goal_id.strip():
            raise LoopxChatError("goal_id (a string) is required", error_code="usage_error")
        work_dir = doc.get("work_dir")
        work = checked_work_dir(work_dir) if work_dir else self.work_dir
        mode = doc.get("mode", "new")
        gid = self._goal_of(
            goal_id,
            doc,
            "Sessions open only for goals that exist.",
            "Start the goal first (`loopx-chat goal set GOAL --objective TEXT`), or send "
            '"create_goal": true to open its first session.',
        )
        record = self.controller.open_session(gid, work, mode=str(mode))
        return json_response(201, {"ok": True, "session": record.public_dict()})

    def _start_turn(self, session_id: str, doc: dict[str, Any]) -> _Worker:
        """Check the request, start its turn on a worker thread, and wait until codex has
        accepted it (or refused, or replayed a finished one). 504 when it never did: the
        turn then never runs."""
        text = doc.get("text")
        if not isinstance(text, str) or not text.strip():
            raise LoopxChatError("text (a non-empty string) is required", error_code="usage_error")
        client_turn_id = doc.get("client_turn_id")
        if client_turn_id is not None and not isinstance(client_turn_id, str):
            raise LoopxChatError("client_turn_id must be a string", error_code="usage_error")
        settings = from_wire(doc.get("options"))
        worker = _Worker()

        def on_started(turn: TurnRecord) -> None:
            worker.turn = turn
            self.hub.publish(
                session_id, {"type": "status", "turn_id": turn.turn_id, "status": "running"}
            )
            worker.accepted.set()

        def on_delta(delta: str) -> None:
            turn_id = worker.turn.turn_id if worker.turn else None
            self.hub.publish(session_id, {"type": "delta", "turn_id": turn_id, "delta": delta})

        def on_notice(notice: str) -> None:
            turn_id = worker.turn.turn_id if worker.turn else None
            self.hub.publish(session_id, {"type": "notice", "turn_id": turn_id, "notice": notice})

        def run() -> None:
            try:
                worker.result = self.controller.submit_turn(
                    session_id,
                    text,
                    client_turn_id,
                    on_delta=on_delta,
                    on_started=on_started,
                    may_start=worker.may_start,
                    on_notice=on_notice,
                    settings=settings,
                )
                turn = worker.result.turn
                if worker.result.created:
                    self.hub.publish(
                        session_id,
                        {
                            "type": "status",
                            "turn_id": turn.turn_id,
                            "status": turn.status,
                            "error_code": turn.error_code,
                        },
                    )
            except LoopxChatError as exc:
                worker.error = exc
                log(f"turn on session {session_id} failed: {exc.error_code}")
            except Exception as exc:  # the worker must never die silently
                worker.error = LoopxChatError(
                    "the turn failed unexpectedly", error_code="internal_error"
                )
                log(f"turn on session {session_id} crashed: {type(exc).__name__}")
            finally:
                self.host_loops.take_up()  # the turn's resume may have restarted a loop
                worker.host_loop = bool(self._loop_seen(session_id))
                worker.accepted.set()
                # Only a turn this request started ends the session's event stream; a request
                # refused before starting one (bad input, busy, replay) must not cut off the
                # listeners of a turn that is still running.
                if worker.turn is not None and (worker.result is None or worker.result.created):
                    self.hub.end(session_id)
                worker.finished.set()

        threading.Thread(target=run, name=f"turn-{session_id}", daemon=True).start()
        if not worker.accepted.wait(ACCEPT_WAIT_SEC) and worker.give_up():
            raise LoopxChatError(
                f"codex did not accept the turn in {ACCEPT_WAIT_SEC:g}s; it will not run, so "
                "it is safe to send it again",
                error_code="turn_not_accepted",
            )
        worker.accepted.wait()  # started: its acceptance (or failure) is a request away
        return worker

    def _submit(self, session_id: str, doc: dict[str, Any], *, redact: bool = True) -> Response:
        """`POST .../turns`: answer once the turn is accepted; `GET .../events` streams it."""
        worker = self._start_turn(session_id, doc)
        if worker.error is not None:
            return from_error(worker.error, redact=redact)
        if worker.result is not None:  # finished (or replayed) before we looked
            code = 201 if worker.result.created else 200
            return json_response(
                code,
                {
                    "ok": True,
                    "session_id": session_id,
                    "created": worker.result.created,
                    "turn": worker.result.turn.public_dict(),
                },
            )
        turn = worker.turn
        if turn is None:
            return error_response(
                504, "turn_not_accepted", f"codex did not accept the turn in {ACCEPT_WAIT_SEC:g}s"
            )
        return json_response(
            202, {"ok": True, "session_id": session_id, "created": True, "turn": turn.public_dict()}
        )

    def _submit_streaming(
        self, session_id: str, doc: dict[str, Any], *, redact: bool = True
    ) -> Response:
        """`POST .../turns` with `Accept: text/event-stream`: the turn's own events from its
        first one (`status` running, every `delta`, the final `status`), then one `result`
        (the document the plain POST answers with, plus `thread_id`) or one `error`. The
        requester is subscribed before the turn starts, so no delta is lost, and its queue
        is unbounded: it asked for this reply. A refusal before the turn starts (bad input,
        busy, another home, not accepted) is the plain JSON error, with its status."""
        if not self._streams.acquire(blocking=False):
            raise LoopxChatError(
                "too many event streams are open on this service; close a page and retry",
                error_code="too_many_streams",
            )
        listener = self.hub.subscribe(session_id, limit=0)
        handed_over = False

        def unsubscribe() -> None:
            self.hub.unsubscribe(session_id, listener)

        try:
            worker = self._start_turn(session_id, doc)
            if worker.error is not None:
                return from_error(worker.error, redact=redact)

            def stream() -> Iterator[bytes]:
                replay = worker.result is not None and not worker.result.created
                while not replay:
                    try:
                        event = listener.get(timeout=15)
                    except queue.Empty:
                        if worker.finished.is_set() and listener.empty():
                            break
                        yield b": keepalive\n\n"
                        continue
                    if event is None:
                        break
                    yield _sse(event)
                worker.finished.wait()
                unsubscribe()
                if worker.error is not None or worker.result is None:
                    error = worker.error or LoopxChatError(
                        "the turn failed unexpectedly", error_code="internal_error"
                    )
                    yield _sse({"type": "error", **error_doc(error, redact=redact)})
                    return
                result = worker.result
                yield _sse(
                    {
                        "type": "result",
                        "ok": True,
                        "session_id": session_id,
                        "thread_id": result.session.upstream_thread_id,
                        "created": result.created,
                        "turn": result.turn.public_dict(),
                        **({"host_loop": True} if worker.host_loop else {}),
                    }
                )

            response = Response(
                200,
                content_type="text/event-stream",
                stream=HeldStream(stream(), self._streams.release, unsubscribe),
                headers=(("Cache-Control", "no-store"),),
            )
            handed_over = True
            return response
        finally:
            if not handed_over:
                unsubscribe()
                self._streams.release()

    def _events(self, session_id: str, device_id: str | None = None) -> Response:
        """A session's events; a device's stream ends within half a second once the device
        is revoked, as its cards stream does."""
        record = self.controller.store.load(session_id)
        listener = self.hub.subscribe(session_id)

        def active() -> bool:
            try:
                return bool(self.controller.store.load(session_id).active_turn_id)
            except LoopxChatError:
                return False  # unreadable now: end the stream rather than fail inside it

        def stream() -> Iterator[bytes]:
            # The listener is let go by the stream's on_close, which runs once however
            # the stream ends: exhausted, its client gone, or never read (HEAD).
            first = self.hub.last_status(session_id) or {
                "type": "status",
                "status": record.status,
            }
            yield _sse(first)
            if not active():
                return
            quiet_since = time.monotonic()
            while device_id is None or self.devices.active(device_id):
                try:
                    event = listener.get(timeout=STATUS_POLL_SEC if device_id else 15)
                except queue.Empty:
                    if not active():
                        return
                    if time.monotonic() - quiet_since >= 15 or device_id is None:
                        quiet_since = time.monotonic()
                        yield b": keepalive\n\n"
                    continue
                quiet_since = time.monotonic()
                if event is None:
                    yield _sse({"type": "end"})
                    return
                yield _sse(event)

        return self._event_stream(
            stream(), on_close=lambda: self.hub.unsubscribe(session_id, listener)
        )


class HeldStream:
    """An event stream that gives its place back exactly once: when it ends, when its client
    goes, or when the server closes it unread (HEAD)."""

    def __init__(self, events: Iterator[bytes], release: Any, on_close: Any = None) -> None:
        self._events = events
        self._release = release
        self._on_close = on_close
        self._done = False
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._events)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        try:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
            if self._on_close is not None:
                self._on_close()
        finally:
            self._release()


def _clock() -> str:
    return time.strftime("%H:%M:%S", time.localtime())


def _sse(event: Mapping[str, Any]) -> bytes:
    kind = event.get("type", "message")
    return f"event: {kind}\ndata: {json.dumps(event, sort_keys=True)}\n\n".encode()

"""Notices: the AppleScript rule through a recording `osascript` on PATH, notify-send, the
signed webhook against real loopback receivers (good, 500, hanging, refusing), dedup and the
rate limit, and a slow channel never holding up another one."""

from __future__ import annotations

import base64
import json
import socket
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopx_chat.errors import UsageError
from loopx_chat.notify.applescript import applescript_string
from loopx_chat.notify.desktop import DesktopSender, Outcome
from loopx_chat.notify.dispatcher import Notifier
from loopx_chat.notify.notice import Notice, Throttle, Verdict
from loopx_chat.notify.webhook import WebhookSender, body_of, checked_url
from loopx_chat.notify.webhook_secret import signing_key, webhook_secret
from tests.helpers.webhooks import Verifier

# The stand-in parses each string literal back by AppleScript's own rule: inside a literal
# only \" and \\ are escapes (a backslash before anything else is refused: our rule must
# never leave one), and checks that nothing but our template words sits outside them.
STANDIN = r"""
import json, os, sys

def literals(script):
    out, rest, i = [], [], 0
    while i < len(script):
        c = script[i]
        if c != '"':
            rest.append(c)
            i += 1
            continue
        i += 1
        buf = []
        while True:
            c = script[i]
            if c == "\\":
                if script[i + 1] not in '"\\':
                    raise SystemExit("a backslash escape AppleScript would reinterpret")
                buf.append(script[i + 1])
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                buf.append(c)
                i += 1
        out.append("".join(buf))
        rest.append("<>")
    return out, "".join(rest)

argv = sys.argv[1:]
entry = {"argv": sys.argv}
if argv[:1] == ["-e"]:
    values, skeleton = literals(argv[1])
    entry["skeleton"] = skeleton
    entry["values"] = values
with open(os.environ["STANDIN_LOG"], "a", encoding="utf-8") as f:
    f.write(json.dumps(entry) + "\n")
sys.exit(int(os.environ.get("STANDIN_EXIT", "0")))
"""

SKELETON = "display notification <> with title <> subtitle <>"


def _parse_literals(script: str) -> tuple[list[str], str]:
    namespace: dict[str, Any] = {}
    exec(STANDIN.split("argv = sys.argv")[0], namespace)  # the stand-in's own parser
    return namespace["literals"](script)  # type: ignore[no-any-return]


def _standin(bindir: Path, name: str) -> Path:
    bindir.mkdir(exist_ok=True)
    script = bindir / f"{name}.py"
    script.write_text(STANDIN)
    exe = bindir / name
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def _entries(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _notice(goal: str = "g1", key: str = "g1:gate-1", kind: str = "owner_gate") -> Notice:
    return Notice(key=key, goal_id=goal, kind=kind, page_url="http://127.0.0.1:8767/")


@given(st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=200))
def test_the_applescript_literal_reads_back_as_the_text(text: str) -> None:
    values, skeleton = _parse_literals(f"x {applescript_string(text)} y")
    assert values == [text]
    assert skeleton == "x <> y"


def test_the_literal_escapes_exactly_quotes_and_backslashes() -> None:
    assert applescript_string('a"b\\c\nd é') == '"a\\"b\\\\c\nd é"'
    assert applescript_string('" & (do shell script "id") & "') == (
        '"\\" & (do shell script \\"id\\") & \\""'
    )


@pytest.fixture
def osascript(tmp_path: Path) -> tuple[dict[str, str], Path]:
    exe = _standin(tmp_path / "bin", "osascript")
    log = tmp_path / "standin.log"
    return {"PATH": str(exe.parent), "STANDIN_LOG": str(log)}, log


def test_osascript_gets_the_exact_argv_without_a_shell(
    osascript: tuple[dict[str, str], Path],
) -> None:
    env, log = osascript
    outcome = DesktopSender(env).send(_notice())
    assert outcome == Outcome(True, "desktop", "sent")
    (entry,) = _entries(log)
    assert entry["argv"][1:] == [
        "-e",
        'display notification "Goal g1: an owner gate needs your decision." with title '
        '"loopx-chat: Waiting on you" subtitle "http://127.0.0.1:8767/"',
    ]
    assert "token" not in json.dumps(entry)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.text(
        alphabet=st.one_of(
            st.sampled_from(['"', "\\", "\n", "\r", "\t", "é", "✓", "'", "$"]),
            st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
        ),
        max_size=40,
    )
)
def test_any_text_reaches_osascript_as_itself(
    osascript: tuple[dict[str, str], Path], text: str
) -> None:
    env, log = osascript
    log.unlink(missing_ok=True)
    notice = Notice(key="k", goal_id=text, kind="blocked", page_url="http://127.0.0.1:1/")
    assert DesktopSender(env).send(notice).ok
    (entry,) = _entries(log)
    assert entry["skeleton"] == SKELETON
    assert entry["values"] == [notice.body, notice.title, notice.page_url]


def test_a_failing_or_missing_notifier_is_an_outcome_not_an_error(
    osascript: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, _ = osascript
    assert DesktopSender({**env, "STANDIN_EXIT": "3"}).send(_notice()).code == "exit_3"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert DesktopSender({"PATH": str(empty)}).send(_notice()).code == "unavailable"


def test_notify_send_is_used_where_there_is_no_osascript(tmp_path: Path) -> None:
    exe = _standin(tmp_path / "bin", "notify-send")
    log = tmp_path / "ns.log"
    assert DesktopSender({"PATH": str(exe.parent), "STANDIN_LOG": str(log)}).send(_notice()).ok
    (entry,) = _entries(log)
    assert entry["argv"][1:] == [
        "--app-name=loopx-chat",
        "loopx-chat: Waiting on you",
        "Goal g1: an owner gate needs your decision.\nhttp://127.0.0.1:8767/",
    ]


def test_terminal_notifier_is_preferred_and_gets_each_text_as_one_argument(
    osascript: tuple[dict[str, str], Path],
) -> None:
    env, log = osascript
    _standin(Path(env["PATH"]), "terminal-notifier")  # beside the osascript stand-in
    notice = Notice("g1:host-1", "g1", "host_gate", "http://127.0.0.1:8767/", blocker_ref="host-1")
    assert DesktopSender(env).send(notice) == Outcome(True, "desktop", "sent")
    (entry,) = _entries(log)  # one notice, and not through osascript
    assert Path(entry["argv"][0]).name == "terminal-notifier.py"
    assert entry["argv"][1:] == [
        "-title",
        "loopx-chat: Waiting on you",
        "-message",
        "Goal g1: Codex asks for your approval or answer.",
        "-open",
        "http://127.0.0.1:8767/",
        "-group",
        "host-1",
    ]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.text(
        alphabet=st.one_of(
            st.sampled_from(['"', "\\", "\n", "'", "$", "`", ";", "é", "✓", "-", "&"]),
            st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_any_text_reaches_terminal_notifier_as_itself_without_a_shell(
    tmp_path: Path, text: str
) -> None:
    bindir = tmp_path / "tn-bin"
    if not (bindir / "terminal-notifier").exists():
        _standin(bindir, "terminal-notifier")
    log = tmp_path / "tn.log"
    log.unlink(missing_ok=True)
    env = {"PATH": str(bindir), "STANDIN_LOG": str(log)}
    notice = Notice("k", text, "blocked", f"http://127.0.0.1:1/?{text}", blocker_ref=text)
    assert DesktopSender(env).send(notice).ok
    (entry,) = _entries(log)
    argv = entry["argv"][1:]
    assert argv[0::2] == ["-title", "-message", "-open", "-group"]
    assert argv[1::2] == [notice.title, notice.body, notice.page_url, text]


# -- the webhook ---------------------------------------------------------------------------


class Receiver:
    """A real loopback HTTP server: checks the signature, answers as told."""

    def __init__(self, secret: str, *, status: int = 200, hang: float = 0.0) -> None:
        self.verifier = Verifier(lambda: secret)
        self.headers: list[dict[str, str]] = []
        self.status = status
        self.hang = hang
        self.bodies: list[dict[str, Any]] = []
        self.bad_signatures = 0
        self.attempts = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.attempts += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                doc = outer.verifier.verify(body, dict(self.headers))
                if doc is None:
                    outer.bad_signatures += 1
                else:
                    outer.bodies.append(doc)
                if outer.hang:
                    time.sleep(outer.hang)
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def test_the_webhook_posts_a_signed_public_safe_body() -> None:
    receiver = Receiver(SECRET)
    try:
        outcome = WebhookSender(receiver.url, SECRET).send(_notice())
    finally:
        receiver.close()
    assert outcome == Outcome(True, "webhook", "sent")
    assert receiver.bad_signatures == 0
    (body,) = receiver.bodies
    assert body == {
        "schema_version": "loopx_chat_notice_v1",
        "goal_id": "g1",
        "kind": "owner_gate",
        "title": "loopx-chat: Waiting on you",
        "text": "Goal g1: an owner gate needs your decision.",
        "page_url": "http://127.0.0.1:8767/",
        "held": 0,
    }


def test_a_wrong_secret_fails_the_receivers_check() -> None:
    receiver = Receiver(SECRET)
    try:
        WebhookSender(receiver.url, "whsec_" + base64.b64encode(b"t" * 32).decode()).send(_notice())
    finally:
        receiver.close()
    assert receiver.bad_signatures == 1 and receiver.bodies == []
    assert receiver.verifier.refused == ["No matching signature found"]


def test_notices_verify_with_standardwebhooks_and_a_replay_is_refused() -> None:
    """Two notices of identical content (two gates of one goal) are two messages: their ids,
    and so what is signed, differ. A captured notice sent again is refused (its id was seen),
    and the library itself refuses it once its timestamp is outside the 5-minute window."""
    import standardwebhooks.webhooks as library

    receiver = Receiver(SECRET)
    try:
        sender = WebhookSender(receiver.url, SECRET)
        assert sender.send(_notice(key="g1:gate-1")).ok
        assert sender.send(_notice(key="g1:gate-2")).ok
        first, second = receiver.headers
        assert first["webhook-id"] != second["webhook-id"]
        assert first["webhook-signature"] != second["webhook-signature"]
        assert first["webhook-signature"].startswith("v1,")
        assert len(receiver.bodies) == 2 and receiver.bad_signatures == 0
        body = body_of(_notice())
        # The same bytes and headers again: the id was seen.
        assert receiver.verifier.verify(body, first) is None
        assert receiver.verifier.refused[-1] == "replayed message id"
        # Ten minutes later, a fresh receiver (no memory of ids) still refuses it.
        later = library.datetime.now(tz=library.timezone.utc) + library.timedelta(minutes=10)

        class Later(library.datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:
                return later

        original = library.datetime
        library.datetime = Later  # type: ignore[misc]
        try:
            with pytest.raises(library.WebhookVerificationError, match="too old"):
                library.Webhook(SECRET).verify(body, first)
        finally:
            library.datetime = original  # type: ignore[misc]
        # A timestamp moved forward by the replayer breaks the signature.
        moved = {**first, "webhook-timestamp": str(int(first["webhook-timestamp"]) + 1)}
        with pytest.raises(library.WebhookVerificationError, match="No matching signature"):
            library.Webhook(SECRET).verify(body, moved)
    finally:
        receiver.close()


def test_an_older_secret_is_moved_to_the_whsec_form_with_the_same_key(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    old = "o" * 43  # what 0.x made: a bare token, its bytes the HMAC key
    (state / "notify-webhook-secret").write_text(old + "\n")
    (state / "notify-webhook-secret").chmod(0o600)
    secret = webhook_secret(state)
    assert secret.startswith("whsec_") and signing_key(secret) == old.encode()
    assert (state / "notify-webhook-secret").read_text().strip() == secret
    assert stat.S_IMODE((state / "notify-webhook-secret").stat().st_mode) == 0o600
    assert webhook_secret(state) == secret  # read again as it is, not moved twice
    fresh = tmp_path / "fresh"
    made = webhook_secret(fresh)
    assert len(signing_key(made)) == 32
    assert stat.S_IMODE((fresh / "notify-webhook-secret").stat().st_mode) == 0o600


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("status", "hang", "refuse", "code"),
    [(500, 0.0, False, "http_500"), (200, 1.0, False, "timeout"), (200, 0.0, True, "unreachable")],
    ids=["500", "hangs", "refuses"],
)
def test_a_failing_receiver_is_retried_three_times_then_recorded(
    status: int, hang: float, refuse: bool, code: str
) -> None:
    receiver = Receiver(SECRET, status=status, hang=hang)
    url = receiver.url
    if refuse:
        receiver.close()
        url = f"http://127.0.0.1:{_free_port()}/hook"
    slept: list[float] = []
    try:
        outcome = WebhookSender(url, SECRET, timeout=0.3, sleep=slept.append).send(_notice())
    finally:
        if not refuse:
            receiver.close()
    assert outcome == Outcome(False, "webhook", code)
    assert slept == [0.5, 1.0, 2.0]  # 3 retries with backoff
    if not refuse:
        assert receiver.attempts == 4


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x/", "http://", "not a url"])
def test_only_http_urls_with_a_host_are_taken(url: str) -> None:
    with pytest.raises(UsageError):
        checked_url(url)


# -- dedup, rate limit, workers ------------------------------------------------------------


def test_the_throttle_dedups_and_admits_ten_a_minute_then_one_summary() -> None:
    throttle = Throttle(seen={"old"})
    assert throttle.admit("old", 0.0) is Verdict.DUPLICATE
    verdicts = [throttle.admit(f"k{i}", float(i)) for i in range(14)]
    assert verdicts.count(Verdict.SEND) == 10 and verdicts[10:] == [Verdict.HELD] * 4
    assert throttle.admit("k3", 20.0) is Verdict.DUPLICATE
    assert throttle.summary_due(30.0) == 0  # the minute is still full
    assert throttle.summary_due(60.0) == 4  # one summary for the four held back
    assert throttle.summary_due(61.0) == 0  # and only one
    assert throttle.admit("late", 61.0) is Verdict.SEND


class Recording:
    def __init__(self, channel: str, delay: float = 0.0) -> None:
        self.channel = channel
        self.delay = delay
        self.sent: list[tuple[float, Notice]] = []

    def send(self, notice: Notice) -> Outcome:
        time.sleep(self.delay)
        self.sent.append((time.monotonic(), notice))
        return Outcome(True, self.channel, "sent")


def _until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_slow_channel_never_holds_up_the_caller_or_another_channel() -> None:
    slow, fast = Recording("webhook", delay=2.0), Recording("desktop")
    outcomes: list[tuple[Notice, Outcome]] = []
    notifier = Notifier([slow, fast], page_url="u", on_outcome=lambda n, o: outcomes.append((n, o)))
    try:
        started = time.monotonic()
        for i in range(3):
            notifier.submit(_notice(key=f"g1:{i}"))
        # submit never blocks: three submits behind a 2 s channel take far less than one send
        assert time.monotonic() - started < 1.0
        _until(lambda: len(fast.sent) == 3, timeout=1.5)  # before the slow one's first ends
        assert slow.sent == []
    finally:
        notifier.close(timeout=0.1)


def test_the_notifier_sends_one_summary_for_what_the_limit_held() -> None:
    now = [0.0]
    sender = Recording("desktop")
    notifier = Notifier(
        [sender],
        page_url="u",
        on_outcome=lambda n, o: None,
        clock=lambda: now[0],
        summary_poll=0.02,
    )
    try:
        for i in range(13):
            notifier.submit(_notice(key=f"g:{i}", goal=f"g{i}"))
        notifier.submit(_notice(key="g:0"))  # a duplicate: nothing
        _until(lambda: len(sender.sent) == 10)
        now[0] = 61.0
        _until(lambda: len(sender.sent) == 11)
        time.sleep(0.1)
        assert len(sender.sent) == 11
        summary = sender.sent[-1][1]
        assert summary.kind == "summary" and summary.held == 3
        assert "3 more" in summary.body
    finally:
        notifier.close()


def test_the_status_asks_one_notice_per_gate_and_one_per_blocker() -> None:
    from loopx_chat.service.notices import wanted_notices
    from loopx_chat.service.page import GateView, GoalActions

    status = {
        "attention_queue": [
            {"goal_id": "a", "status": "ok", "answers": {}},
            {"goal_id": "b", "status": "ok", "answers": {"latest_run": "blocked: tests"}},
            {"goal_id": "c", "status": "problem", "answers": {}},
            {"goal_id": "d", "status": "ok", "answers": {"agent_can_continue": "yes: go"}},
            # Blocked by a gate the owner rejected: they know; nobody tells them.
            {"goal_id": "e", "status": "ok", "answers": {"latest_run": "blocked: gate x rejected"}},
        ]
    }
    gates = tuple(
        GateView(gate_id=g, question="q?", blocking=True, status="pending", created_at="t")
        for g in ("gate-1", "host-2")
    )
    actions = {"a": GoalActions(gates=gates), "b": GoalActions(blockers=("out-9",))}
    got = [(n.key, n.kind) for n in wanted_notices(status, actions, "u")]
    assert got == [
        ("a:gate-1", "owner_gate"),
        ("a:host-2", "host_gate"),
        ("b:blocked:out-9", "blocked"),
    ]

"""`serve --notify both`: a real service tells the owner once per gate, through a recording
`osascript` on PATH and a webhook receiver that fails; the page stays quick and shows the
failure as a note on the card, and a restart never notifies the same gate again."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from loopx_chat.state.service_runtime import read_secret
from tests.helpers.push_apis import SECRETS, PushReceiver, push_env
from tests.helpers.webhooks import Verifier, state_webhook_secret

RECORDER = r"""
import json, os, sys
with open(os.environ["STANDIN_LOG"], "a", encoding="utf-8") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cli(state: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), *args],
        check=True,
        capture_output=True,
    )


def _until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class FailingReceiver:
    def __init__(self, secret_of: Any) -> None:
        self.posts: list[tuple[dict[str, Any], bool]] = []
        self.verifier = Verifier(secret_of, processes=False)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                good = outer.verifier.verify(body, dict(self.headers)) is not None
                outer.posts.append((json.loads(body), good))
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _serve(state: Path, env: dict[str, str], url: str) -> tuple[subprocess.Popen[bytes], int]:
    return _serve_with(state, env, "--notify", "both", "--notify-url", url)


def _serve_with(
    state: Path, env: dict[str, str], *args: str
) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loopx_chat",
            "--state-dir",
            str(state),
            "serve",
            *args,
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    _until(listening, 30)
    return proc, port


def _page(port: int, state: Path) -> tuple[float, str]:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    # The cards come from /api/page: `GET /` is the page's shell, with no data.
    conn.request(
        "GET",
        "/api/page",
        headers={"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {read_secret(state)}"},
    )
    body = json.loads(conn.getresponse().read())["cards_html"]
    conn.close()
    return time.monotonic() - started, body


def test_each_gate_is_told_once_and_a_failing_webhook_shows_on_the_card(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "rec.py").write_text(RECORDER)
    exe = bindir / "osascript"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{bindir / "rec.py"}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "osascript.log"
    env = {
        **{k: v for k, v in os.environ.items() if k != "LOOPX_CHAT_CODEX_HOME"},
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "STANDIN_LOG": str(log),
        "LOOPX_CHAT_CODEX_HOME": str(tmp_path / "home"),
    }
    receiver = FailingReceiver(lambda: state_webhook_secret(state))
    _cli(state, "gate", "request", "--goal", "ship-it", "--question", "Deploy to prod?")

    def desktop() -> list[list[str]]:
        return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

    proc, port = _serve(state, env, receiver.url)
    try:
        _until(lambda: len(desktop()) == 1)
        assert "Goal ship-it: an owner gate needs your decision." in desktop()[0][1]
        assert "token" not in desktop()[0][1]
        # While the webhook is still being retried, the page answers at once and another
        # gate's desktop notice goes out.
        took, _ = _page(port, state)
        assert took < 1.0
        _cli(state, "gate", "request", "--goal", "other", "--question", "Spend more?")
        _until(lambda: len(desktop()) == 2, timeout=5)
        _until(lambda: "The webhook notice failed (http_500)" in _page(port, state)[1])
        body = _page(port, state)[1]
        card = body[body.index('data-goal="ship-it"') :]
        assert "The webhook notice failed (http_500)" in card.split("</section>")[0]
        assert receiver.posts and all(good for _, good in receiver.posts)
        assert {p["goal_id"] for p, _ in receiver.posts} <= {"ship-it", "other"}
        assert all("Deploy" not in json.dumps(p) for p, _ in receiver.posts)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    secret_file = state / "notify-webhook-secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    # A restart: the same gates are never told again.
    before = len(desktop())
    proc, port = _serve(state, env, receiver.url)
    try:
        # A new gate proves the restarted notifier scans; only that gate is told.
        _cli(state, "gate", "request", "--goal", "third", "--question", "Ship the docs?")
        _until(lambda: len(desktop()) == before + 1, timeout=10)
        assert "Goal third" in desktop()[-1][1]
        time.sleep(0.5)  # a repeat of an old gate would come in the same scan
        assert len(desktop()) == before + 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        receiver.server.shutdown()


def test_serve_refuses_a_webhook_mode_without_a_usable_url(tmp_path: Path) -> None:
    state = tmp_path / "state"
    for args, needle in (
        (["--notify", "webhook"], "needs --notify-url"),
        (["--notify-url", "file:///etc/passwd"], "http:// or https://"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "serve", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "[usage_error]" in done.stderr and needle in done.stderr
    assert not state.exists()


PUSH_ENV = (
    "LOOPX_CHAT_PUSHOVER_TOKEN",
    "LOOPX_CHAT_PUSHOVER_USER",
    "LOOPX_CHAT_PUSHOVER_API",
    "LOOPX_CHAT_TELEGRAM_TOKEN",
    "LOOPX_CHAT_TELEGRAM_API",
    "LOOPX_CHAT_SLACK_WEBHOOK_URL",
)


def _clean_env(tmp_path: Path) -> dict[str, str]:
    drop = {"LOOPX_CHAT_CODEX_HOME", *PUSH_ENV}
    return {
        **{k: v for k, v in os.environ.items() if k not in drop},
        "LOOPX_CHAT_CODEX_HOME": str(tmp_path / "home"),
    }


def test_serve_pushes_through_pushover_telegram_and_slack_and_tells_nothing_else(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    canary = "CANARY-push-5e1f"
    apis = {
        "pushover": PushReceiver("pushover"),
        "telegram": PushReceiver("telegram"),
        "slack": PushReceiver("slack", statuses=(500,)),  # a failing channel, for its note
    }
    env = {**_clean_env(tmp_path), **push_env(apis)}
    _cli(state, "gate", "request", "--goal", "ship-it", "--question", f"Deploy {canary}?")
    push = ("--push", "pushover", "--push", "telegram", "--push", "slack")
    proc, port = _serve_with(state, env, "--notify", "none", *push, "--telegram-chat", "4242")
    try:
        _until(lambda: all(a.seen for a in apis.values()) and len(apis["slack"].seen) == 4)
        _until(lambda: "The slack notice failed (http_500)" in _page(port, state)[1])
        page = _page(port, state)[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        for receiver in apis.values():
            receiver.close()
    assert proc.stderr is not None
    service_log = proc.stderr.read()
    link = f"http://127.0.0.1:{port}/#gate=ship-it/"
    assert not apis["pushover"].refused and not apis["telegram"].refused
    [pushover], [telegram] = apis["pushover"].seen, apis["telegram"].seen
    form = parse_qs(pushover.body.decode("ascii"))
    assert form["url"][0].startswith(link)
    assert form["message"] == ["Goal ship-it: an owner gate needs your decision."]
    assert link in json.loads(telegram.body)["text"]  # a loopback link: in the text
    assert link in json.loads(apis["slack"].seen[0].body)["text"]
    for receiver in apis.values():
        for seen in receiver.seen:
            assert canary.encode() not in seen.raw and b"Deploy" not in seen.raw
    notices = (state / "notify" / "notices.jsonl").read_bytes()
    assert b'"channel":"slack"' in notices.replace(b" ", b"")
    for where in (service_log, notices):
        assert canary.encode() not in where
    for where in (service_log, notices, page.encode()):  # the page shows the owner the question
        assert [s for s in SECRETS if s.encode() in where] == []


def test_serve_refuses_a_push_channel_without_its_secret(tmp_path: Path) -> None:
    state = tmp_path / "state"
    closed = PushReceiver("slack")
    closed.close()
    full = {
        **_clean_env(tmp_path),
        **push_env({c: closed for c in ("pushover", "telegram", "slack")}),
    }
    cases = [
        (["--push", "pushover"], "LOOPX_CHAT_PUSHOVER_TOKEN", "LOOPX_CHAT_PUSHOVER_TOKEN"),
        (["--push", "pushover"], "LOOPX_CHAT_PUSHOVER_USER", "LOOPX_CHAT_PUSHOVER_USER"),
        (
            ["--push", "telegram", "--telegram-chat", "42"],
            "LOOPX_CHAT_TELEGRAM_TOKEN",
            "LOOPX_CHAT_TELEGRAM_TOKEN",
        ),
        (["--push", "telegram"], None, "--telegram-chat"),
        (["--push", "slack", "--telegram-chat", "42"], None, "--telegram-chat"),
        (["--push", "slack"], "LOOPX_CHAT_SLACK_WEBHOOK_URL", "LOOPX_CHAT_SLACK_WEBHOOK_URL"),
    ]
    for args, drop, needle in cases:
        done = subprocess.run(
            [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "serve", *args],
            env={k: v for k, v in full.items() if k != drop},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "[usage_error]" in done.stderr and needle in done.stderr, done.stderr
        assert [s for s in SECRETS if s in done.stderr + done.stdout] == []
    assert not state.exists()


def test_serve_started_without_the_secrets_takes_those_kept_at_install(tmp_path: Path) -> None:
    """As launchd or systemd start it: no push secret in its environment, the ones `service
    install` kept (0600, state dir) used instead; a secret the environment has wins."""
    from loopx_chat.state import push_secrets

    state = tmp_path / "state"
    pushover, kept_slack, env_slack = (PushReceiver(n) for n in ("pushover", "slack", "slack"))
    _cli(state, "gate", "request", "--goal", "ship-it", "--question", "Deploy?")
    everything = push_env({"pushover": pushover, "slack": kept_slack})
    push_secrets.save(state, everything)  # only the secrets' names are kept
    assert sorted(push_secrets.load(state)) == [
        "LOOPX_CHAT_PUSHOVER_TOKEN",
        "LOOPX_CHAT_PUSHOVER_USER",
        "LOOPX_CHAT_SLACK_WEBHOOK_URL",
    ]
    env = {
        **_clean_env(tmp_path),
        "LOOPX_CHAT_PUSHOVER_API": pushover.origin,  # where the stand-in listens: no secret
        "LOOPX_CHAT_SLACK_WEBHOOK_URL": push_env({"slack": env_slack})[
            "LOOPX_CHAT_SLACK_WEBHOOK_URL"
        ],
    }
    proc, _port = _serve_with(
        state, env, "--notify", "none", "--push", "pushover", "--push", "slack"
    )
    try:
        _until(lambda: bool(pushover.seen) and bool(env_slack.seen))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        for receiver in (pushover, kept_slack, env_slack):
            receiver.close()
    assert not pushover.refused and kept_slack.seen == []
    assert proc.stderr is not None
    service_log = proc.stderr.read()
    assert [s for s in SECRETS if s.encode() in service_log] == []

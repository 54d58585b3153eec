"""A loopback stand-in for the push APIs loopx-chat writes to, as far as they can be checked here.

One real `http.server` thread that takes what each API documents and refuses the rest with
400 (kept in `refused`), as the real one would:
- Pushover (https://pushover.net/api): `POST /1/messages.json`, form-encoded, `token` and
  `user` (30 characters of A-Z a-z 0-9) and `message` required; `title` up to 250
  characters, `message` up to 1024, `url` up to 512, `url_title` up to 100. Answers
  `{"status": 1, "request": ...}`.
- Telegram (https://core.telegram.org/bots/api#sendmessage): `POST /bot<token>/sendMessage`,
  JSON with `chat_id` and `text` (1-4096 characters); an inline keyboard button's `url`
  must be http(s) and not a loopback address. Answers `{"ok": true, "result": ...}`.
- Slack incoming webhook (https://api.slack.com/messaging/webhooks): `POST` to the hook's
  path, JSON with `text`. Answers `ok` (text/plain).
`statuses` makes it answer each attempt with the next status instead (the last repeats).
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from loopx_chat.notify.push import is_loopback

PUSHOVER_TOKEN = "a" + secrets.token_hex(14) + "Z"  # 30 characters, as Pushover's
PUSHOVER_USER = "u" + secrets.token_hex(14) + "Q"
TELEGRAM_TOKEN = "123456789:AA" + secrets.token_urlsafe(24).replace("-", "x")
SLACK_HOOK_PATH = "/services/T0001/B0002/" + secrets.token_hex(12)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def raw(self) -> bytes:
        """All of the request, to look for what must not be in it."""
        head = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.method} {self.path}\n{head}\n\n".encode() + self.body


def _pushover(seen: Seen) -> tuple[str | None, bytes]:
    if seen.path != "/1/messages.json":
        return f"not the messages path: {seen.path}", b""
    if seen.headers.get("Content-Type", "").split(";")[0] != "application/x-www-form-urlencoded":
        return "not form-encoded", b""
    form = {k: v[0] for k, v in parse_qs(seen.body.decode("ascii"), strict_parsing=True).items()}
    if form.get("token") != PUSHOVER_TOKEN or form.get("user") != PUSHOVER_USER:
        return "wrong token or user", b""
    limits = {"title": 250, "message": 1024, "url": 512, "url_title": 100}
    if not form.get("message") or any(len(form.get(k, "")) > n for k, n in limits.items()):
        return "no message, or a field over its limit", b""
    return None, json.dumps({"status": 1, "request": secrets.token_hex(8)}).encode()


def _telegram(seen: Seen) -> tuple[str | None, bytes]:
    if seen.path != f"/bot{TELEGRAM_TOKEN}/sendMessage":
        return "not this bot's sendMessage", b""
    if seen.headers.get("Content-Type", "").split(";")[0] != "application/json":
        return "not JSON", b""
    doc = json.loads(seen.body)
    if "chat_id" not in doc or not 1 <= len(doc.get("text", "")) <= 4096:
        return "no chat_id, or no text", b""
    for row in doc.get("reply_markup", {}).get("inline_keyboard", []):
        for button in row:
            parts = urlsplit(button["url"])
            if parts.scheme not in ("http", "https") or is_loopback(parts.hostname):
                return f"Bad Request: inline keyboard button URL '{button['url']}' is invalid", b""
    return None, json.dumps({"ok": True, "result": {"message_id": 1}}).encode()


def _slack(seen: Seen) -> tuple[str | None, bytes]:
    if seen.path != SLACK_HOOK_PATH:
        return "no_service", b""
    if seen.headers.get("Content-Type", "").split(";")[0] != "application/json":
        return "invalid_payload", b""
    if not json.loads(seen.body).get("text"):
        return "no_text", b""
    return None, b"ok"


CHECKS: dict[str, Callable[[Seen], tuple[str | None, bytes]]] = {
    "pushover": _pushover,
    "telegram": _telegram,
    "slack": _slack,
}


@dataclass(frozen=True)
class Reply:
    """A refusal the stand-in gives instead of its API's answer: a status, headers (say a
    `Retry-After`) and a body (say Telegram's 429 with `parameters.retry_after`)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


def telegram_429(retry_after: int) -> Reply:
    """Telegram's flood-control answer, as its Bot API documents it."""
    doc = {
        "ok": False,
        "error_code": 429,
        "description": f"Too Many Requests: retry after {retry_after}",
        "parameters": {"retry_after": retry_after},
    }
    return Reply(429, (("Content-Type", "application/json"),), json.dumps(doc).encode())


class PushReceiver:
    def __init__(
        self, api: str, statuses: tuple[int, ...] = (), replies: tuple[Reply, ...] = ()
    ) -> None:
        self.seen: list[Seen] = []
        self.refused: list[str] = []
        self.statuses = list(statuses)
        self.replies = list(replies)  # given first, one per request, in order
        check = CHECKS[api]
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen = Seen("POST", self.path, dict(self.headers), body)
                outer.seen.append(seen)
                why, answer = check(seen)
                status = 400 if why else 200
                if outer.statuses:
                    status = outer.statuses.pop(0) if len(outer.statuses) > 1 else outer.statuses[0]
                if why:
                    outer.refused.append(why)
                headers: tuple[tuple[str, str], ...] = ()
                if outer.replies:
                    reply = outer.replies.pop(0)
                    status, headers, answer = reply.status, reply.headers, reply.body
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def push_env(receivers: dict[str, PushReceiver]) -> dict[str, str]:
    """The service's environment for these receivers: each API's secrets and its origin."""
    env: dict[str, str] = {}
    if "pushover" in receivers:
        env |= {
            "LOOPX_CHAT_PUSHOVER_TOKEN": PUSHOVER_TOKEN,
            "LOOPX_CHAT_PUSHOVER_USER": PUSHOVER_USER,
            "LOOPX_CHAT_PUSHOVER_API": receivers["pushover"].origin,
        }
    if "telegram" in receivers:
        env |= {
            "LOOPX_CHAT_TELEGRAM_TOKEN": TELEGRAM_TOKEN,
            "LOOPX_CHAT_TELEGRAM_API": receivers["telegram"].origin,
        }
    if "slack" in receivers:
        env["LOOPX_CHAT_SLACK_WEBHOOK_URL"] = receivers["slack"].origin + SLACK_HOOK_PATH
    return env


SECRETS = (PUSHOVER_TOKEN, PUSHOVER_USER, TELEGRAM_TOKEN, SLACK_HOOK_PATH)

"""A loopback stand-in for an ntfy server's publish API, as far as it can be checked here.

It takes what ntfy takes (https://docs.ntfy.sh/publish/): `POST` or `PUT` to `/<topic>` (a
topic of A-Z a-z 0-9 _ -, up to 64 characters) with the message as the body (UTF-8, at most
4096 bytes) and the options as headers (`Title`/`X-Title`, `Tags`/`X-Tags`,
`Click`/`X-Click`: an absolute http(s) URL; `Authorization: Bearer` when a token is needed),
and answers as ntfy does (200, the message as JSON with `id`, `time`, `event: message`,
`topic`, `message`, `title`, `click`). Anything else gets 400 and is kept in `refused`.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_TOPIC = re.compile(r"/([A-Za-z0-9_-]{1,64})")


def _header(headers: Any, name: str) -> str | None:
    return headers.get(name) or headers.get(f"X-{name}")


class NtfyReceiver:
    def __init__(self, topic: str = "loopx-phone", token: str | None = None) -> None:
        self.topic = topic
        self.token = token
        self.messages: list[dict[str, Any]] = []
        self.refused: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _publish(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                why = outer._check(self.path, dict(self.headers), body)
                if why:
                    outer.refused.append(why)
                    self.send_response(400)
                    self.end_headers()
                    return
                doc = {
                    "id": secrets.token_hex(6),
                    "time": int(time.time()),
                    "event": "message",
                    "topic": outer.topic,
                    "message": body.decode("utf-8"),
                    "title": _header(self.headers, "Title"),
                    "tags": (_header(self.headers, "Tags") or "").split(","),
                    "click": _header(self.headers, "Click"),
                    "headers": dict(self.headers),
                }
                outer.messages.append(doc)
                raw = json.dumps({k: v for k, v in doc.items() if k != "headers"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_POST = do_PUT = _publish

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/{topic}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _check(self, path: str, headers: dict[str, str], body: bytes) -> str | None:
        match = _TOPIC.fullmatch(path)
        if match is None or match.group(1) != self.topic:
            return f"not this topic: {path}"
        if len(body) > 4096:
            return "message over 4096 bytes"
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return "message not UTF-8"
        click = _header(headers, "Click")
        if click is not None:
            parts = urlsplit(click)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                return f"Click is not an absolute http(s) URL: {click}"
        if self.token is not None and headers.get("Authorization") != f"Bearer {self.token}":
            return "no or wrong token"
        return None

    def close(self) -> None:
        self.server.shutdown()

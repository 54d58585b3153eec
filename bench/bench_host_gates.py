"""Benchmark: from codex's approval request to the owner being told, p50 and p99.

A real `loopx-chat serve --approval untrusted --notify webhook` with the pinned codex and
the loopback model mock. Each round the model runs `touch`, codex asks, and two clocks stop:
(a) a loopback webhook receiver gets the signed notice, (b) the page's live stream
(`/api/status/events`, what the page renders) carries a card with the new host gate. Both
start at the moment the service received codex's request (the gate's `received_at`). The
request is then declined and the next round starts, paced to the notice rate limit (10 a
minute: a faster run would time the summary notice instead). Prints p50/p99 in ms; never
asserts (the target is p99 <= 500 ms for both, on loopback).
Run: `.venv/bin/python bench/bench_host_gates.py [--rounds N] [--codex-bin PATH]`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import read_secret

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"
PACE_SEC = 6.5  # at most 10 notices a minute


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _until(predicate: Any, what: str = "the service", timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.005)
    raise SystemExit(f"timed out waiting for {what}")


class Receiver:
    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.kinds: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.kinds.append(f"{body.get('kind')}:{body.get('goal_id')}")
                if body.get("kind") == "host_gate":
                    outer.arrived.setdefault(str(body.get("goal_id")), time.time())
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Cards:
    """Reads the page's live stream; notes when each gate id first appears in a card."""

    def __init__(self, port: int, secret: str) -> None:
        self.seen: dict[str, float] = {}
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self._conn.request(
            "GET",
            "/api/status/events",
            headers={"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {secret}"},
        )
        self._response = self._conn.getresponse()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._response:
            if not line.startswith(b"data: "):
                continue
            now = time.time()
            html = json.loads(line[6:]).get("cards_html", "")
            for part in html.split('data-gate="')[1:]:
                self.seen.setdefault(part.split('"', 1)[0], now)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        home, state, work = root / "home", root / "state", root / "work"
        work.mkdir()
        write_offline_codex_config(home, mock.base_url)
        receiver = Receiver()
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "CODEX_HOME"}
        env["LOOPX_CHAT_CODEX_HOME"] = str(home)
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
                *("--codex-bin", args.codex_bin, "serve", "--port", str(port)),
                *("--approval", "untrusted", "--sandbox", "workspace-write"),
                *("--notify", "webhook", "--notify-url", receiver.url),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            secret = _until(lambda: read_secret(state))

            def call(method: str, path: str, body: Any) -> Any:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                headers = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {secret}"}
                if body is not None:
                    headers["Content-Type"] = "application/json"
                data = None if body is None else json.dumps(body)
                conn.request(method, path, body=data, headers=headers)
                doc = json.loads(conn.getresponse().read())
                conn.close()
                return doc

            def listening() -> bool:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    return True
                except OSError:
                    return False

            _until(listening)
            cards = Cards(port, secret)
            webhook_ms: list[float] = []
            card_ms: list[float] = []
            goals = GateStore(state)
            for n in range(args.rounds):
                round_started = time.monotonic()
                goal = f"bench-{n:03d}"
                opened = call(
                    "POST",
                    "/api/chat/sessions",
                    {"goal_id": goal, "work_dir": str(work), "create_goal": True},
                )
                if "session" not in opened:
                    raise SystemExit(f"round {n}: the session did not open: {opened}")
                session = opened["session"]["session_id"]
                call(
                    "POST",
                    f"/api/chat/sessions/{session}/turns",
                    {"text": f"mock:shell=touch {work}/f{n}"},
                )
                gate = _until(
                    lambda g=goal: goals.has_records(g) and next(iter(goals.gates(g)), None)
                )
                received = float((gate.host or {})["received_at"])
                _until(lambda g=goal: g in receiver.arrived, f"the webhook of round {n}")
                _until(lambda gid=gate.gate_id: gid in cards.seen, f"the card of round {n}")
                webhook_ms.append((receiver.arrived[goal] - received) * 1000)
                card_ms.append((cards.seen[gate.gate_id] - received) * 1000)
                decision = f"/api/goals/{goal}/gates/{gate.gate_id}/decision"
                call("POST", decision, {"decision": "decline"})
                _until(
                    lambda s=session: (
                        not call("GET", f"/api/chat/sessions/{s}", None)["session"][
                            "active_turn_id"
                        ]
                    )
                )
                time.sleep(max(0.0, PACE_SEC - (time.monotonic() - round_started)))
        finally:
            print("notices:", " ".join(receiver.kinds), file=sys.stderr)
            proc.terminate()
            proc.wait(30)
    for name, values in (("webhook POST", webhook_ms), ("card on the page stream", card_ms)):
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        print(
            f"{name}: p50 {statistics.median(ordered):.0f} ms, p99 {p99:.0f} ms "
            f"over {len(ordered)} requests"
        )


if __name__ == "__main__":
    main()

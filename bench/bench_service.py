"""Benchmark: /status.json under 16 concurrent clients for 100 goals, vs a bare stdlib server.

Same run, same machine: the loopx-chat service (security checks, projection of 100 goals
from owner-local state on every request) against a bare `ThreadingHTTPServer` returning the
same bytes from memory. Prints throughput, p50/p99 latency and the ratios; never asserts.
Run: `.venv/bin/python bench/bench_service.py [--requests N]`.
"""

from __future__ import annotations

import argparse
import http.client
import secrets
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.service.app import ServiceApp
from loopx_chat.service.server import LoopbackServer
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord
from loopx_chat.state.session_store import SessionStore

CLIENTS = 16


def seed(state: Path, home: str, goals: int) -> None:
    store, gate_store = SessionStore(state), GateStore(state)
    for i in range(goals):
        sid = f"s{i:04d}"
        store.create(
            SessionRecord(
                session_id=sid,
                goal_id=f"goal-{i:03d}",
                created_at="2026-01-01T00:00:00Z",
                updated_at="2026-01-01T00:00:00Z",
                codex_home=home,
                upstream_thread_id=f"t{i}",
                turn_count=2,
            )
        )
        with store.lock(sid):
            for n, status in enumerate(("completed", "failed" if i % 3 == 0 else "completed")):
                store.save_turn(
                    TurnRecord(
                        turn_id=f"{sid}-turn{n}",
                        session_id=sid,
                        status=status,
                        created_at=f"2026-01-01T0{n}:00:00Z",
                        updated_at=f"2026-01-01T0{n}:00:00Z",
                        completed_at=f"2026-01-01T0{n}:00:00Z",
                        error_code="turn_failed" if status == "failed" else None,
                        tokens=TokenCounts(100, 10, 110),
                    )
                )
        if i % 4 == 0:
            gate_store.request_gate(f"goal-{i:03d}", "Approve the next step?")


# The service asks every request for the owner's secret; the bare baseline ignores it.
SECRET = secrets.token_urlsafe(32)
AUTH = {"Authorization": f"Bearer {SECRET}"}


def load(port: int, total: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = total // CLIENTS

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        for _ in range(per_client):
            start = time.perf_counter()
            conn.request("GET", "/status.json", headers={"Host": f"127.0.0.1:{port}", **AUTH})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200
            mine.append(time.perf_counter() - start)
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, latencies


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--goals", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        seed(root / "state", str(home), args.goals)
        controller = ChatController(
            store=SessionStore(root / "state"),
            environ={"LOOPX_CHAT_CODEX_HOME": str(home), "PATH": ""},
            cwd=root,
        )
        server = LoopbackServer(
            "127.0.0.1",
            0,
            lambda port: ServiceApp(
                controller, GateStore(root / "state"), port=port, work_dir=root, secret=SECRET
            ),
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        conn.request("GET", "/status.json", headers={"Host": f"127.0.0.1:{server.port}", **AUTH})
        cached = conn.getresponse().read()
        conn.close()

        class Bare(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(cached)))
                self.end_headers()
                self.wfile.write(cached)

            def log_message(self, *a: object) -> None:
                pass

        bare = ThreadingHTTPServer(("127.0.0.1", 0), Bare)
        bare.daemon_threads = True
        threading.Thread(target=bare.serve_forever, daemon=True).start()
        import contextlib
        import io

        with contextlib.redirect_stderr(io.StringIO()):  # the service logs every request
            bare_time, bare_lat = load(bare.server_address[1], args.requests)
            svc_time, svc_lat = load(server.port, args.requests)
        server.shutdown()
        bare.shutdown()
    n = args.requests // CLIENTS * CLIENTS
    print(f"goals: {args.goals}, clients: {CLIENTS}, requests per side: {n}, body {len(cached)} B")
    for name, elapsed, lat in (
        ("bare stdlib server", bare_time, bare_lat),
        ("loopx-chat service", svc_time, svc_lat),
    ):
        print(
            f"{name + ':':20} {n / elapsed:8.0f} req/s  p50 {p(lat, 50) * 1000:6.1f} ms"
            f"  p99 {p(lat, 99) * 1000:6.1f} ms"
        )
    print(f"throughput ratio service/bare: {(n / svc_time) / (n / bare_time):.3f}")
    print(f"p99 ratio service/bare:        {p(svc_lat, 99) / p(bare_lat, 99):.1f}")


if __name__ == "__main__":
    main()

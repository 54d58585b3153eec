"""Benchmark: the service's memory over many open-turn-close cycles.

A real `loopx-chat serve` (the pinned codex, the loopback mock model, `--max-warm 4`) is
driven through N cycles: open a session on one goal (a new Codex thread), run one turn to
its end, and leave it, so the least recently used idle thread is closed when the fifth is
opened. The page's status is read every cycle, as an open page would. The service's RSS
(`VmRSS` of its process; the app-servers are other processes) is printed every 50 cycles,
with the growth after the first 100. Never asserts.

Run: `.venv/bin/python bench/bench_service_memory.py [--cycles 1000]`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import read_secret

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    parser.add_argument(
        "--baseline", default=None, help="a git ref: run that commit's service instead"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        home, state, work = root / "home", root / "state", root / "work"
        work.mkdir()
        write_offline_codex_config(home, mock.base_url)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "CODEX_HOME"}
        env["LOOPX_CHAT_CODEX_HOME"] = str(home)
        if args.baseline:
            code = root / "code"
            code.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "loopx_chat"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
            env["PYTHONPATH"] = str(code)
            print(f"the service of {args.baseline}")
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
                *("--codex-bin", args.codex_bin, "serve", "--port", str(port)),
                *("--max-warm", "4", "--notify", "none"),
            ],
            env=env,
            cwd=env.get("PYTHONPATH", str(ROOT)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            secret = None
            while secret is None and time.monotonic() < deadline:
                secret = read_secret(state)
                time.sleep(0.05)
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)

            def call(method: str, path: str, body: Any = None) -> Any:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                headers = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {secret}"}
                if body is not None:
                    headers["Content-Type"] = "application/json"
                conn.request(method, path, None if body is None else json.dumps(body), headers)
                raw = conn.getresponse().read()
                conn.close()
                return json.loads(raw)

            samples: list[tuple[int, float]] = []
            started = time.monotonic()
            for n in range(1, args.cycles + 1):
                opened = call(
                    "POST",
                    "/api/chat/sessions",
                    {"goal_id": "bench", "work_dir": str(work), "create_goal": True},
                )
                if "session" not in opened:
                    raise SystemExit(f"cycle {n}: the session did not open: {opened}")
                sid = opened["session"]["session_id"]
                call("POST", f"/api/chat/sessions/{sid}/turns", {"text": "hi"})
                while call("GET", f"/api/chat/sessions/{sid}")["session"]["active_turn_id"]:
                    time.sleep(0.02)
                call("GET", "/status.json")
                if n % 50 == 0 or n == 1:
                    samples.append((n, rss_mib(proc.pid)))
                    print(
                        f"cycle {n}: RSS {samples[-1][1]:.1f} MiB "
                        f"({time.monotonic() - started:.0f} s)",
                        flush=True,
                    )
        finally:
            proc.terminate()
            proc.wait(30)
    after_100 = [mib for n, mib in samples if n >= 100]
    if after_100:
        print(
            f"after cycle 100: {after_100[0]:.1f} MiB; at the end: {after_100[-1]:.1f} MiB; "
            f"growth {after_100[-1] - after_100[0]:+.1f} MiB, range "
            f"{max(after_100) - min(after_100):.1f} MiB over {samples[-1][0] - 100} cycles"
        )


if __name__ == "__main__":
    main()

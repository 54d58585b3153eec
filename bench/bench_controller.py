"""Benchmark: controller overhead vs a bare JSON-RPC client on the same real app-server.

Same run, same pinned codex binary, same loopback mock: warm-turn latency through
`ChatController.submit_turn` vs a minimal newline-JSON client doing `turn/start` and reading
until `turn/completed`. Also spawn-to-ready (spawn → initialize answered → thread started)
and the controller process's RSS. Prints medians and ratios; never asserts.

Run: `.venv/bin/python bench/bench_controller.py [--turns N] [--codex-bin PATH]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from loopx_chat.codex.binary import find_codex
from loopx_chat.codex.mock_responses import MockResponsesServer
from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.state.session_store import SessionStore

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"


class BareClient:
    """The baseline: the least code that can drive a turn."""

    def __init__(self, exe: Path, home: Path, cwd: Path) -> None:
        env = {**os.environ, "CODEX_HOME": str(home), "RUST_LOG": "warn"}
        self.proc = subprocess.Popen(
            [str(exe), "app-server", "--listen", "stdio://"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.next_id = 0

    def send(self, msg: dict) -> None:  # type: ignore[type-arg]
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:  # type: ignore[type-arg]
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "method": method, "params": params})
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                return msg["result"]
        raise RuntimeError("app-server closed")

    def wait_completed(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if b'"turn/completed"' in line:
                return
        raise RuntimeError("app-server closed")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def time_bare(exe: Path, home: Path, cwd: Path, turns: int) -> tuple[list[float], float]:
    t0 = time.perf_counter()
    client = BareClient(exe, home, cwd)
    client.request("initialize", {"clientInfo": {"name": "bench", "version": "0"}})
    client.send({"method": "initialized"})
    thread = client.request(
        "thread/start", {"cwd": str(cwd), "sandbox": "read-only", "approvalPolicy": "never"}
    )["thread"]["id"]
    ready = time.perf_counter() - t0
    samples = []
    for i in range(turns + 1):
        start = time.perf_counter()
        client.request(
            "turn/start",
            {
                "threadId": thread,
                "input": [{"type": "text", "text": f"turn {i}", "text_elements": []}],
            },
        )
        client.wait_completed()
        if i:  # the first turn warms caches on both sides; leave it out
            samples.append(time.perf_counter() - start)
    client.close()
    return samples, ready


def time_controller(
    codex_bin: str, home: Path, state: Path, cwd: Path, turns: int
) -> tuple[list[float], float, float]:
    env = {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home)}
    with ChatController(
        store=SessionStore(state), environ=env, cwd=cwd, codex_bin=codex_bin
    ) as controller:
        t0 = time.perf_counter()
        record = controller.open_session("bench", cwd)
        ready = time.perf_counter() - t0
        samples = []
        for i in range(turns + 1):
            start = time.perf_counter()
            result = controller.submit_turn(record.session_id, f"turn {i}")
            assert result.turn.status == "completed", result.turn
            if i:
                samples.append(time.perf_counter() - start)
        rss = psutil.Process().memory_info().rss
    return samples, ready, rss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    args = parser.parse_args()
    exe = find_codex(args.codex_bin, os.environ).path
    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        home = root / "home"
        write_offline_codex_config(home, mock.base_url)
        # Interleave twice so drift on a busy machine hits both sides alike.
        bare: list[float] = []
        ctrl: list[float] = []
        bare_ready: list[float] = []
        ctrl_ready: list[float] = []
        rss = 0.0
        for rnd in range(2):
            b, br = time_bare(exe, home, root, args.turns)
            c, cr, rss = time_controller(
                args.codex_bin, home, root / f"state{rnd}", root, args.turns
            )
            bare += b
            ctrl += c
            bare_ready.append(br)
            ctrl_ready.append(cr)
    mb, mc = statistics.median(bare), statistics.median(ctrl)
    print(f"codex binary:                 {exe.name} (native: {exe != Path(args.codex_bin)})")
    print(f"warm turns measured:          {len(bare)} per side")
    print(f"bare JSON-RPC turn (median):  {mb * 1000:8.1f} ms")
    print(f"controller turn (median):     {mc * 1000:8.1f} ms")
    print(f"ratio controller/bare:        {mc / mb:8.2f}  (target <= 1.10)")
    print(f"spawn-to-ready bare:          {statistics.median(bare_ready) * 1000:8.1f} ms")
    print(f"spawn-to-ready controller:    {statistics.median(ctrl_ready) * 1000:8.1f} ms")
    print(f"controller process RSS:       {rss / 2**20:8.1f} MiB (excludes the app-server)")


if __name__ == "__main__":
    main()

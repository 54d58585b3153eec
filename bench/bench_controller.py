"""Benchmark: controller overhead vs a bare JSON-RPC client on the same real app-server.

Same run, same pinned codex binary, same loopback mock: warm-turn latency through
`ChatController.submit_turn` vs a minimal newline-JSON client doing `turn/start` and reading
until `turn/completed`. Also spawn-to-ready (spawn → initialize answered → thread started)
and the controller process's RSS. Both sides are warm at once and measured turn by turn in
alternation; the ratio is the median of the pair ratios. Prints only; never asserts.

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
from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.controller.chat_controller import ChatController
from loopx_chat.model_mock.responses import MockResponsesServer
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


def bare_ready(exe: Path, home: Path, cwd: Path) -> tuple[BareClient, str, float]:
    """A bare client with a started thread, and its spawn-to-ready time."""
    t0 = time.perf_counter()
    client = BareClient(exe, home, cwd)
    client.request("initialize", {"clientInfo": {"name": "bench", "version": "0"}})
    client.send({"method": "initialized"})
    thread = client.request(
        "thread/start", {"cwd": str(cwd), "sandbox": "read-only", "approvalPolicy": "never"}
    )["thread"]["id"]
    return client, thread, time.perf_counter() - t0


def bare_turn(client: BareClient, thread: str, text: str) -> float:
    start = time.perf_counter()
    client.request(
        "turn/start",
        {"threadId": thread, "input": [{"type": "text", "text": text, "text_elements": []}]},
    )
    client.wait_completed()
    return time.perf_counter() - start


def controller_turn(controller: ChatController, session_id: str, text: str) -> float:
    start = time.perf_counter()
    result = controller.submit_turn(session_id, text)
    elapsed = time.perf_counter() - start
    assert result.turn.status == "completed", result.turn
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    args = parser.parse_args()
    exe = find_codex(args.codex_bin, os.environ).path
    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        home = root / "home"
        write_offline_codex_config(home, mock.base_url)
        env = {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home)}
        client, thread, ready_bare = bare_ready(exe, home, root)
        with ChatController(
            store=SessionStore(root / "state"), environ=env, cwd=root, codex_bin=args.codex_bin
        ) as controller:
            t0 = time.perf_counter()
            record = controller.open_session("bench", root)
            ready_ctrl = time.perf_counter() - t0
            # Both warm, then turn by turn in alternation (the order flipped every pair), so
            # a slow moment of a noisy machine lands on both sides of the same pair.
            bare_turn(client, thread, "warm-up")
            controller_turn(controller, record.session_id, "warm-up")
            bare: list[float] = []
            ctrl: list[float] = []
            for i in range(args.turns):
                if i % 2:
                    ctrl.append(controller_turn(controller, record.session_id, f"turn {i}"))
                    bare.append(bare_turn(client, thread, f"turn {i}"))
                else:
                    bare.append(bare_turn(client, thread, f"turn {i}"))
                    ctrl.append(controller_turn(controller, record.session_id, f"turn {i}"))
            rss = psutil.Process().memory_info().rss
        client.close()
    mb, mc = statistics.median(bare), statistics.median(ctrl)
    pairs = sorted(c / b for c, b in zip(ctrl, bare, strict=True))
    q1, q3 = pairs[len(pairs) // 4], pairs[(3 * len(pairs)) // 4]
    print(f"codex binary:                 {exe.name} (native: {exe != Path(args.codex_bin)})")
    print(f"warm turns measured:          {len(bare)} pairs, alternating")
    print(f"bare JSON-RPC turn (median):  {mb * 1000:8.1f} ms")
    print(f"controller turn (median):     {mc * 1000:8.1f} ms")
    print(
        f"ratio controller/bare:        {statistics.median(pairs):8.2f}  median of pair ratios "
        f"(quartiles {q1:.2f}-{q3:.2f}; target <= 1.10)"
    )
    print(f"ratio of the medians:         {mc / mb:8.2f}")
    print(f"spawn-to-ready bare:          {ready_bare * 1000:8.1f} ms")
    print(f"spawn-to-ready controller:    {ready_ctrl * 1000:8.1f} ms")
    print(f"controller process RSS:       {rss / 2**20:8.1f} MiB (excludes the app-server)")


if __name__ == "__main__":
    main()

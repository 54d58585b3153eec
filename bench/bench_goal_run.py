"""Benchmark: the control plane's cost on Codex's own goal loop. Prints only.

A run of about 20 continuation turns on the loopback mock, two ways, A/B interleaved, each
on a fresh thread of the same shape (one first turn), as whole processes:

  A. `loopx-chat goal run G --token-budget N` (checks, run record, resume, the goal set
     active, every turn in the ledger, gates polled, tokens compared at the end);
  B. a bare JSON-RPC client (this file with `--bare`): spawn the app-server, initialize,
     `thread/resume`, `thread/goal/set` active with the same budget, read notifications
     until the goal is `budgetLimited` and the last turn completed, close.

Prints the median wall of each, their ratio (target <= 1.05x), every pair's ratio (A and B
of one pair ran back to back, so the machine's drift cancels within a pair), the turns each
saw, and where each side's time went: the median time to codex's first model request (the
start: imports, checks, spawn, handshake, the goal set), the loop (first to last request),
after the last request (the last turn's end, the run's end, the exit), and the CPU of the
process with its codex (`RUSAGE_CHILDREN`: both are waited for).
Run: `.venv/bin/python bench/bench_goal_run.py [--runs N] [--budget N] [--codex-bin PATH]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.binary import find_codex

# B imports only what a bare client needs: the modules that seed each run's thread and goal
# are imported by the parent alone (they cost B about 100 ms before its spawn when this
# file imported them at the top, which flattered A's ratio).

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"
# About 20 turns on the mock: each turn's input grows by codex's ~6 KB goal context.
DEFAULT_BUDGET = 330_000


def bare(home: str, work: str, thread_id: str, budget: int, codex: str) -> None:
    """B: the least a client must do to run codex's loop to its budget."""
    env = {**os.environ, "CODEX_HOME": home}
    proc = AppServerProcess.spawn(
        executable=find_codex(codex, env).path,
        codex_home=Path(home),
        work_dir=Path(work),
        environ=env,
        stderr_log=Path(work) / "bare.stderr.log",
    )
    try:
        info = {"name": "bench", "version": "0"}
        proc.request(
            "initialize", {"clientInfo": info, "capabilities": {"experimentalApi": True}}, 30
        )
        proc.notify("initialized")
        proc.request(
            "thread/resume",
            {"threadId": thread_id, "cwd": work, "sandbox": "read-only", "approvalPolicy": "never"},
            30,
        )
        goal = proc.request("thread/goal/get", {"threadId": thread_id}, 30).get("goal")
        used = goal["tokensUsed"] if goal else 0
        proc.request(
            "thread/goal/set",
            {
                "threadId": thread_id,
                "objective": "count on",
                "status": "active",
                "tokenBudget": used + budget,
                "origin": "user",
            },
            30,
        )
        turns, running, limited, spent = 0, 0, False, 0
        while not (limited and running == 0):
            note = proc.next_notification(60)
            if note is None:
                sys.exit("bare client: no notification for 60 s")
            if note.method == "turn/started":
                running += 1
            elif note.method == "turn/completed":
                running -= 1
                turns += 1
            elif note.method == "thread/goal/updated":
                goal = note.params.get("goal", {})
                limited = goal.get("status") == "budgetLimited"
                spent = int(goal.get("tokensUsed") or used) - used
        print(json.dumps({"turns": turns, "tokens": spent}))
    finally:
        proc.close()


def fresh_session(
    state: Path, home: Path, env: dict[str, str], codex: str, work: Path, goal: str = "bench"
) -> str:
    from loopx_chat.controller.chat_controller import ChatController
    from loopx_chat.state.session_store import SessionStore

    with ChatController(
        store=SessionStore(state),
        environ={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
        cwd=work,
        codex_bin=codex,
    ) as c:
        sid = c.open_session(goal, work).session_id
        c.submit_turn(sid, "mock:text=ready")
        return sid


def offline_home(root: Path, base_url: str) -> Path:
    """A Codex home under `root` whose model is the loopback mock at `base_url`."""
    from loopx_chat.codex.offline_config import write_offline_codex_config

    home = root / "home"
    write_offline_codex_config(home, base_url)
    return home.resolve()


class Sample(NamedTuple):
    """One whole process: its wall, the turns it saw, when the mock heard its first and last
    model request (seconds from its start), and the CPU of it and its codex together."""

    wall: float
    turns: int
    first: float
    last: float
    cpu: float


def timed(argv: list[str], env: dict[str, str], cwd: Path, mock: Any) -> Sample:
    heard = len(mock.requests)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 3):
        sys.exit(f"{argv[2:6]} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    times = [r["received"] - start for r in mock.requests[heard:]] or [wall, wall]
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    return Sample(wall, int(json.loads(done.stdout)["turns"]), times[0], times[-1], cpu)


def phases(samples: list[Sample]) -> str:
    """Median of each phase: to codex's first model request, the loop, after its last one."""
    med = statistics.median
    return (
        f"to first request {med(s.first for s in samples):.3f} s, loop "
        f"{med(s.last - s.first for s in samples):.3f} s, after the last "
        f"{med(s.wall - s.last for s in samples):.3f} s; CPU with its codex "
        f"{med(s.cpu for s in samples):.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET)
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    parser.add_argument("--bare", nargs=4, metavar=("HOME", "WORK", "THREAD", "BUDGET"))
    args = parser.parse_args()
    if args.bare:
        home, work, thread, budget = args.bare
        bare(home, work, thread, int(budget), args.codex_bin)
        return
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_ledger import GoalLedger
    from loopx_chat.model_mock.responses import MockResponsesServer
    from loopx_chat.state.session_store import SessionStore

    # Both sides import their modules from bytecode, as an installed package does (pip
    # compiles it): a shell with PYTHONDONTWRITEBYTECODE would recompile every module of each
    # process, and A imports more of them. The first pair, not counted, writes the caches.
    dropped = ("CODEX_HOME", "LOOPX_CHAT_CODEX_HOME", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        home = offline_home(root, mock.base_url)
        state = root / "state"
        GoalLedger(GateStore(state)).set_goal_state(
            "bench", {"objective": "count on", "acceptance": ["counted"]}
        )
        mock.script(default="mock:text=counting on")
        run_env = {**env, "LOOPX_CHAT_CODEX_HOME": str(home)}
        a_runs: list[Sample] = []
        b_runs: list[Sample] = []
        for i in range(args.runs + 1):  # the first pair warms up and is not counted
            sid_a = fresh_session(state, home, env, args.codex_bin, root)
            sid_b = fresh_session(state, home, env, args.codex_bin, root)
            thread_b = SessionStore(state).load(sid_b).upstream_thread_id
            a = [
                sys.executable,
                "-m",
                "loopx_chat",
                "--state-dir",
                str(state),
                "--codex-bin",
                args.codex_bin,
                "goal",
                "run",
                "bench",
                "--session",
                sid_a,
                "--token-budget",
                str(args.budget),
                "--json",
            ]
            b = [
                sys.executable,
                __file__,
                "--codex-bin",
                args.codex_bin,
                "--bare",
                str(home),
                str(root),
                str(thread_b),
                str(args.budget),
            ]
            order = [(a, a_runs), (b, b_runs)]
            if i % 2:
                order.reverse()
            for argv, runs in order:
                sample = timed(argv, run_env, root, mock)
                if i:
                    runs.append(sample)
        a_med = statistics.median(s.wall for s in a_runs)
        b_med = statistics.median(s.wall for s in b_runs)
        pairs = sorted(a.wall / b.wall for a, b in zip(a_runs, b_runs, strict=True))
        print(f"goal run      : {a_med:.3f} s median wall, turns {[s.turns for s in a_runs]}")
        print(f"bare client   : {b_med:.3f} s median wall, turns {[s.turns for s in b_runs]}")
        print(f"pair ratios   : {' '.join(f'{r:.3f}' for r in pairs)}")
        print(
            f"ratio (A / B) : {a_med / b_med:.3f}x of the medians, "
            f"{statistics.median(pairs):.3f}x median pair  (target <= 1.05x, {args.runs} pairs)"
        )
        print(f"goal run      : {phases(a_runs)}")
        print(f"bare client   : {phases(b_runs)}")


if __name__ == "__main__":
    main()

"""Benchmark: the control plane's cost on Codex's own goal loop. Prints only.

A run of about 20 continuation turns on the loopback mock, two ways, A/B interleaved, each
on a fresh thread of the same shape (one first turn), as whole processes:

  A. `loopx-chat goal run G --token-budget N` (checks, run record, resume, the goal set
     active, every turn in the ledger, gates polled, tokens compared at the end);
  B. a bare JSON-RPC client (this file with `--bare`): spawn the app-server, initialize,
     `thread/resume`, `thread/goal/set` active with the same budget, read notifications
     until the goal is `budgetLimited` and the last turn completed, close.

Prints the median wall of each, their ratio (target <= 1.05x), every pair's ratio (A and B
of one pair ran back to back, so the machine's drift cancels within a pair), and the turns
each saw.
Run: `.venv/bin/python bench/bench_goal_run.py [--runs N] [--budget N] [--codex-bin PATH]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 3):
        sys.exit(f"{argv[2:6]} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, int(json.loads(done.stdout)["turns"])


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
        a_walls, b_walls, a_turns, b_turns = [], [], [], []
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
            order = [(a, a_walls, a_turns), (b, b_walls, b_turns)]
            if i % 2:
                order.reverse()
            for argv, walls, turns in order:
                wall, n = timed(argv, run_env, root)
                if i:
                    walls.append(wall)
                    turns.append(n)
        a_med, b_med = statistics.median(a_walls), statistics.median(b_walls)
        pairs = sorted(a / b for a, b in zip(a_walls, b_walls, strict=True))
        print(f"goal run      : {a_med:.3f} s median wall, turns {a_turns}")
        print(f"bare client   : {b_med:.3f} s median wall, turns {b_turns}")
        print(f"pair ratios   : {' '.join(f'{r:.3f}' for r in pairs)}")
        print(
            f"ratio (A / B) : {a_med / b_med:.3f}x of the medians, "
            f"{statistics.median(pairs):.3f}x median pair  (target <= 1.05x, {args.runs} pairs)"
        )


if __name__ == "__main__":
    main()

"""Benchmark: how far a goal run goes past its limits, against codex's own loop alone.

Issue 34 asks for two figures, each measured here beside codex's own loop driven by a bare
JSON-RPC client (`bench_goal_run.py --bare`: the goal set with the same budget, read to its
end), on the real app-server and the loopback mock, every run on a fresh thread of the same
shape (one first turn):

1. **Budget overshoot** at budgets of 5,000 and 50,000 tokens, on a turn that would go on
   calling tools (the mock answers CALLS tool calls in a row, then words): the tokens spent
   past the budget, and the largest single model response served (a goal run promises to
   stop within the one response in flight; codex checks a goal's budget between turns).
2. **A loop that makes no progress**: every continuation turn answers the same words with
   no tool call, under a budget of NO_PROGRESS_BUDGET: the continuation turns each side
   takes (a goal run pauses it with an owner gate; codex's own loop runs to the budget).

Prints only; never asserts.
Run: `.venv/bin/python bench/bench_goal_limits.py [--runs N] [--calls N] [--codex-bin PATH]`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_goal_run import DEFAULT_CODEX, fresh_session, offline_home

BUDGETS = (5_000, 50_000)
NO_PROGRESS_BUDGET = 200_000


def _goal_run(
    state: Path, codex: str, goal: str, sid: str, budget: int, env: dict[str, str]
) -> Any:
    argv = [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "--codex-bin", codex]
    argv += ["goal", "run", goal, "--session", sid, "--token-budget", str(budget), "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 3, 6):
        sys.exit(f"goal run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    return int(doc["ledger_tokens"]), int(doc["turns"]), str(doc["run"]["ended_by"])


def _bare(home: Path, root: Path, thread: str, budget: int, codex: str, env: dict[str, str]) -> Any:
    argv = [sys.executable, str(Path(__file__).with_name("bench_goal_run.py"))]
    argv += ["--codex-bin", codex, "--bare", str(home), str(root), thread, str(budget)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"bare client failed ({done.returncode}):\n{done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    return int(doc["tokens"]), int(doc["turns"]), "codex (its budget)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=80, help="tool calls the mock scripts")
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    args = parser.parse_args()
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_ledger import GoalLedger
    from loopx_chat.model_mock.responses import MockResponsesServer
    from loopx_chat.state.session_store import SessionStore

    dropped = ("CODEX_HOME", "LOOPX_CHAT_CODEX_HOME")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        home = offline_home(root, mock.base_url)
        state = root / "state"
        run_env = {**env, "LOOPX_CHAT_CODEX_HOME": str(home)}
        goals = itertools.count(1)

        def one(side: str, budget: int, script: list[str], default: str) -> tuple[Any, int]:
            # A goal of its own each time: a run the guard paused leaves its goal an open gate.
            goal = f"bench-{next(goals)}"
            GoalLedger(GateStore(state)).set_goal_state(
                goal, {"objective": "count on", "acceptance": ["counted"]}
            )
            sid = fresh_session(state, home, env, args.codex_bin, root, goal)
            mock.script(*script, default=default)
            first = len(mock.response_tokens)
            if side == "goal run":
                got = _goal_run(state, args.codex_bin, goal, sid, budget, run_env)
            else:
                thread = str(SessionStore(state).load(sid).upstream_thread_id)
                got = _bare(home, root, thread, budget, args.codex_bin, run_env)
            return got, max(mock.response_tokens[first:] or [0])

        calls = ["mock:call=no_such_tool {}"] * args.calls
        print(f"budget overshoot: a turn of {args.calls} tool calls, {args.runs} runs each")
        for budget in BUDGETS:
            for side in ("goal run", "codex alone"):
                over, largest, ends = [], [], set()
                for _ in range(args.runs):
                    (spent, _turns, by), big = one(side, budget, calls, "mock:text=done")
                    over.append(spent - budget)
                    largest.append(big)
                    ends.add(by)
                print(
                    f"  {budget:>6,} {side:<12}: past the budget by "
                    f"{' '.join(f'{o:,}' for o in over)} tokens (median "
                    f"{statistics.median(over) / budget:.0%} of it); largest response "
                    f"{max(largest):,}; ended by {sorted(ends)}"
                )
        print(f"no progress: the same answer each turn, budget {NO_PROGRESS_BUDGET:,}")
        same = ["mock:text=still thinking about it"] * 60
        for side in ("goal run", "codex alone"):
            turns, ends = [], set()
            for _ in range(args.runs):
                (_spent, n, by), _big = one(side, NO_PROGRESS_BUDGET, same, "mock:text=unused")
                turns.append(n)
                ends.add(by)
            print(f"  {side:<12}: {' '.join(map(str, turns))} turns, ended by {sorted(ends)}")


if __name__ == "__main__":
    main()

"""Seed a state dir with N goals through the project's own writers (for bench_status.py).

Each goal gets a goal_state and about 20 gate events (ten gates asked and decided; every
fourth goal keeps its last one open, so it waits on the owner), written by `GoalLedger` and
`GateStore` as `goal set`, `gate request` and `gate resolve` write them. The fsync of each
append is skipped while seeding (the records are byte for byte the same; only the time to
write 60,000 of them changes). A seeded folder is kept under the system temp dir and copied
for each run, so the seeding is paid once per size.

Run: `.venv/bin/python bench/seed_goals.py N [--into DIR]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from unittest import mock

GATES_PER_GOAL = 10


def seed_goals(state: Path, goals: int) -> None:
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_ledger import GoalLedger

    store = GateStore(state)
    ledger = GoalLedger(store)
    with mock.patch("os.fsync", lambda fd: None):
        for i in range(goals):
            goal = f"goal-{i:05d}"
            ledger.set_goal_state(
                goal,
                {
                    "objective": f"Ship part {i} of the release",
                    "acceptance": ["the tests pass", "the docs say what changed"],
                    "token_budget": 200_000,
                },
            )
            for n in range(GATES_PER_GOAL):
                gate = store.request_gate(goal, f"Approve step {n} of part {i}?")
                if n == GATES_PER_GOAL - 1 and i % 4 == 0:
                    continue  # every fourth goal waits on the owner
                store.resolve_gate(goal, gate.gate_id, "approve" if n % 3 else "reject", None)


def seeded(goals: int) -> Path:
    """A seeded state dir for `goals` goals (made once, then reused): copy before use."""
    cache = Path(tempfile.gettempdir()) / f"loopx-bench-goals-{goals}"
    if not (cache / ".seeded").exists():
        shutil.rmtree(cache, ignore_errors=True)
        started = time.perf_counter()
        seed_goals(cache / "state", goals)
        (cache / ".seeded").write_text(f"{time.perf_counter() - started:.1f}\n")
    return cache / "state"


def copy_state(goals: int, into: Path) -> Path:
    target = into / "state"
    shutil.copytree(seeded(goals), target, symlinks=True)
    os.chmod(target, 0o700)
    return target


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("goals", type=int)
    parser.add_argument("--into", type=Path, default=None)
    args = parser.parse_args()
    if args.into:
        args.into.mkdir(parents=True, exist_ok=True)
        print(copy_state(args.goals, args.into))
    else:
        print(seeded(args.goals))


if __name__ == "__main__":
    main()

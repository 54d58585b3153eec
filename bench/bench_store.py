"""Benchmark: listing 1,000 sessions vs a bare `json.load` loop over the same files.

Prints medians and the ratio measured in the same run (target <= 1.3). Never asserts.
Run: `.venv/bin/python bench/bench_store.py [--sessions N] [--repeat R]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from loopx_chat.state.session_records import SessionRecord
from loopx_chat.state.session_store import SessionStore


def bare_json_loop(root: Path) -> int:
    count = 0
    for path in sorted((root / "sessions").glob("*/session.json")):
        with path.open("rb") as handle:
            json.load(handle)
        count += 1
    return count


def median_seconds(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = SessionStore(root)
        for i in range(args.sessions):
            store.create(
                SessionRecord(
                    session_id=f"s{i:05d}",
                    goal_id=f"goal-{i % 17}",
                    created_at="2026-01-01T00:00:00Z",
                    updated_at="2026-01-01T00:00:00Z",
                    codex_home="/Users/me/.codex",
                    upstream_thread_id=f"019a0000-0000-7000-8000-{i:012d}",
                )
            )
        assert len(store.list().sessions) == bare_json_loop(root) == args.sessions
        baseline = median_seconds(lambda: bare_json_loop(root), args.repeat)
        listing = median_seconds(lambda: store.list(), args.repeat)
    print(f"sessions:             {args.sessions}")
    print(f"json.load loop:       {baseline * 1000:8.2f} ms (median of {args.repeat})")
    print(f"SessionStore.list():  {listing * 1000:8.2f} ms (median of {args.repeat})")
    print(f"ratio list/json.load: {listing / baseline:8.2f}  (target <= 1.30)")


if __name__ == "__main__":
    main()

"""Benchmark: building the read-only projection vs `json.loads` of the same input.

Same run, same input: 10,000 fact items of 12 keys each (sessions, events and outcomes with
compact keys and some raw-material and unclassified keys, plus a few gates and decision
results) are serialized once; the baseline parses that JSON, the measured path builds the
projection from the parsed objects. Prints medians and the ratio (target <= 1.0: projecting
is no slower than parsing its input) for the typical mix and for a worst case where no item
is a validation or blocker candidate (and for short values: every text a single word), then
classifier throughput in keys/s with the cache
cleared (cold) and kept (warm). Prints only; never asserts.

Run: `.venv/bin/python bench/bench_projection.py [--items N] [--repeat R]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from loopx_chat.session_runtime import (  # noqa: E402
    build_session_runtime_readonly_projection,
    classify_session_runtime_key,
)
from loopx_chat.session_runtime.keys import clear_key_classification_cache  # noqa: E402

KEYS_PER_ITEM = 12
STATUSES = ("running", "passed", "failed", "blocked", "ok", "waiting", "completed")
ACTORS = ("agent", "runtime", "codex", "tool")
EXTRA_COMPACT = ("tokens_used", "message_count", "log_count", "trace_id", "handoff", "channel")
EXTRA_RAW = ("transcript_path", "stdout_tail", "api_key", "raw_log", "prompt", "diff")
EXTRA_UNCLASSIFIED = ("backlog", "logical_clock", "drawer", "priority_hint", "lane_hint")


def _stamp(rng: random.Random) -> str:
    return f"2026-09-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}Z"


def _sentence(rng: random.Random, words: int) -> str:
    vocab = ("advance", "compact", "segment", "projection", "gate", "status", "retry", "wire")
    return " ".join(rng.choice(vocab) for _ in range(words))


def _fill(item: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    # Top up to exactly 12 keys: mostly compact, some raw, some unclassified.
    while len(item) < KEYS_PER_ITEM:
        roll = rng.random()
        pool = EXTRA_RAW if roll < 0.05 else EXTRA_UNCLASSIFIED if roll < 0.2 else EXTRA_COMPACT
        key = rng.choice(pool)
        if key not in item:
            item[key] = _sentence(rng, 3) if key != "tokens_used" else rng.randint(10, 9000)
    return item


def make_input(count: int, seed: int = 7) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(seed)
    groups: dict[str, list[dict[str, Any]]] = {
        "sessions": [],
        "events": [],
        "outcomes": [],
        "gates": [],
        "decision_results": [],
    }
    for n in range(count):
        roll = n % 10
        if roll < 3:
            item = {
                "session_id": f"s-{n}",
                "run_id": f"r-{n // 7}",
                "kind": "session",
                "status": rng.choice(STATUSES),
                "actor": rng.choice(ACTORS),
                "created_at": _stamp(rng),
                "updated_at": _stamp(rng),
                "summary": _sentence(rng, 8),
            }
            groups["sessions"].append(_fill(item, rng))
        elif roll < 8:
            item = {
                "event_id": f"e-{n}",
                "session_id": f"s-{n - roll}",
                "tool_call_id": f"t-{n}",
                "kind": rng.choice(("tool_call", "validation", "note", "blocker")),
                "status": rng.choice(STATUSES),
                "event_at": _stamp(rng),
                "title": _sentence(rng, 4),
                "result": _sentence(rng, 6),
            }
            groups["events"].append(_fill(item, rng))
        elif roll < 9 or n % 100 != 99:
            item = {
                "outcome_id": f"o-{n}",
                "session_id": f"s-{n - roll}",
                "kind": "outcome",
                "status": rng.choice(STATUSES),
                "created_at": _stamp(rng),
                "validation_summary": _sentence(rng, 6),
                "blocker_summary": _sentence(rng, 5),
                "next_action": _sentence(rng, 5),
            }
            groups["outcomes"].append(_fill(item, rng))
        elif n % 200 == 199:
            item = {
                "gate_id": f"g-{n}",
                "status": "pending",
                "actor": "operator",
                "question": _sentence(rng, 7),
                "blocking": True,
                "created_at": _stamp(rng),
            }
            groups["gates"].append(_fill(item, rng))
        else:
            item = {
                "ref_id": f"d-{n}",
                "recommended_action": _sentence(rng, 6),
                "created_at": _stamp(rng),
            }
            groups["decision_results"].append(_fill(item, rng))
    return groups


def short_values(groups: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The same items with every text a single word: JSON parsing gets cheaper per item while
    the projection's per-key work stays, so this is the harder ratio."""
    rng = random.Random(5)
    words = ("ok", "gate", "retry", "wire", "green", "blocked", "done", "next")

    def short(value: Any) -> Any:
        if isinstance(value, str) and " " in value:
            return rng.choice(words)
        return value

    return {
        k: [{f: short(v) for f, v in item.items()} for item in items] for k, items in groups.items()
    }


def _sample(fn: Callable[[], object]) -> float:
    # GC off while timing, as timeit does: collections triggered by one side's garbage
    # would otherwise land on whichever side happens to run next.
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up: imports, caches, allocator
    return statistics.median(_sample(fn) for _ in range(repeat))


def paired_medians(
    first: Callable[[], object], second: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Medians of two workloads sampled alternately, so machine drift hits both alike."""
    first()
    second()
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        a.append(_sample(first))
        b.append(_sample(second))
    return statistics.median(a), statistics.median(b)


def without_candidates(groups: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The worst case for the scan: no item is a validation or blocker candidate, so every
    predicate runs on every event and outcome. Same item and key counts."""
    renamed = {"result": "result_note", "validation_summary": "summary_note"}
    renamed.update(blocker_summary="blocker_note", validated="validated_note")
    out: dict[str, list[dict[str, Any]]] = {}
    for name, items in groups.items():
        out[name] = []
        for item in items:
            copy = {renamed.get(k, k): v for k, v in item.items()}
            if name in ("events", "outcomes"):
                copy.update(kind="note", status="running")
            out[name].append(copy)
    return out


def key_corpus(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    words = (
        "session",
        "event",
        "tool",
        "call",
        "id",
        "ref",
        "count",
        "at",
        "tokens",
        "used",
        "prompt",
        "message",
        "trace",
        "log",
        "path",
        "api",
        "key",
        "access",
        "token",
        "raw",
        "stdout",
        "summary",
        "status",
        "next",
        "action",
        "catalog",
        "backlog",
        "dialog",
        "output",
        "text",
        "result",
        "blocker",
        "validation",
        "secret",
        "file",
        "local",
        "max",
        "input",
        "completion",
    )
    keys: set[str] = set()
    while len(keys) < count:
        parts = [rng.choice(words) for _ in range(rng.randint(1, 4))]
        style = rng.random()
        if style < 0.6:
            key = "_".join(parts)
        elif style < 0.8:
            key = parts[0] + "".join(p.capitalize() for p in parts[1:])
        else:
            key = "-".join(parts)
        keys.add(key)
    return sorted(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=31)
    parser.add_argument("--keys", type=int, default=2_000, help="distinct keys for throughput")
    args = parser.parse_args()

    typical = make_input(args.items)
    mixes = (
        ("typical mix", typical),
        ("short values", short_values(typical)),
        ("no candidates", without_candidates(typical)),
    )
    for label, groups in mixes:
        payload = json.dumps(groups)
        parsed = json.loads(payload)
        total_items = sum(len(v) for v in parsed.values())

        def parse(payload: str = payload) -> object:
            return json.loads(payload)

        def build(parsed: dict[str, Any] = parsed) -> object:
            return build_session_runtime_readonly_projection(goal_id="bench-goal", **parsed)

        parse_s, build_s = paired_medians(parse, build, args.repeat)
        mb = len(payload) / 1e6
        print(f"[{label}] {total_items} items x {KEYS_PER_ITEM} keys, {mb:.2f} MB JSON")
        print(f"  json.loads median:       {parse_s * 1e3:8.2f} ms")
        print(f"  projection build median: {build_s * 1e3:8.2f} ms")
        print(f"  ratio build/parse:       {build_s / parse_s:8.2f}  (target <= 1.00)")

    corpus = key_corpus(args.keys)

    def cold() -> object:
        clear_key_classification_cache()
        return [classify_session_runtime_key(k) for k in corpus]

    def warm() -> object:
        return [classify_session_runtime_key(k) for k in corpus]

    cold_s = median_seconds(cold, args.repeat)
    warm()
    warm_s = median_seconds(warm, args.repeat)
    print(f"classifier cold: {len(corpus) / cold_s:12,.0f} keys/s ({len(corpus)} distinct keys)")
    print(f"classifier warm: {len(corpus) / warm_s:12,.0f} keys/s")


if __name__ == "__main__":
    main()

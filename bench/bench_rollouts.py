"""Benchmark: rollout host facts (full scan, incremental rescan, peak memory). Prints only.

For each home (default: 500 MB in 2,000 rollouts, 1 GB in 4,000 and 1 GB in 2,000; `--size-mb N`
for one size at `--files-per-mb` (4) files per MB, `--quick` for 100 MB) it writes a synthetic
CODEX_HOME of rollout files into a temp dir, then in the same run:

  * full scan vs a plain buffered read loop over the same files (1 MiB reads), medians of
    `--repeat` alternating samples with a fresh index each time (target ratio >= 0.5);
    `for line in file` over the same bytes is printed too, for scale;
  * an incremental rescan after appending one turn to 20 files, by the same scanner (its index
    cached in memory) and by a fresh scanner (index loaded from disk), as % of the full scan
    (target <= 2 %);
  * peak RSS (VmHWM, or ru_maxrss off Linux) of a child process doing one full scan;
  * `loopx-chat codex facts --json` cold and warm vs npm `ccusage` on the same home, with a
    per-thread token cross-check (`bench/ccusage_rows.py`; `--no-ccusage` skips them).

The record mix follows codex 0.171 rollouts: a session_meta with a 12 KB instruction blob, and
per turn task_started, world_state, turn_context, the user message, item_completed events,
reasoning, a tool call and its 12 KB output, the reply, token records and the ending. About
85 % of turns complete, 7 % fail, 5 % are interrupted, and 3 % of files end mid-turn. The data
is deleted afterwards.
Run: `.venv/bin/python bench/bench_rollouts.py [--size-mb N] [--quick] [--files-per-mb F]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loopx_chat.codex.rollouts import RolloutScanner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ccusage_rows import ccusage_rows

_CHUNK = 1 << 20
_FILES_PER_MB = 4
_WORDS = [
    *("the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "was", "on"),
    *("be", "by", "this", "are", "or", "from", "at", "an", "which", "build", "test", "file"),
    *("line", "value", "error", "change", "code", "return", "check", "path", "module", "def"),
]


# ---------------------------------------------------------------------------------------------
# Synthetic home
# ---------------------------------------------------------------------------------------------


def _blob(size: int, seed: int) -> str:
    rnd = random.Random(seed)
    words: list[str] = []
    length = 0
    while length < size:
        word = rnd.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def _template(kind: str, payload: dict[str, Any], *, ordinal: bool = True) -> bytes:
    """One compact record with %(...)b slots for the values that change from line to line."""
    record: dict[str, Any] = {"timestamp": "@TS@"}
    if ordinal:
        record["ordinal"] = "@ORD@"
    record.update({"type": kind, "payload": payload})
    text = json.dumps(record, separators=(",", ":")).replace("%", "%%")
    text = text.replace('"@ORD@"', "%(ORD)b")
    for key in ("TS", "TID", "TURN", "MODEL"):
        text = text.replace(f"@{key}@", f"%({key})b")
    return text.encode()


def _templates(ordinal: bool) -> dict[str, bytes]:
    usage = {
        "input_tokens": 10794,
        "cached_input_tokens": 9000,
        "cache_write_input_tokens": 0,
        "output_tokens": 310,
        "reasoning_output_tokens": 64,
        "total_tokens": 11104,
    }
    reply = _blob(4000, 5)
    t = {
        "meta": (
            "session_meta",
            {
                "session_id": "@TID@",
                "id": "@TID@",
                "timestamp": "@TS@",
                "cwd": "/home/user/project",
                "originator": "codex_vscode",
                "cli_version": "0.171.0",
                "source": "vscode",
                "model_provider": "openai",
                "base_instructions": {"text": _blob(12000, 1)},
                "history_mode": "paginated",
            },
        ),
        "started": (
            "event_msg",
            {
                "type": "task_started",
                "turn_attribution": {"turn_id": "@TURN@", "root_turn_id": "@TURN@"},
                "turn_id": "@TURN@",
                "root_turn_id": "@TURN@",
                "started_at": 1795939403,
                "model_context_window": 258400,
                "collaboration_mode_kind": "default",
            },
        ),
        "world": (
            "world_state",
            {"full": True, "state": {"agents_md": {}, "instructions": _blob(6000, 6)}},
        ),
        "context": (
            "turn_context",
            {
                "turn_id": "@TURN@",
                "cwd": "/home/user/project",
                "approval_policy": "on-request",
                "sandbox_policy": {"type": "workspace-write"},
                "model": "@MODEL@",
                "collaboration_mode": {"mode": "default", "settings": {"model": "@MODEL@"}},
                "summary": "auto",
            },
        ),
        "user": (
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": _blob(900, 2)}],
            },
        ),
        "user_event": (
            "event_msg",
            {
                "type": "item_completed",
                "thread_id": "@TID@",
                "turn_id": "@TURN@",
                "item": {"type": "UserMessage", "content": [{"type": "text", "text": "fix it"}]},
            },
        ),
        "reasoning": (
            "response_item",
            {"type": "reasoning", "summary": [], "encrypted_content": _blob(3000, 3)},
        ),
        "call": (
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command":["bash","-lc","pytest -q"]}',
                "call_id": "call_1",
            },
        ),
        "output": (
            "response_item",
            {"type": "function_call_output", "call_id": "call_1", "output": _blob(12000, 4)},
        ),
        "reply": (
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply}],
            },
        ),
        "reply_event": (
            "event_msg",
            {
                "type": "item_completed",
                "thread_id": "@TID@",
                "turn_id": "@TURN@",
                "item": {"type": "AgentMessage", "content": [{"type": "Text", "text": reply}]},
            },
        ),
        "usage": (
            "token_usage_record",
            {
                "thread_id": "@TID@",
                "turn_id": "@TURN@",
                "usage": usage,
                "turn_token_usage": usage,
                "thread_token_usage": usage,
            },
        ),
        "tokens": (
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": usage, "last_token_usage": usage},
                "rate_limits": {"primary": {"used_percent": 12.0, "window_minutes": 300}},
            },
        ),
        "completed": (
            "event_msg",
            {
                "type": "task_complete",
                "turn_id": "@TURN@",
                "last_agent_message": reply[:1500],
                "started_at": 1795939403,
                "completed_at": 1795939460,
                "duration_ms": 57000,
            },
        ),
        "failed": (
            "event_msg",
            {
                "type": "task_complete",
                "turn_id": "@TURN@",
                "last_agent_message": None,
                "error": {
                    "message": "We're currently experiencing high demand.",
                    "codex_error_info": "internal_server_error",
                },
                "completed_at": 1795939460,
            },
        ),
        "aborted": (
            "event_msg",
            {
                "type": "turn_aborted",
                "turn_id": "@TURN@",
                "reason": "interrupted",
                "completed_at": 1795939460,
            },
        ),
    }
    return {name: _template(kind, payload, ordinal=ordinal) for name, (kind, payload) in t.items()}


_TURN = ("started", "world", "context", "user", "user_event", "reasoning", "call", "output")
_TURN_END = ("reasoning", "reply", "reply_event", "usage", "tokens")
_ENDING = {"completed": "completed", "failed": "failed", "interrupted": "aborted"}


def _timestamp(file_no: int, ordinal: int) -> bytes:
    day = 1 + file_no % 28
    clock = f"{ordinal // 3600 % 24:02d}:{ordinal // 60 % 60:02d}:{ordinal % 60:02d}"
    return f"2026-11-{day:02d}T{clock}.000Z".encode()


class Writer:
    """Writes rollout files fast: every line is a template filled with a few ids."""

    def __init__(self, seed: int = 7) -> None:
        self.rnd = random.Random(seed)
        self.compact = _templates(ordinal=True)
        self.legacy = _templates(ordinal=False)  # older rollouts carry no `ordinal`

    def turn(self, file_no: int, turn_no: int, outcome: str, legacy: bool, first: int) -> bytes:
        """One turn's lines; an "unfinished" turn stops after its tool output (a killed turn)."""
        templates = self.legacy if legacy else self.compact
        turn_id = f"019a{file_no:04x}-{turn_no:04x}-7000-8000-{self.rnd.getrandbits(48):012x}"
        values = {
            b"TID": self.thread_id(file_no).encode(),
            b"TURN": turn_id.encode(),
            b"MODEL": b"gpt-5-codex" if turn_no % 5 == 4 else b"gpt-5",
        }
        names = _TURN
        if outcome != "unfinished":
            names += (*_TURN_END, _ENDING[outcome])
        lines = []
        for offset, name in enumerate(names):
            ordinal = first + offset
            values[b"ORD"] = str(ordinal).encode()
            values[b"TS"] = _timestamp(file_no, ordinal)
            lines.append(templates[name] % values)
        return b"\n".join(lines) + b"\n"

    @staticmethod
    def thread_id(file_no: int) -> str:
        return f"019a{file_no:04x}-0000-7000-8000-{file_no:012x}"

    def outcome(self) -> str:
        roll = self.rnd.random()
        return "completed" if roll < 0.88 else "failed" if roll < 0.95 else "interrupted"

    def home(self, root: Path, size_mb: int, files: int) -> tuple[list[Path], int]:
        """Write about `size_mb` MB in `files` rollouts under `root`; (paths by number, bytes)."""
        files = max(1, files)
        per_file = size_mb * 1_000_000 // files
        paths: list[Path] = []
        total = 0
        for file_no in range(files):
            legacy = file_no % 20 == 19
            templates = self.legacy if legacy else self.compact
            folder = root / "sessions" / "2026" / "11" / f"{1 + file_no % 28:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            values = {
                b"TID": self.thread_id(file_no).encode(),
                b"TS": b"2026-11-01T00:00:00.000Z",
                b"ORD": b"0",
            }
            parts = [templates["meta"] % values, b"\n"]
            size = len(parts[0]) + 1
            turn_no = 0
            while size + 20_000 < per_file:
                last = size + 40_000 > per_file
                outcome = "unfinished" if last and file_no % 33 == 0 else self.outcome()
                data = self.turn(file_no, turn_no, outcome, legacy, 1 + turn_no * 20)
                parts.append(data)
                size += len(data)
                turn_no += 1
            path = folder / f"rollout-2026-11-01T00-00-00-{self.thread_id(file_no)}.jsonl"
            path.write_bytes(b"".join(parts))
            paths.append(path)
            total += size
        return paths, total


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


def plain_read(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                total += len(chunk)
    return total


def line_read(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with path.open("rb") as handle:
            for line in handle:
                total += len(line)
    return total


def full_scan(home: Path, index: Path) -> float:
    if index.exists():
        index.unlink()
    start = time.perf_counter()
    RolloutScanner(home, index).scan()
    return time.perf_counter() - start


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _peak_rss_kib() -> int:
    """This process's peak RSS. VmHWM starts afresh at exec, unlike ru_maxrss on Linux, which
    carries the parent's peak over fork and exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS


def child_scan(home: str, index: str) -> None:
    """Run in a fresh process: one full scan, then print peak RSS figures as JSON."""
    before = _peak_rss_kib()
    result = RolloutScanner(Path(home), Path(index)).scan()
    after = _peak_rss_kib()
    print(
        json.dumps(
            {
                "peak_kib_before": before,
                "peak_kib": after,
                "threads": len(result.threads),
                "bytes": result.bytes_read,
            }
        )
    )


def measure(
    size_mb: int, files: int, repeat: int, tmp: Path, *, with_ccusage: bool = True
) -> dict[str, Any]:
    home = tmp / f"home-{size_mb}-{files}"
    writer = Writer()
    started = time.perf_counter()
    paths, total = writer.home(home, size_mb, files)
    files = len(paths)
    generated = time.perf_counter() - started
    index = tmp / f"state-{size_mb}-{files}" / "rollout-index.json"
    mb = total / 1e6
    print(f"\n== home of {mb:.0f} MB, {files} rollouts (generated in {generated:.1f} s)")

    reads: list[float] = []
    scans: list[float] = []
    plain_read(paths)  # warm the page cache once for both sides
    for _ in range(repeat):
        reads.append(timed(lambda: plain_read(paths)))
        scans.append(full_scan(home, index))
    lines = statistics.median(timed(lambda: line_read(paths)) for _ in range(min(repeat, 3)))
    read_s, scan_s = statistics.median(reads), statistics.median(scans)
    print(f"plain read loop (1 MiB): {read_s * 1000:8.1f} ms  {mb / read_s:8.0f} MB/s")
    print(f"for line in file:        {lines * 1000:8.1f} ms  {mb / lines:8.0f} MB/s")
    print(f"full scan (fresh index): {scan_s * 1000:8.1f} ms  {mb / scan_s:8.0f} MB/s")
    print(f"ratio scan/read:         {read_s / scan_s:8.2f}x  (target >= 0.5x)")
    print(f"ratio scan/line loop:    {lines / scan_s:8.2f}x")

    # Incremental: the scanner that did the last full scan keeps its index in memory.
    scanner = RolloutScanner(home, index)
    scanner.scan()
    rnd = random.Random(11)
    appended_ok = True

    def append_round(round_no: int) -> int:
        appended = 0
        for file_no in rnd.sample(range(files), 20):
            data = writer.turn(file_no, 1000 + round_no, "completed", False, 10**6 + round_no)
            with paths[file_no].open("ab") as handle:
                handle.write(data)
            appended += len(data)
        return appended

    warm: list[float] = []
    cold: list[float] = []
    for round_no in range(2 * repeat):
        appended = append_round(round_no)
        fresh = round_no >= repeat  # first the long-lived scanner, then new ones
        start = time.perf_counter()
        result = (RolloutScanner(home, index) if fresh else scanner).scan()
        (cold if fresh else warm).append(time.perf_counter() - start)
        appended_ok = appended_ok and result.bytes_read == appended
    warm_s, cold_s = statistics.median(warm), statistics.median(cold)
    index_kb = index.stat().st_size / 1024
    print(
        f"rescan, 1 turn appended to 20 files: same scanner {warm_s * 1000:.1f} ms "
        f"({100 * warm_s / scan_s:.2f} % of full), fresh scanner {cold_s * 1000:.1f} ms "
        f"({100 * cold_s / scan_s:.2f} % of full)  (target <= 2 %)"
    )
    print(f"rescans read exactly the appended bytes: {appended_ok}; index {index_kb:.0f} KiB")

    done = subprocess.run(
        [sys.executable, __file__, "--child-scan", str(home), str(tmp / "child-index.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    child = json.loads(done.stdout)
    print(
        f"peak RSS of a full scan in a fresh process: {child['peak_kib'] / 1024:.1f} MiB "
        f"(after imports {child['peak_kib_before'] / 1024:.1f} MiB)"
    )
    versus = ccusage_rows(home, tmp, append_round, repeat) if with_ccusage else None
    shutil.rmtree(home)
    shutil.rmtree(index.parent)
    (tmp / "child-index.json").unlink(missing_ok=True)
    return {
        "mb": mb,
        "files": files,
        "read_mbs": mb / read_s,
        "line_mbs": mb / lines,
        "scan_mbs": mb / scan_s,
        "ratio": read_s / scan_s,
        "warm_pct": 100 * warm_s / scan_s,
        "cold_pct": 100 * cold_s / scan_s,
        "rss_mib": child["peak_kib"] / 1024,
        "rss_base_mib": child["peak_kib_before"] / 1024,
        "ccusage": versus,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, action="append", help="home size (repeatable)")
    parser.add_argument("--quick", action="store_true", help="one small home (100 MB)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--files-per-mb", type=int, default=_FILES_PER_MB, help="rollouts per MB of home"
    )
    parser.add_argument(
        "--no-ccusage", action="store_true", help="skip the rows against npm ccusage"
    )
    parser.add_argument("--child-scan", nargs=2, metavar=("HOME", "INDEX"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_scan:
        child_scan(*args.child_scan)
        return
    per_mb = max(1, args.files_per_mb)
    if args.size_mb:
        homes = [(size, size * per_mb) for size in args.size_mb]
    elif args.quick:
        homes = [(100, 100 * per_mb)]
    else:
        # Twice the bytes in twice the files, then twice the bytes in the same files: memory
        # may grow with the number of threads (their facts are the result), never with bytes.
        homes = [(500, 500 * per_mb), (1000, 1000 * per_mb), (1000, 500 * per_mb)]
    with tempfile.TemporaryDirectory(prefix="bench-rollouts-") as name:
        tmp = Path(name)
        free_mb = shutil.disk_usage(tmp).free // 1_000_000
        # One home at a time is on disk, plus its index; keep a margin for everything else.
        fitting = [home for home in homes if home[0] * 1.1 + 500 < free_mb]
        if fitting != homes:
            skipped = sorted({size for size, _ in homes} - {size for size, _ in fitting})
            print(f"only {free_mb} MB free in {tmp}: skipping sizes {skipped}")
        rows = [
            measure(size, files, args.repeat, tmp, with_ccusage=not args.no_ccusage)
            for size, files in fitting
        ]
    print(
        "\n| home | files | read MB/s | scan MB/s | scan/read | line loop MB/s | rescan % "
        "(same / fresh scanner) | peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['mb']:.0f} MB | {row['files']} | {row['read_mbs']:.0f} "
            f"| {row['scan_mbs']:.0f} | {row['ratio']:.2f}x | {row['line_mbs']:.0f} "
            f"| {row['warm_pct']:.2f} / "
            f"{row['cold_pct']:.2f} | {row['rss_mib']:.1f} MiB |"
        )
    versus = [row for row in rows if row["ccusage"]]
    if versus:
        print("\n| home | facts cold vs ccusage (CPU) | facts warm vs ccusage | totals agree |")
        print("|---|---|---|---|")
        for row in versus:
            c = row["ccusage"]
            print(
                f"| {row['mb']:.0f} MB | {c['cold_ratio']:.2f}x ({c['cold_ms']:.0f} / "
                f"{c['ccusage_ms']:.0f} ms) | {c['warm_ratio']:.2f}x | {c['agree']} |"
            )
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} CPUs; generated data deleted")


if __name__ == "__main__":
    main()

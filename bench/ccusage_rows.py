"""The `ccusage` rows of bench_rollouts: `loopx-chat codex facts --json` vs the tool users run.

Installs npm `ccusage` at a pinned version (with its native linux-x64 / darwin build) into
`tools/ccusage/` the first time; if npm cannot install it, says so and the rows are skipped.
Then, with loopx_chat byte-compiled first (as an install is), on the same synthetic home,
whole processes, A/B interleaved, CPU time of each child
(user + system from the OS accounting), median of the pair ratios:

  * cold: `codex facts --json` with no index vs `ccusage codex session --json --offline`;
  * warm: index present and one turn appended to 20 files, vs the same `ccusage` run;
  * a correctness cross-check: per thread, our token totals equal ccusage's.

Never asserts: prints figures and the check's verdict.
"""

from __future__ import annotations

import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CCUSAGE_VERSION = "20.0.24"  # 20.0.26 shipped no linux-x64 build
CCUSAGE_DIR = ROOT / "tools" / "ccusage"
LOOPX = [sys.executable, "-m", "loopx_chat"]


def compile_package() -> None:
    """Byte-compile loopx_chat as an install does, so no run pays for compiling our modules.

    Our shells set PYTHONDONTWRITEBYTECODE, under which every `codex facts` process would
    compile each module it imports afresh: a cost no installed copy has.
    """
    import loopx_chat

    compileall.compile_dir(Path(loopx_chat.__file__).parent, quiet=1)


def ensure_ccusage() -> Path | None:
    exe = CCUSAGE_DIR / "node_modules" / ".bin" / "ccusage"
    stamp = CCUSAGE_DIR / f".installed-{CCUSAGE_VERSION}"
    if exe.exists() and stamp.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None:
        print("ccusage rows skipped: npm is not on PATH")
        return None
    CCUSAGE_DIR.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(CCUSAGE_DIR),
            "--no-package-lock",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            f"ccusage@{CCUSAGE_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or not exe.exists():
        print(f"ccusage rows skipped: npm install ccusage@{CCUSAGE_VERSION} failed")
        return None
    stamp.touch()
    return exe


def _cpu_of(argv: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, env=env, capture_output=True, timeout=600, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.stdout


def _paired(
    a: Callable[[], tuple[float, bytes]], b: Callable[[], tuple[float, bytes]], runs: int
) -> tuple[float, float, float, bytes, bytes]:
    """(median A cpu, median B cpu, median of A/B pair ratios, last A output, last B output)."""
    a_cpu: list[float] = []
    b_cpu: list[float] = []
    out_a = out_b = b""
    for _ in range(runs):
        cpu, out_a = a()
        a_cpu.append(cpu)
        cpu, out_b = b()
        b_cpu.append(cpu)
    ratios = [x / y for x, y in zip(a_cpu, b_cpu, strict=True) if y > 0]
    return (
        statistics.median(a_cpu),
        statistics.median(b_cpu),
        statistics.median(ratios),
        out_a,
        out_b,
    )


def cross_check(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[int, list[str]]:
    """Threads compared, and those whose totals differ."""
    by_thread: dict[str, dict[str, Any]] = {}
    for session in theirs.get("sessions", []):
        for thread_id in ours["threads"]:
            if thread_id in str(session.get("sessionFile", "")):
                by_thread[thread_id] = session
    differ = []
    for thread_id, facts in ours["threads"].items():
        mine = facts["tokens"]
        other = by_thread.get(thread_id)
        if other is None:
            differ.append(f"{thread_id}: not in ccusage's output")
            continue
        pairs = {
            "total": (mine["total_tokens"], other.get("totalTokens")),
            "output": (mine["output_tokens"], other.get("outputTokens")),
            "reasoning": (mine["reasoning_output_tokens"], other.get("reasoningOutputTokens")),
            "cached": (mine["cached_input_tokens"], other.get("cacheReadTokens")),
            # ccusage reports input without the cached part
            "input": (
                mine["input_tokens"],
                (other.get("inputTokens") or 0) + (other.get("cacheReadTokens") or 0),
            ),
        }
        wrong = [f"{k} {a} vs {b}" for k, (a, b) in pairs.items() if a != b]
        if wrong:
            differ.append(f"{thread_id}: {', '.join(wrong)}")
    return len(ours["threads"]), differ


def ccusage_rows(
    home: Path, tmp: Path, append_20: Callable[[int], int], runs: int
) -> dict[str, Any] | None:
    exe = ensure_ccusage()
    if exe is None:
        return None
    compile_package()
    unset = ("CODEX_HOME", "LOOPX_CHAT_CODEX_HOME", "PYTHONDONTWRITEBYTECODE")
    base = {k: v for k, v in os.environ.items() if k not in unset}
    env = {**base, "CODEX_HOME": str(home), "LOOPX_CHAT_CODEX_HOME": str(home)}
    theirs = [str(exe), "codex", "session", "--json", "--offline"]
    state = tmp / "ccusage-state"

    def facts_cold() -> tuple[float, bytes]:
        shutil.rmtree(state, ignore_errors=True)
        return _cpu_of([*LOOPX, "--state-dir", str(state), "codex", "facts", "--json"], env)

    def facts_warm() -> tuple[float, bytes]:
        return _cpu_of([*LOOPX, "--state-dir", str(state), "codex", "facts", "--json"], env)

    def ccusage() -> tuple[float, bytes]:
        return _cpu_of(theirs, env)

    cold_a, cold_b, cold_ratio, ours_raw, theirs_raw = _paired(facts_cold, ccusage, runs)
    checked, differ = cross_check(json.loads(ours_raw), json.loads(theirs_raw))
    warm_rounds = iter(range(10_000))

    def warm_after_append() -> tuple[float, bytes]:
        append_20(next(warm_rounds) + 500)
        return facts_warm()

    facts_warm()  # the index is present from here on
    warm_a, warm_b, warm_ratio, ours_raw, theirs_raw = _paired(warm_after_append, ccusage, runs)
    warm_checked, warm_differ = cross_check(json.loads(ours_raw), json.loads(theirs_raw))
    print(
        f"codex facts cold vs ccusage: {cold_a * 1000:.0f} ms vs {cold_b * 1000:.0f} ms CPU, "
        f"ratio {cold_ratio:.2f}x (target <= 1.0x)"
    )
    print(
        f"codex facts warm (20 files appended) vs ccusage: {warm_a * 1000:.0f} ms vs "
        f"{warm_b * 1000:.0f} ms CPU, ratio {warm_ratio:.2f}x (target <= 0.3x)"
    )
    print(
        f"token totals per thread equal ccusage's: {checked - len(differ)}/{checked} (cold), "
        f"{warm_checked - len(warm_differ)}/{warm_checked} (after appends)"
    )
    for line in (differ + warm_differ)[:5]:
        print(f"  differs: {line}")
    return {
        "cold_ratio": cold_ratio,
        "warm_ratio": warm_ratio,
        "cold_ms": cold_a * 1000,
        "ccusage_ms": cold_b * 1000,
        "agree": not differ and not warm_differ,
    }

"""Benchmark: what a user pays per command, against what they would otherwise run. Prints only.

Whole processes, A/B interleaved, the median of the pair ratios (wall and CPU time from the
OS accounting of each finished child):

  1. `loopx-chat --version` and `loopx-chat status --json` (empty state, empty home) vs
     `python -c pass` with the same interpreter (target <= 3x);
  2. `loopx-chat chat send` (a new process: resume the thread, one mock turn) vs
     `codex exec resume <thread> <msg>` with the native codex binary, on the same loopback
     mock and the same Codex home (target <= 1.5x);
  3. in one run, interleaved A B C: `chat send` through a running `loopx-chat serve` whose
     app-server holds the thread warm (A, target <= 0.75x), `codex exec resume` (B), and the
     direct `chat send` (C, `--direct`, its own session on the same home; target <= 1.5x),
     each ratio taken pair by pair against B. Plus the delegating client's import time.

Run: `.venv/bin/python bench/bench_cli.py [--runs N] [--codex-bin PATH]`.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from loopx_chat.codex.binary import find_codex
from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.model_mock.responses import MockResponsesServer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"
LOOPX = [sys.executable, "-m", "loopx_chat"]


def run(argv: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    """(wall s, cpu s) of one whole process; a failure stops the bench with its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(list(argv), env=env, cwd=cwd, capture_output=True, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{argv[:6]} failed ({done.returncode}):\n{done.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paired(
    name: str, a: list[str], b: list[str], env: dict[str, str], runs: int, **kw: object
) -> None:
    run(a, env, **kw)  # type: ignore[arg-type]  # warm-up, not counted
    run(b, env, **kw)  # type: ignore[arg-type]
    a_w, a_c, b_w, b_c = [], [], [], []
    for _ in range(runs):
        w, c = run(a, env, **kw)  # type: ignore[arg-type]
        a_w.append(w)
        a_c.append(c)
        w, c = run(b, env, **kw)  # type: ignore[arg-type]
        b_w.append(w)
        b_c.append(c)
    wall = statistics.median(x / y for x, y in zip(a_w, b_w, strict=True))
    cpu = statistics.median(x / y for x, y in zip(a_c, b_c, strict=True) if y > 0)
    a_ms, b_ms = statistics.median(a_w) * 1000, statistics.median(b_w) * 1000
    print(f"{name:<44} {a_ms:7.0f} ms vs {b_ms:6.0f} ms   wall {wall:5.2f}x   cpu {cpu:5.2f}x")


def triple(
    name: str, a: list[str], b: list[str], c: list[str], env: dict[str, str], runs: int, cwd: Path
) -> None:
    """A B C A B C ...: A/B and C/B pair by pair, so both ratios come from the same run."""
    for argv in (a, b, c):
        run(argv, env, cwd)  # warm-up, not counted
    walls: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    cpus: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    for _ in range(runs):
        for key, argv in (("a", a), ("b", b), ("c", c)):
            w, cpu = run(argv, env, cwd)
            walls[key].append(w)
            cpus[key].append(cpu)
    b_ms = statistics.median(walls["b"]) * 1000
    for key, label in (("a", f"{name} (served)"), ("c", f"{name} (--direct)")):
        wall = statistics.median(x / y for x, y in zip(walls[key], walls["b"], strict=True))
        cpu = statistics.median(x / y for x, y in zip(cpus[key], cpus["b"], strict=True) if y > 0)
        a_ms = statistics.median(walls[key]) * 1000
        print(f"{label:<44} {a_ms:7.0f} ms vs {b_ms:6.0f} ms   wall {wall:5.2f}x   cpu {cpu:5.2f}x")


def chat_new(loopx: list[str], work: Path, env: dict[str, str]) -> dict[str, str]:
    """A session opened with one turn: its `--json` document (session_id, thread_id)."""
    opened = subprocess.run(
        [*loopx, "chat", "new", "--goal", "bench", "--cwd", str(work), "--json", "hi"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    doc: dict[str, str] = json.loads(opened.stdout)
    return doc


def serve_until_ready(loopx: list[str], state: Path, env: dict[str, str]) -> subprocess.Popen:  # type: ignore[type-arg]
    from loopx_chat.state.service_runtime import read_runtime

    proc = subprocess.Popen(
        [*loopx, "--state-dir", str(state), "serve", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runtime = read_runtime(state)
        if runtime is not None and runtime.pid == proc.pid:
            return proc
        time.sleep(0.05)
    proc.kill()
    sys.exit("loopx-chat serve did not start")


def import_ms(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall ms of the process under `-X importtime`, ms spent importing, modules loaded)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True
    )
    wall = (time.perf_counter() - start) * 1000
    own = [
        line.split(":", 1)[1].split("|")[0].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]
    micros = [int(field) for field in own if field.isdigit()]  # the header row is not
    return wall, sum(micros) / 1000, len(micros)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    args = parser.parse_args()
    # What a user's second run pays: bytecode compiled and cached, as an install leaves it
    # (an editable checkout compiles on first import, unless PYTHONDONTWRITEBYTECODE is set).
    compileall.compile_dir(ROOT / "loopx_chat", quiet=1)
    unset = ("CODEX_HOME", "LOOPX_CHAT_CODEX_HOME", "PYTHONDONTWRITEBYTECODE")
    base = {k: v for k, v in os.environ.items() if k not in unset}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as name:
        root = Path(name)
        empty_home = root / "empty-home"
        empty_home.mkdir()
        env = {**base, "LOOPX_CHAT_CODEX_HOME": str(empty_home)}
        bare = [sys.executable, "-c", "pass"]
        print("== command start (target <= 3x python -c pass)")
        paired(
            "loopx-chat --version vs python -c pass", [*LOOPX, "--version"], bare, env, args.runs
        )
        state = root / "empty-state"
        status = [*LOOPX, "--state-dir", str(state), "status", "--json"]
        paired("loopx-chat status --json vs python -c pass", status, bare, env, args.runs)

        print("== one chat turn (target <= 1.5x codex exec resume)")
        with MockResponsesServer() as mock:
            home = root / "home"
            write_offline_codex_config(home, mock.base_url)
            work = root / "work"
            work.mkdir()
            env = {**base, "LOOPX_CHAT_CODEX_HOME": str(home)}
            loopx = [*LOOPX, "--state-dir", str(root / "state"), "--codex-bin", args.codex_bin]
            doc = chat_new(loopx, work, env)
            native = str(find_codex(args.codex_bin, env).path)
            codex_env = {**env, "CODEX_HOME": str(home)}
            paired(
                "loopx-chat chat send vs codex exec resume",
                [*loopx, "chat", "send", doc["session_id"], "next"],
                [native, "exec", "--skip-git-repo-check", "resume", doc["thread_id"], "next"],
                codex_env,
                max(3, args.runs // 2),
                cwd=work,
            )

            print(
                "== one chat turn through a running service, thread warm "
                "(target <= 0.75x; --direct <= 1.5x)"
            )
            served_state = root / "served-state"
            service = serve_until_ready([*LOOPX, "--codex-bin", args.codex_bin], served_state, env)
            try:
                served = [*LOOPX, "--state-dir", str(served_state), "--codex-bin", args.codex_bin]
                served_doc = chat_new(served, work, env)
                send = [*served, "chat", "send", served_doc["session_id"], "next"]
                triple(
                    "loopx-chat chat send vs codex exec resume",
                    send,
                    [native, "exec", "--skip-git-repo-check", "resume", doc["thread_id"], "next"],
                    [*loopx, "--direct", "chat", "send", doc["session_id"], "next"],
                    codex_env,
                    max(3, args.runs // 2),
                    cwd=work,
                )
                wall, imports, modules = import_ms(send, env)
                print(
                    f"delegated chat send under -X importtime: {wall:.0f} ms wall, "
                    f"{imports:.1f} ms in imports, {modules} modules"
                )
            finally:
                service.terminate()
                service.wait(timeout=30)
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()

"""Benchmark: the service's memory over many open-turn-close cycles.

A real `loopx-chat serve` (the pinned codex, the loopback mock model, `--max-warm 4`) is
driven through N cycles: open a session on one goal (a new Codex thread), run one turn to
its end, and leave it, so the least recently used idle thread is closed when the fifth is
opened. The page's status is read every cycle, as an open page would. Every 50 cycles it
prints the service process's memory (the app-servers are other processes): `VmRSS`, its
anonymous part, how much of that is glibc's main heap (`[heap]`) and its other malloc
arenas (anonymous mappings aligned to 64 MiB), and the process's thread count; at the end,
the growth after the first 100 cycles.

It also asks each service (a `sitecustomize` the bench puts on its `PYTHONPATH`) for the
bytes of its live small Python objects (`sys._debugmallocstats`).

`--baseline REF` runs REF's service beside this checkout's, cycle by cycle in alternation
against the same mock, so both are measured in one run under the same load.
`--reuse-sessions K` opens K sessions and then turns on them in rotation, so no session or
rollout is added per cycle and what still grows is kept per request or turn (with K above
`--max-warm` each turn resumes a thread closed since). `--env KEY=VALUE` sets a variable in
this checkout's service only: `--baseline HEAD --env MALLOC_ARENA_MAX=2` compares one
allocator setting on the same code in one run.
`--tracemalloc` starts `tracemalloc` in each service (through a `sitecustomize` on its
`PYTHONPATH`) and prints the top growth of Python objects by traceback between cycle 100
and the end (`--top N` of them). Never asserts.

Run: `.venv/bin/python bench/bench_service_memory.py [--cycles 1000] [--baseline main]
[--tracemalloc] [--reuse-sessions K] [--env KEY=VALUE]`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import read_secret

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"
ARENA_ALIGN = 64 * 1024 * 1024  # glibc's HEAP_MAX_SIZE on 64-bit: each arena's alignment

# Loaded in each service through its PYTHONPATH. SIGUSR2 writes the bytes of live Python
# objects in pymalloc's arenas (`sys._debugmallocstats`) to BENCH_PYMALLOC_OUT; with
# --tracemalloc, SIGUSR1 writes a tracemalloc snapshot.
SITECUSTOMIZE = """
import os, re, signal, sys, tempfile
if os.environ.get("BENCH_PYMALLOC_OUT"):
    def _pymalloc(signum, frame):
        with tempfile.TemporaryFile() as tmp:
            saved = os.dup(2)
            os.dup2(tmp.fileno(), 2)
            try:
                sys._debugmallocstats()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode()
        # Without pymalloc (PYTHONMALLOC=malloc through --env) there is nothing to count.
        used = re.search(r"# bytes in allocated blocks += +([0-9,]+)", text)
        arenas = re.search(r"# arenas allocated current += +([0-9,]+)", text)
        used, arenas = (m.group(1) if m else "0" for m in (used, arenas))
        out = os.environ["BENCH_PYMALLOC_OUT"]
        with open(out + ".tmp", "w") as f:
            f.write(used.replace(",", "") + " " + arenas.replace(",", ""))
        os.replace(out + ".tmp", out)
    signal.signal(signal.SIGUSR2, _pymalloc)
if os.environ.get("BENCH_TRACEMALLOC_OUT"):
    import tracemalloc
    tracemalloc.start(int(os.environ.get("BENCH_TRACEMALLOC_FRAMES", "12")))
    def _dump(signum, frame):
        path = os.environ["BENCH_TRACEMALLOC_OUT"] + "." + open(
            os.environ["BENCH_TRACEMALLOC_OUT"] + ".tag").read().strip()
        tracemalloc.take_snapshot().dump(path)
        open(path + ".done", "w").close()
    signal.signal(signal.SIGUSR1, _dump)
"""


@dataclass(frozen=True)
class Memory:
    rss: float
    anon: float
    heap: float
    arenas: float
    arena_count: int
    threads: int
    python: float  # MiB of live objects in pymalloc's arenas
    pymalloc_arenas: int


def pymalloc(proc: subprocess.Popen[bytes], out: Path) -> tuple[float, int]:
    """(MiB of live small Python objects, pymalloc arenas) in the service, asked by signal."""
    out.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    used, arenas = out.read_text().split()
    return int(used) / 2**20, int(arenas)


def memory(pid: int, python: tuple[float, int]) -> Memory:
    """The process's memory in MiB from /proc (smaps for the malloc split)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    heap = arenas = 0
    count = 0
    current: str | None = None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if "-" in parts[0] and not parts[0].endswith(":"):
            start = int(parts[0].split("-")[0], 16)
            if parts[-1] == "[heap]":
                current = "heap"
            elif len(parts) == 5 and parts[1].startswith("rw") and start % ARENA_ALIGN == 0:
                current = "arena"
                count += 1
            else:
                current = None
        elif parts[0] == "Rss:" and current is not None:
            if current == "heap":
                heap += int(parts[1])
            else:
                arenas += int(parts[1])
    return Memory(
        rss=int(fields["VmRSS"][0]) / 1024,
        anon=int(fields["RssAnon"][0]) / 1024,
        heap=heap / 1024,
        arenas=arenas / 1024,
        arena_count=count,
        threads=int(fields["Threads"][0]),
        python=python[0],
        pymalloc_arenas=python[1],
    )


@dataclass
class Service:
    """One running `serve` and the client calls that drive its cycles."""

    label: str
    proc: subprocess.Popen[bytes]
    port: int
    state: Path
    work: Path
    trace_out: Path | None
    pymalloc_out: Path
    secret: str | None = None
    samples: list[tuple[int, Memory]] = field(default_factory=list)
    reuse: int = 0  # with --reuse-sessions K: turn on these K sessions in turn once opened
    sessions: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        headers = {"Host": f"127.0.0.1:{self.port}", "Authorization": f"Bearer {self.secret}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, None if body is None else json.dumps(body), headers)
        raw = conn.getresponse().read()
        conn.close()
        return json.loads(raw)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while self.secret is None and time.monotonic() < deadline:
            self.secret = read_secret(self.state)
            time.sleep(0.05)
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit(f"{self.label}: the service did not start")

    def cycle(self, n: int) -> None:
        if self.reuse and len(self.sessions) >= self.reuse:
            # No new session or rollout: the K sessions' threads are resumed in turn (with
            # K > --max-warm each one was closed since its last turn).
            sid = self.sessions[n % self.reuse]
        else:
            opened = self.call(
                "POST",
                "/api/chat/sessions",
                {"goal_id": "bench", "work_dir": str(self.work), "create_goal": True},
            )
            if "session" not in opened:
                raise SystemExit(f"{self.label} cycle {n}: the session did not open: {opened}")
            sid = opened["session"]["session_id"]
            self.sessions.append(sid)
        self.call("POST", f"/api/chat/sessions/{sid}/turns", {"text": "hi"})
        while self.call("GET", f"/api/chat/sessions/{sid}")["session"]["active_turn_id"]:
            time.sleep(0.02)
        self.call("GET", "/status.json")

    def snapshot(self, tag: str) -> Path | None:
        """Ask the service for a tracemalloc snapshot; its path once written."""
        if self.trace_out is None:
            return None
        Path(f"{self.trace_out}.tag").write_text(tag)
        path = Path(f"{self.trace_out}.{tag}")
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 120
        while not Path(f"{path}.done").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        return path


def start(
    label: str,
    root: Path,
    mock_url: str,
    codex_bin: str,
    ref: str | None,
    trace: bool,
    extra_env: dict[str, str] | None = None,
) -> Service:
    base = root / label
    home, state, work = base / "home", base / "state", base / "work"
    work.mkdir(parents=True)
    write_offline_codex_config(home, mock_url)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "CODEX_HOME"}
    env["LOOPX_CHAT_CODEX_HOME"] = str(home)
    paths = []
    cwd = str(ROOT)
    if ref:
        code = base / "code"
        code.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, "loopx_chat"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
        paths.append(str(code))
        cwd = str(code)
    else:
        paths.append(str(ROOT))
    site = base / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    paths.append(str(site))
    env["BENCH_PYMALLOC_OUT"] = str(base / "pymalloc")
    trace_out = None
    if trace:
        trace_out = base / "trace"
        env["BENCH_TRACEMALLOC_OUT"] = str(trace_out)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra_env or {})
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state)),
            *("--codex-bin", codex_bin, "serve", "--port", str(port)),
            *("--max-warm", "4", "--notify", "none"),
        ],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    service = Service(label, proc, port, state, work, trace_out, base / "pymalloc")
    service.wait_ready()
    return service


def show_growth(service: Service, before: Path | None, after: Path | None, top: int = 15) -> None:
    after_100 = [(n, m) for n, m in service.samples if n >= 100]
    if len(after_100) >= 2:
        (n0, m0), (n1, m1) = after_100[0], after_100[-1]
        spread = max(m.rss for _, m in after_100) - min(m.rss for _, m in after_100)
        print(
            f"{service.label}: cycle {n0} RSS {m0.rss:.1f} MiB, cycle {n1} {m1.rss:.1f} MiB: "
            f"{m1.rss - m0.rss:+.1f} MiB (range {spread:.1f}); "
            f"anonymous {m1.anon - m0.anon:+.1f}, [heap] {m1.heap - m0.heap:+.1f}, "
            f"other arenas {m1.arenas - m0.arenas:+.1f} MiB ({m0.arena_count} -> "
            f"{m1.arena_count}), threads {m0.threads} -> {m1.threads}; live Python objects "
            f"{m1.python - m0.python:+.1f} MiB (pymalloc arenas {m0.pymalloc_arenas} -> "
            f"{m1.pymalloc_arenas})"
        )
    if before is None or after is None:
        return
    import tracemalloc

    first = pickle.loads(before.read_bytes())  # written by Snapshot.dump
    last = pickle.loads(after.read_bytes())
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = last.filter_traces(keep).compare_to(first.filter_traces(keep), "traceback")
    total = sum(s.size_diff for s in stats)
    print(f"{service.label}: Python objects {total / 1024:+.0f} KiB (tracemalloc); top growth:")
    grown = sorted((s for s in stats if s.size_diff > 0), key=lambda s: -s.size_diff)
    for stat in grown[:top]:
        # Innermost frame first, then the frames of ours that led to it.
        inner = stat.traceback[-1]
        frames = [f"{Path(inner.filename).name}:{inner.lineno}"] + [
            f"{Path(f.filename).name}:{f.lineno}"
            for f in reversed(stat.traceback[:-1])
            if "loopx_chat" in f.filename
        ]
        print(
            f"  {stat.size_diff / 1024:+8.1f} KiB {stat.count_diff:+6d} blocks  "
            + " < ".join(frames[:7])
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--codex-bin", default=str(DEFAULT_CODEX))
    parser.add_argument(
        "--baseline",
        default=None,
        help="a git ref: run that commit's service beside this one, cycles in alternation",
    )
    parser.add_argument(
        "--only-baseline", action="store_true", help="with --baseline: run that one alone"
    )
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument(
        "--top", type=int, default=15, help="with --tracemalloc: how many sites to print"
    )
    parser.add_argument(
        "--reuse-sessions",
        type=int,
        default=0,
        metavar="K",
        help="open K sessions, then turn on them in rotation: no session or rollout added "
        "per cycle, so what grows is kept per request or turn (K > 4, --max-warm, so each "
        "turn resumes a closed thread)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in this checkout's service only (e.g. MALLOC_ARENA_MAX=2 against "
        "--baseline HEAD)",
    )
    args = parser.parse_args()
    extra_env = dict(pair.split("=", 1) for pair in args.env)
    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        services: list[Service] = []
        try:
            if args.baseline:
                services.append(
                    start(
                        f"baseline {args.baseline}",
                        root,
                        mock.base_url,
                        args.codex_bin,
                        args.baseline,
                        args.tracemalloc,
                    )
                )
            if not args.only_baseline:
                label = "this checkout" + "".join(f" {k}={v}" for k, v in extra_env.items())
                services.append(
                    start(
                        label,
                        root,
                        mock.base_url,
                        args.codex_bin,
                        None,
                        args.tracemalloc,
                        extra_env,
                    )
                )
            for service in services:
                service.reuse = args.reuse_sessions
            snaps: dict[str, list[Path | None]] = {s.label: [] for s in services}
            started = time.monotonic()
            for n in range(1, args.cycles + 1):
                for service in services:
                    service.cycle(n)
                if n == 100 or (n == args.cycles and n > 100):
                    for service in services:
                        snaps[service.label].append(service.snapshot(str(n)))
                if n % 50 == 0 or n == 1:
                    words = []
                    for service in services:
                        m = memory(service.proc.pid, pymalloc(service.proc, service.pymalloc_out))
                        service.samples.append((n, m))
                        words.append(
                            f"{service.label}: RSS {m.rss:.1f} anon {m.anon:.1f} "
                            f"[heap] {m.heap:.1f} arenas {m.arenas:.1f} ({m.arena_count}) "
                            f"threads {m.threads} python {m.python:.1f} ({m.pymalloc_arenas})"
                        )
                    print(
                        f"cycle {n} ({time.monotonic() - started:.0f} s): " + " | ".join(words),
                        flush=True,
                    )
        finally:
            for service in services:
                service.proc.terminate()
            for service in services:
                service.proc.wait(30)
        for service in services:
            pair = snaps[service.label]
            show_growth(service, *(pair if len(pair) == 2 else (None, None)), args.top)


if __name__ == "__main__":
    main()

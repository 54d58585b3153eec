"""Benchmark: the first screen at 100, 1,000 and 3,000 goals, cold and warm, against a
baseline commit's code in the same run.

Each state is seeded through the project's own writers (`bench/seed_goals.py`: a goal_state
and about 20 gate events per goal, every fourth goal with a gate open). For each size, in
one run and interleaved, with bytecode compiled for both codes:

- `status --json` as a whole process: this code with no persisted index (cold) and with
  the index a previous status left (warm), and the baseline's code;
- `GET /status.json` and `GET /api/page` (the cards and header that the page's shell at
  `GET /` loads; the shell itself is static since issue 33) on a service process of each
  code (an in-process `ServiceApp` on a loopback port, no codex): the first request after
  start (cold), then requests with nothing changed, each after the service's sweep
  interval (warm: a stat of every goal file, no fold), and back to back (within the
  interval).

Prints medians and ratios; never asserts. Run:
`.venv/bin/python bench/bench_status.py [--goals 100,1000,3000] [--baseline main] [--runs 3]`.
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECRET = secrets.token_urlsafe(32)


def code_of(ref: str | None, into: Path) -> Path:
    """A folder holding `loopx_chat` of `ref` (None: this checkout), byte-compiled."""
    if ref is None:
        folder = ROOT
    else:
        folder = into / "baseline"
        folder.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, "loopx_chat"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(folder / "loopx_chat")],
        check=True,
        env=_env(folder),
    )
    return folder


def _env(code: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(code)
    env.update(extra)
    return env


def cli_status(code: Path, state: Path, home: Path) -> float:
    env = _env(code, LOOPX_CHAT_STATE_DIR=str(state), LOOPX_CHAT_CODEX_HOME=str(home))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "loopx_chat", "status", "--json"],
        env=env,
        cwd=code,
        capture_output=True,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr.decode()[-2000:])
    return took


def serve(state: Path, home: Path) -> None:
    """The service process: print the port, serve until stdin closes."""
    import contextlib
    import io
    import threading

    from loopx_chat.controller.chat_controller import ChatController
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.service.app import ServiceApp
    from loopx_chat.service.server import LoopbackServer
    from loopx_chat.state.session_store import SessionStore

    controller = ChatController(
        store=SessionStore(state),
        environ={"LOOPX_CHAT_CODEX_HOME": str(home), "PATH": ""},
        cwd=state.parent,
    )
    server = LoopbackServer(
        "127.0.0.1",
        0,
        lambda port: ServiceApp(
            controller,
            GateStore(state),
            port=port,
            work_dir=state.parent,
            secret=os.environ["BENCH_SECRET"],
        ),
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.port, flush=True)
    with contextlib.redirect_stderr(io.StringIO()):  # the service logs every request
        sys.stdin.read()


class Service:
    def __init__(self, code: Path, state: Path, home: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "bench_status.py"),
                "--serve",
                str(state),
                str(home),
            ],
            env=_env(code, BENCH_SECRET=SECRET),
            cwd=code,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def get(self, path: str) -> tuple[float, int]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        started = time.perf_counter()
        conn.request(
            "GET",
            path,
            headers={"Host": f"127.0.0.1:{self.port}", "Authorization": f"Bearer {SECRET}"},
        )
        reply = conn.getresponse()
        body = reply.read()
        took = time.perf_counter() - started
        conn.close()
        assert reply.status == 200, (reply.status, body[:200])
        return took, len(body)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def service_row(code: Path, state: Path, home: Path, path: str, warm: int) -> dict[str, float]:
    svc = Service(code, state, home)
    try:
        cold, size = svc.get(path)
        spaced = []
        for _ in range(warm):
            time.sleep(0.6)  # past the sweep interval: a look at the disk, nothing changed
            spaced.append(svc.get(path)[0])
        back = [svc.get(path)[0] for _ in range(warm)]
    finally:
        svc.close()
    return {
        "cold": cold,
        "warm": statistics.median(spaced),
        "back": statistics.median(back),
        "bytes": size,
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", default="100,1000,3000")
    parser.add_argument("--baseline", default="main", help="git ref of the code to compare with")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--serve", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), Path(args.serve[1]))
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from seed_goals import copy_state  # the bench folder is not a package

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        new = code_of(None, tmp_path)
        old = code_of(args.baseline, tmp_path)
        print(f"this code vs {args.baseline}, {args.runs} runs, {os.cpu_count()} CPUs")
        for goals in (int(n) for n in args.goals.split(",")):
            work = tmp_path / f"g{goals}"
            work.mkdir()
            state = copy_state(goals, work)
            home = work / "home"
            home.mkdir()
            index = state / "index" / "status.json"
            cli: dict[str, list[float]] = {"baseline": [], "cold": [], "warm": []}
            for _ in range(args.runs):
                cli["baseline"].append(cli_status(old, state, home))
                index.unlink(missing_ok=True)
                cli["cold"].append(cli_status(new, state, home))
                cli["warm"].append(cli_status(new, state, home))
            med = {k: statistics.median(v) for k, v in cli.items()}
            print(f"\n{goals:,} goals")
            print(
                f"  status --json: {args.baseline} {ms(med['baseline'])}; this code cold "
                f"{ms(med['cold'])} ({med['cold'] / med['baseline']:.2f}x), warm "
                f"{ms(med['warm'])} ({med['warm'] / med['baseline']:.2f}x of {args.baseline}, "
                f"{med['warm'] / med['cold']:.2f}x of cold)"
            )
            warm_old = 3 if goals < 1000 else 2
            for path in ("/status.json", "/api/page"):
                base = service_row(old, state, home, path, warm_old)
                mine = service_row(new, state, home, path, 10)
                print(
                    f"  GET {path}: {args.baseline} cold {ms(base['cold'])} / warm "
                    f"{ms(base['warm'])}; this code cold {ms(mine['cold'])} / warm "
                    f"{ms(mine['warm'])} / back to back {ms(mine['back'])}; warm/cold "
                    f"{mine['warm'] / mine['cold']:.3f}x, warm vs {args.baseline}'s warm "
                    f"{mine['warm'] / base['warm']:.3f}x ({mine['bytes']:,} bytes)"
                )


if __name__ == "__main__":
    main()

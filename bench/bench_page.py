"""The first screen in a signed-in browser: a page load and a decision, against a baseline
checkout measured in the same run.

    .venv/bin/python bench/bench_page.py --baseline /path/to/other/checkout [--rounds 20]

For each checkout (this one, and the baseline: e.g. a clone of the commit before the change)
it starts that checkout's own `serve` (its `.venv/bin/python -m loopx_chat`) on a fresh state
with 20 goals, each with an open gate, signs one Chromium page in the way that checkout signs
browsers in (a one-time code, or the old `/?token=` login URL), then times:

- load: `page.reload()` until the cards are drawn (`section.card` count right);
- decide: a click on Approve until that card is no longer the owner's, SETTLE_MS after the
  load (a click racing the page's own start-up measures the start-up, not the decision).

Prints the medians and p90s of each, and this checkout's over the baseline's. Needs the
pinned codex only for `serve`'s start; no model turn runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
GOALS = 20
SETTLE_MS = 500


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _python(checkout: Path) -> str:
    return str(checkout / ".venv" / "bin" / "python")


def _seed(checkout: Path, state: Path) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from loopx_chat.goals.gate_store import GateStore\n"
        "g = GateStore(Path(sys.argv[1]))\n"
        f"for i in range({GOALS}):\n"
        "    g.request_gate(f'goal-{i:02d}', f'Ship {i}?', actor='owner')\n"
    )
    subprocess.run([_python(checkout), "-c", code, str(state)], check=True, cwd=checkout)


def _serve(checkout: Path, state: Path, home: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _port()
    codex = checkout / "tools" / "codex" / "node_modules" / ".bin" / "codex"
    proc = subprocess.Popen(
        [
            *(_python(checkout), "-m", "loopx_chat", "--state-dir", str(state)),
            *("--codex-bin", str(codex), "serve", "--port", str(port), "--notify", "none"),
        ],
        env={**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home)},
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not (state / "service.json").exists():
        assert proc.poll() is None, "serve exited"
        time.sleep(0.05)
    return proc, port


def _sign_in(checkout: Path, state: Path, port: int, page) -> None:  # type: ignore[no-untyped-def]
    """The checkout's own way in: `open --print` (a one-time code) where it has one, else the
    login URL with the secret (the cookie flow)."""
    done = subprocess.run(
        [_python(checkout), "-m", "loopx_chat", "--state-dir", str(state), "open", "--print"],
        capture_output=True,
        text=True,
        cwd=checkout,
        check=True,
    )
    page.goto(done.stdout.strip())
    page.wait_for_function(f"() => document.querySelectorAll('section.card').length >= {GOALS}")


def measure(checkout: Path, rounds: int, chromium: str) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    base = Path(tempfile.mkdtemp(prefix="bench-page-"))
    state, home = base / "state", base / "home"
    home.mkdir()
    (home / "config.toml").write_text("")
    _seed(checkout, state)
    proc, port = _serve(checkout, state, home)
    times: dict[str, list[float]] = {"load": [], "decide": []}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=ARGS)
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            _sign_in(checkout, state, port, page)
            for n in range(rounds):
                started = time.perf_counter()
                page.reload()
                page.wait_for_function(
                    "() => document.querySelectorAll('section.card').length >= " + str(GOALS)
                )
                times["load"].append(time.perf_counter() - started)
                # A person reads before they click: the page's own start-up (its event
                # stream's first cards) is over before the decision is timed, on both sides.
                page.wait_for_timeout(SETTLE_MS)
                goal = f"goal-{n:02d}"
                card = page.locator(f'section.card[data-goal="{goal}"]')
                started = time.perf_counter()
                card.locator("button.approve").first.click()
                page.wait_for_function(
                    f"() => document.querySelector('section.card[data-goal=\"{goal}\"]')"
                    ".dataset.actor !== 'owner'"
                )
                times["decide"].append(time.perf_counter() - started)
            browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout")
    parser.add_argument("--rounds", type=int, default=min(20, GOALS))
    args = parser.parse_args()
    chromium = shutil.which("chromium") or sys.exit("chromium is missing")
    rounds = min(args.rounds, GOALS)
    # Interleaved by checkout, twice, so that a slower minute of the machine hits both.
    ours: dict[str, list[float]] = {"load": [], "decide": []}
    theirs: dict[str, list[float]] = {"load": [], "decide": []}
    for _ in range(2):
        for key, value in measure(args.baseline.resolve(), rounds, chromium).items():
            theirs[key] += value
        for key, value in measure(HERE, rounds, chromium).items():
            ours[key] += value
    print(f"== signed-in page, {GOALS} goals, {2 * rounds} rounds each (ms)")
    for key in ("load", "decide"):
        a, b = statistics.median(ours[key]) * 1000, statistics.median(theirs[key]) * 1000
        p90a = sorted(ours[key])[int(len(ours[key]) * 0.9)] * 1000
        p90b = sorted(theirs[key])[int(len(theirs[key]) * 0.9)] * 1000
        print(
            f"{key:<7} this {a:7.1f} (p90 {p90a:7.1f})  baseline {b:7.1f} (p90 {p90b:7.1f})"
            f"  ratio {a / b:.2f}x"
        )


if __name__ == "__main__":
    main()

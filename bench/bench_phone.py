"""Deciding from the phone through the owner's proxy: Codex's request to the decision
arriving at codex, and a page load through the proxy against the same load on loopback.

    .venv/bin/python bench/bench_phone.py [--rounds 20]

Starts the loopback model mock, a real `serve --public-url https://phone-test.example:PORT
--approval untrusted` with the pinned codex, Debian's Caddy (`tls internal`) in front of it,
and Chromium emulating a phone (390×844, touch; the host mapped to 127.0.0.1), paired with
`loopx-chat pair`. Then, `--rounds` times:

- decision: a turn asks codex to run `touch FILE` (the mock's `exec_command` call); the
  clock starts when the mock receives the model request it answers with that call (codex is
  about to ask), and stops when FILE exists: codex got the approval and ran the command. In
  between: codex's request reaches the service, the card reaches the phone over the event
  stream through the proxy, the phone taps Approve twice (the confirmation), the signed POST
  goes back through the proxy. No human delay is in it: the taps are immediate.
- load: `page.reload()` at 390×844 until the cards are drawn, through the proxy (HTTPS,
  Caddy) and, in a second signed-in page, on loopback.

Prints p50/p99 (and max) of each. Needs caddy, chromium and the pinned codex.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from loopx_chat.codex.offline_config import write_offline_codex_config  # noqa: E402
from loopx_chat.model_mock.responses import MockResponsesServer  # noqa: E402
from loopx_chat.state.service_runtime import read_secret  # noqa: E402
from tests.helpers.paths import PINNED_CODEX  # noqa: E402
from tests.helpers.proxy import PUBLIC_HOST, start_caddy  # noqa: E402
from tests.helpers.serve_process import free_port, start_service  # noqa: E402

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    f"--host-resolver-rules=MAP {PUBLIC_HOST} 127.0.0.1",
]
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
    "ignore_https_errors": True,
}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _line(name: str, values: list[float]) -> str:
    return (
        f"{name:<34} p50 {statistics.median(values):7.1f} ms   p99 {_pct(values, 0.99):7.1f} ms"
        f"   max {max(values):7.1f} ms   (n={len(values)})"
    )


def _cli(state: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, MockResponsesServer() as mock:
        root = Path(tmp)
        home, state, work = root / "home", root / "state", root / "work"
        work.mkdir()
        write_offline_codex_config(home, mock.base_url)
        env = {k: v for k, v in __import__("os").environ.items() if k != "CODEX_HOME"}
        env["LOOPX_CHAT_CODEX_HOME"] = str(home)
        public_port = free_port()
        service = start_service(
            state,
            home,
            env,
            str(PINNED_CODEX),
            root / "serve.log",
            *("--public-url", f"https://{PUBLIC_HOST}:{public_port}"),
            *("--approval", "untrusted", "--sandbox", "workspace-write", "--notify", "none"),
        )
        proxy = start_caddy(root / "caddy", service.port, public_port)
        owner = {"Authorization": f"Bearer {read_secret(state)}"}
        try:
            phone_url = _cli(state, env, "pair", "--name", "phone")
            desk_url = _cli(state, env, "open", "--print", "--name", "desk")
            _, doc = proxy.request(
                "POST",
                "/api/chat/sessions",
                headers=owner,
                body={"goal_id": "g", "work_dir": str(work), "create_goal": True},
            )
            session = doc["session"]["session_id"]
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                phone = browser.new_context(**PHONE).new_page()
                phone.goto(phone_url)
                phone.wait_for_function("() => location.pathname === '/' && !location.hash")
                phone.wait_for_selector("section.card, p.empty")
                desk = browser.new_context(**PHONE).new_page()
                desk.goto(desk_url)
                desk.wait_for_function("() => location.pathname === '/' && !location.hash")

                decisions: list[float] = []
                cards: list[float] = []
                taps: list[float] = []  # the two taps, as Playwright makes them
                runs: list[float] = []  # the signed POST through the proxy to the command run
                for i in range(rounds):
                    target = work / f"f{i}"
                    call = {"cmd": f"touch {target}", "workdir": str(work)}
                    seen = len(mock.requests)
                    asked: list[float] = []

                    def watch(seen: int = seen, asked: list[float] = asked) -> None:
                        while len(mock.requests) <= seen:
                            time.sleep(0.001)
                        asked.append(time.perf_counter())

                    watcher = threading.Thread(target=watch, daemon=True)
                    watcher.start()
                    proxy.request(
                        "POST",
                        f"/api/chat/sessions/{session}/turns",
                        headers=owner,
                        body={"text": f"mock:call=exec_command {json.dumps(call)}"},
                    )
                    button = phone.locator(
                        '.gate.host button[data-decision="approve"]:not([data-for-session])'
                    ).first
                    button.wait_for()
                    shown = time.perf_counter()
                    button.tap()
                    phone.locator("button.armed").tap()
                    tapped = time.perf_counter()
                    while not target.exists():
                        time.sleep(0.001)
                    done = time.perf_counter()
                    watcher.join(5)
                    decisions.append((done - asked[0]) * 1000)
                    cards.append((shown - asked[0]) * 1000)
                    taps.append((tapped - shown) * 1000)
                    runs.append((done - tapped) * 1000)
                    while True:  # the turn ends before the next one starts
                        _, doc = proxy.request(
                            "GET", f"/api/chat/sessions/{session}", headers=owner
                        )
                        if not doc["session"].get("active_turn_id"):
                            break
                        time.sleep(0.02)

                loads: dict[str, list[float]] = {"proxy": [], "loopback": []}
                for _ in range(rounds):
                    for name, page in (("proxy", phone), ("loopback", desk)):
                        started = time.perf_counter()
                        page.reload()
                        page.wait_for_selector("section.card")
                        loads[name].append((time.perf_counter() - started) * 1000)
                browser.close()
            # The service's own time for each decision POST (it answers codex before it
            # replies), from its log line `POST /api/goals/.../decision 200 12ms`.
            handled = [
                float(line.rsplit(" ", 1)[1].rstrip("ms"))
                for line in (root / "serve.log").read_text(errors="replace").splitlines()
                if "/decision 200 " in line
            ]
        finally:
            proxy.stop()
            service.stop()
    print(_line("codex request -> card on the phone", cards))
    print(_line("  the two taps (Playwright)", taps))
    print(_line("  second tap -> command ran", runs))
    print(_line("    of which the service's POST", handled))
    print(_line("codex request -> decision at codex", decisions))
    print(_line("page load via proxy (390x844)", loads["proxy"]))
    print(_line("page load on loopback (390x844)", loads["loopback"]))
    print(
        f"proxy / loopback load (p50): "
        f"{statistics.median(loads['proxy']) / statistics.median(loads['loopback']):.2f}x"
    )


if __name__ == "__main__":
    main()

"""The launchctl adapter: the only code that runs launchctl.

Owns the modern verbs (`bootout`, `print`, `enable`, `bootstrap`, `kickstart -k`), the
tolerances real installers learned the hard way (bootout of an unloaded label is fine;
bootout is asynchronous, so poll `print` until the label is gone; "Bootstrap failed: 5" gets
one bootout-wait-retry), and parsing `print` into a service state. The runner is injectable;
by default it runs `$LOOPX_LAUNCHCTL` or `launchctl` from PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from loopx_chat.errors import Remedy
from loopx_chat.launchagent.plist import LaunchAgentError

GONE_DEADLINE_SEC = 10.0
POLL_SEC = 0.1
CALL_TIMEOUT_SEC = 30.0


@dataclass(frozen=True)
class RunResult:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], RunResult]


@dataclass(frozen=True)
class ServiceState:
    loaded: bool
    running: bool
    pid: int | None = None
    last_exit_code: int | None = None


def subprocess_runner(environ: Mapping[str, str]) -> Runner:
    explicit = environ.get("LOOPX_LAUNCHCTL", "")
    exe = explicit or shutil.which("launchctl", path=environ.get("PATH"))
    if not exe:
        raise LaunchAgentError(
            "launchctl was not found on PATH",
            error_code="launchctl_unavailable",
            remedy=Remedy(
                summary="launchctl is needed to manage the LaunchAgent.",
                next_action="Run this on macOS with /bin/launchctl on PATH, "
                "or set LOOPX_LAUNCHCTL.",
            ),
        )

    def run(args: Sequence[str]) -> RunResult:
        try:
            done = subprocess.run(
                [exe, *args],
                capture_output=True,
                text=True,
                timeout=CALL_TIMEOUT_SEC,
                check=False,
                env=dict(environ),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LaunchAgentError(
                f"launchctl {args[0]} could not run ({type(exc).__name__})",
                error_code="launchctl_failed",
            ) from None
        return RunResult(done.returncode, done.stdout, done.stderr)

    return run


_PID = re.compile(r"^\s*pid = (\d+)\s*$", re.MULTILINE)
_STATE = re.compile(r"^\s*state = (.+?)\s*$", re.MULTILINE)
_LAST_EXIT = re.compile(r"^\s*last exit code = (-?\d+)", re.MULTILINE)


def parse_print(result: RunResult) -> ServiceState:
    if result.returncode != 0:
        return ServiceState(loaded=False, running=False)
    text = result.stdout
    pid = _PID.search(text)
    state = _STATE.search(text)
    last = _LAST_EXIT.search(text)
    running = bool(pid) or (state is not None and state.group(1) == "running")
    return ServiceState(
        loaded=True,
        running=running,
        pid=int(pid.group(1)) if pid else None,
        last_exit_code=int(last.group(1)) if last else None,
    )


class Launchctl:
    def __init__(self, runner: Runner, uid: int, *, sleep: Callable[[float], None] = time.sleep):
        self._run = runner
        self.domain = f"gui/{uid}"
        self._sleep = sleep

    def target(self, label: str) -> str:
        return f"{self.domain}/{label}"

    def state(self, label: str) -> ServiceState:
        return parse_print(self._run(["print", self.target(label)]))

    def bootout(
        self, label: str, plist_path: str | None = None, deadline_sec: float = GONE_DEADLINE_SEC
    ) -> None:
        """Unload if loaded and wait until launchd forgot the label (bootout is async).

        By label, then by plist path as well (as the public LoopX installer does): a job
        loaded from that file under an older label goes too."""
        self._run(["bootout", self.target(label)])  # "No such process" when not loaded: fine
        if plist_path is not None:
            self._run(["bootout", self.domain, plist_path])
        deadline = time.monotonic() + deadline_sec
        while self.state(label).loaded:
            if time.monotonic() > deadline:
                raise LaunchAgentError(
                    f"{label} was still loaded {deadline_sec:g}s after bootout",
                    error_code="launchctl_failed",
                )
            self._sleep(POLL_SEC)

    def bootstrap(self, label: str, plist_path: str) -> None:
        self._run(["enable", self.target(label)])
        result = self._run(["bootstrap", self.domain, plist_path])
        if result.returncode != 0 and _is_eio(result):
            # EIO usually means "still (or already) loaded": boot out, wait, retry once.
            self.bootout(label)
            result = self._run(["bootstrap", self.domain, plist_path])
        if result.returncode != 0:
            raise LaunchAgentError(
                f"launchctl bootstrap failed with exit {result.returncode}: "
                f"{_first_line(result.stderr or result.stdout)}",
                error_code="bootstrap_failed",
                remedy=Remedy(
                    summary="launchd refused to load the LaunchAgent.",
                    next_action="Run `launchctl print gui/$(id -u)/"
                    f"{label}` and check the plist, then run install again.",
                ),
            )
        if not self.state(label).loaded:
            raise LaunchAgentError(
                f"{label} is not loaded after bootstrap", error_code="bootstrap_failed"
            )
        # RunAtLoad does not always fire after a fast bootout/bootstrap: start it for sure.
        self.kickstart(label)

    def kickstart(self, label: str) -> None:
        result = self._run(["kickstart", "-k", self.target(label)])
        if result.returncode != 0:
            raise LaunchAgentError(
                f"launchctl kickstart failed with exit {result.returncode}",
                error_code="launchctl_failed",
            )


def _is_eio(result: RunResult) -> bool:
    text = f"{result.stdout}\n{result.stderr}"
    return result.returncode == 5 or "failed: 5" in text or "Input/output error" in text


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else "no output"

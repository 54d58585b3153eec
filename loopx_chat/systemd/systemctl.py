"""The `systemctl --user` adapter: the only code that runs systemctl.

Owns the verbs the installer uses (`daemon-reload`, `enable`, `disable`, `start`, `stop`,
`is-active`, `is-enabled`, `show -p MainPID -p ExecMainStatus`), what their exit codes mean
(`is-active`: 0 active, 3 not; `stop` of a unit systemd never loaded: exit 5, fine), and
the one refusal that must come before any file is written: no user manager to talk to
("Failed to connect to bus"; a container, or an SSH session without `loginctl
enable-linger`). The runner is injectable; by default it runs `$LOOPX_SYSTEMCTL` or
`systemctl` from PATH, always with `--user`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from loopx_chat.errors import Remedy
from loopx_chat.systemd.unit import ServiceUnitError

CALL_TIMEOUT_SEC = 60.0
# `systemctl stop` of a unit that is not loaded: "Unit X not loaded." with exit 5.
NOT_LOADED_EXIT = 5


@dataclass(frozen=True)
class RunResult:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], RunResult]


@dataclass(frozen=True)
class UnitState:
    active: str  # is-active's word: active, inactive, failed, activating, deactivating...
    enabled: bool
    pid: int | None = None
    last_exit_code: int | None = None

    @property
    def running(self) -> bool:
        return self.active == "active"


def subprocess_runner(environ: Mapping[str, str]) -> Runner:
    exe = environ.get("LOOPX_SYSTEMCTL", "") or shutil.which("systemctl", path=environ.get("PATH"))
    if not exe:
        raise ServiceUnitError(
            "systemctl was not found on PATH",
            error_code="systemctl_unavailable",
            remedy=Remedy(
                summary="systemctl is needed to manage the systemd user service.",
                next_action="Run this on a Linux system with systemd, or set LOOPX_SYSTEMCTL.",
            ),
        )

    def run(args: Sequence[str]) -> RunResult:
        try:
            done = subprocess.run(
                [exe, "--user", *args],
                capture_output=True,
                text=True,
                timeout=CALL_TIMEOUT_SEC,
                check=False,
                env=dict(environ),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServiceUnitError(
                f"systemctl --user {args[0]} could not run ({type(exc).__name__})",
                error_code="systemctl_failed",
            ) from None
        return RunResult(done.returncode, done.stdout, done.stderr)

    return run


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else "no output"


def _no_manager(result: RunResult) -> bool:
    return "Failed to connect to bus" in result.stderr


class Systemctl:
    def __init__(self, runner: Runner) -> None:
        self._run = runner

    def _checked(self, *args: str, tolerate: tuple[int, ...] = ()) -> RunResult:
        result = self._run(list(args))
        if _no_manager(result):
            raise manager_unavailable(result)
        if result.returncode != 0 and result.returncode not in tolerate:
            raise ServiceUnitError(
                f"systemctl --user {' '.join(args)} failed with exit {result.returncode}: "
                f"{_first_line(result.stderr or result.stdout)}",
                error_code="systemctl_failed",
                remedy=Remedy(
                    summary="systemd refused the user service.",
                    next_action="Run `systemctl --user status loopx-chat.service` and "
                    "`journalctl --user -u loopx-chat.service`, then install again.",
                ),
            )
        return result

    def reachable(self) -> None:
        """Refuse before anything changes when there is no user manager to talk to."""
        self._checked("is-active", "default.target", tolerate=(3, 4))

    def daemon_reload(self) -> None:
        self._checked("daemon-reload")

    def enable(self, *units: str) -> None:
        self._checked("enable", *units)

    def disable(self, *units: str) -> None:
        self._checked("disable", *units, tolerate=(1,))  # a unit file already gone: fine

    def start(self, *units: str) -> None:
        self._checked("start", *units)

    def stop(self, *units: str) -> None:
        self._checked("stop", *units, tolerate=(NOT_LOADED_EXIT,))

    def state(self, unit: str) -> UnitState:
        """is-active, is-enabled and the main pid; no user manager reads as `unknown`."""
        active = self._run(["is-active", unit])
        if _no_manager(active):
            return UnitState(active="unknown", enabled=False)
        enabled = self._run(["is-enabled", unit])
        shown = self._run(["show", unit, "-p", "MainPID", "-p", "ExecMainStatus"])
        props = dict(line.partition("=")[::2] for line in shown.stdout.splitlines() if "=" in line)
        pid = props.get("MainPID", "0")
        status = props.get("ExecMainStatus", "")
        word = active.stdout.strip() or "unknown"
        return UnitState(
            active=word,
            enabled=enabled.returncode == 0,
            pid=int(pid) if pid.isascii() and pid.isdigit() and int(pid) > 0 else None,
            last_exit_code=int(status)
            if word != "active" and status.isascii() and status.isdigit()
            else None,
        )


def manager_unavailable(result: RunResult) -> ServiceUnitError:
    return ServiceUnitError(
        f"no systemd user manager answers ({_first_line(result.stderr)}); nothing was changed",
        error_code="systemd_user_unavailable",
        remedy=Remedy(
            summary="`systemctl --user` needs your user's systemd instance.",
            next_action="Run it from a login session, or enable one at boot with "
            "`loginctl enable-linger $USER`; without systemd run `loopx-chat serve` directly.",
        ),
    )

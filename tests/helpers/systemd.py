"""The systemd side of the service tests: `loopx-chat service ...` run against the stateful fake
`systemctl --user` (`fakes/fake_systemctl.py`) in a throwaway HOME, and Debian's real
`systemd-analyze --user verify` on every unit an install writes, drop-ins included (missing:
a skip locally, a failure under CI).

`systemd-analyze --user` needs no running systemd, only a runtime folder: without
`XDG_RUNTIME_DIR` it stops at "Failed to lookup RuntimeDirectory path" (found in a container
whose PID 1 is not systemd), so each run gets a private one. It exits 0 even when it warns
about a key it does not know or a value it cannot parse, so a unit passes only with no
output at all. `SYSTEMD_UNIT_PATH` names the unit folder (a trailing `:` keeps the built-in
ones, where `default.target` and `sockets.target` live), so drop-ins are verified too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.fakes import FAKES

FAKE_SYSTEMCTL = FAKES / "fake_systemctl.py"


def unit_dir(home: Path, config_home: Path | None = None) -> Path:
    return (config_home or home / ".config") / "systemd" / "user"


def verify_units(folder: Path, *names: str) -> None:
    """`systemd-analyze --user verify` on the units in `folder`: no word of complaint."""
    exe = shutil.which("systemd-analyze")
    if exe is None:
        message = "systemd-analyze (Debian systemd) is missing; `make test` installs it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # Short: the system's own user sockets (gpg-agent's, say) live under it, and a socket
    # path longer than 108 bytes makes them fail to load ("File name too long").
    runtime = tempfile.mkdtemp(prefix="sda-")
    try:
        done = subprocess.run(
            [exe, "--user", "verify", *(str(folder / n) for n in names)],
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(folder.parents[2]),
                "XDG_RUNTIME_DIR": runtime,
                "SYSTEMD_UNIT_PATH": f"{folder}:",
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stderr


class FakeSystemd:
    """A HOME with a fake `systemctl` first on PATH; `run` calls `loopx-chat service`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(exist_ok=True)
        bindir = root / "bin"
        bindir.mkdir(exist_ok=True)
        fake = bindir / "systemctl"
        fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_SYSTEMCTL}" "$@"\n')
        fake.chmod(0o755)
        self.bindir = bindir
        self.state = root / "systemd.json"
        self.log = root / "systemctl.log"
        self.units = unit_dir(self.home)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bindir}:{os.environ['PATH']}",
            "HOME": str(self.home),
            "LOOPX_CHAT_STATE_DIR": str(self.root / "state"),
            "FAKE_SYSTEMCTL_STATE": str(self.state),
            "FAKE_SYSTEMCTL_LOG": str(self.log),
            **extra,
        }

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "loopx_chat", *args, "--json"],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def service(self, *args: str, **extra: str) -> tuple[int, dict[str, Any]]:
        """`loopx-chat service ARGS --json`; every unit an install or restart wrote is then
        verified by systemd-analyze, so no test can write a unit systemd would refuse."""
        done = self.run("service", *args, **extra)
        doc = json.loads(done.stdout)
        if args[0] in ("install", "restart") and done.returncode == 0 and "unit_path" in doc:
            verify_units(Path(doc["unit_path"]).parent, "loopx-chat.service", "loopx-chat.socket")
        return done.returncode, doc

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def verbs(self) -> list[list[str]]:
        return [entry["argv"] for entry in self.calls()]

    def manager(self) -> dict[str, Any]:
        return dict(json.loads(self.state.read_text()))

    def snapshot(self) -> dict[str, bytes]:
        """Every file under the unit folder, by path (links by their target)."""
        found: dict[str, bytes] = {}
        for path in sorted(self.units.rglob("*")) if self.units.exists() else []:
            rel = str(path.relative_to(self.units))
            if path.is_symlink():
                found[rel] = os.readlink(path).encode()
            elif path.is_file():
                found[rel] = path.read_bytes()
        return found

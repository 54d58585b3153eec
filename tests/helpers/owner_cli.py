"""The loopx-chat command line as the owner's child processes, on one state dir and home."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


class OwnerCli:
    """`python -m loopx_chat` with the state dir, the Codex home and the pinned codex."""

    def __init__(self, tmp: Path, home: Path, env: dict[str, str], codex_bin: str) -> None:
        self.tmp, self.home, self.state = tmp, home, tmp / "state"
        self.codex_bin = codex_bin
        self.env = {**env, "LOOPX_CHAT_CODEX_HOME": str(home)}
        self.base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(self.state)]
        self.base += ["--codex-bin", codex_bin]

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.base, *args],
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def json(self, *args: str) -> tuple[int, dict[str, Any]]:
        done = self(*args, "--json")
        return done.returncode, json.loads(done.stdout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.base, *args],
            env=self.env,
            cwd=self.tmp,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

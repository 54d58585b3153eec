"""The fake executables (run as scripts, by path), the in-process scripted host, and the
handles a test holds on them.

`fake_codex.py` and `fake_launchctl.py` are programs, started by path through a `#!/bin/sh`
wrapper; `fake_codex.py` imports `replay` from beside itself, so the three stay in this folder.
`replay` is also imported as `tests.helpers.fakes.replay` by the tests that compare against the
recordings, and by `scripted_host.py`, the in-process host passed through the codex adapter's
`connect` seam (`Scripted` is the handle the `scripted` fixture gives).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.state.session_store import SessionStore
from tests.helpers.fakes.scripted_host import Script, ScriptedCodex

FAKES = Path(__file__).resolve().parent
FAKE_CODEX = FAKES / "fake_codex.py"
FAKE_LAUNCHCTL = FAKES / "fake_launchctl.py"
SCHEMA_CODEX = FAKES / "schema_codex.py"


@dataclass
class FakeCodex:
    """An executable `codex` that runs `fake_codex.py`, plus its invocation log."""

    bin: Path
    log: Path

    def env(self, scenario: str = "ok", **extra: str) -> dict[str, str]:
        return {"FAKE_CODEX_SCENARIO": scenario, "FAKE_CODEX_LOG": str(self.log), **extra}

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def app_servers(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("argv", [None])[0] == "app-server"]

    def debug_model_runs(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("debug_models")]


@dataclass
class Scripted:
    """The in-process scripted host (`scripted_host.py`) and a `codex` to name as the binary,
    which only records that it ran: a test on the scripted host spawns nothing."""

    bin: Path
    ran: Path
    codex: ScriptedCodex = field(default_factory=ScriptedCodex)

    def spawned(self) -> list[str]:
        return self.ran.read_text().splitlines() if self.ran.exists() else []

    def controller(
        self,
        root: Path,
        home: Path,
        script: Script | None = None,
        config: ControllerConfig | None = None,
    ) -> ChatController:
        """A controller on `root`/state whose app-servers are scripted hosts; later hosts
        follow `script` (a host keeps the script it started with)."""
        self.codex.script = script or Script()
        return ChatController(
            store=SessionStore(root / "state"),
            environ={
                "PATH": os.environ["PATH"],
                "CODEX_HOME": str(root / "ambient"),
                "LOOPX_CHAT_CODEX_HOME": str(home),
            },
            cwd=root,
            codex_bin=str(self.bin),
            config=config,
            connect=self.codex,
        )

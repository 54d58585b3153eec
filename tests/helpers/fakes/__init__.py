"""The fake executables (run as scripts, by path) and the handle a test holds on the fake codex.

`fake_codex.py` and `fake_launchctl.py` are programs, started by path through a `#!/bin/sh`
wrapper; `fake_codex.py` imports `replay` from beside itself, so the three stay in this folder.
`replay` is also imported as `tests.helpers.fakes.replay` by the tests that compare against the
recordings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FAKES = Path(__file__).resolve().parent
FAKE_CODEX = FAKES / "fake_codex.py"
FAKE_LAUNCHCTL = FAKES / "fake_launchctl.py"


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

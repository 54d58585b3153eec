"""Where the checkout is: the repository root and the pinned codex `make test` installs."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINNED_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"

"""Where the checkout is: the repository root, the codex the tests run, and the recordings.

The tests run the pinned codex `make test` installs, or the one `LOOPX_TEST_CODEX_BIN` names
(`make test CODEX_BIN=...`, `make test-oldest`): `TEST_CODEX` is the one the `codex_bin`
fixture gives. No test names a codex version: those that need one ask the binary.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINNED_CODEX = ROOT / "tools" / "codex" / "node_modules" / ".bin" / "codex"
OLDEST_CODEX = ROOT / "tools" / "codex-oldest" / "node_modules" / ".bin" / "codex"
TEST_CODEX = Path(os.environ.get("LOOPX_TEST_CODEX_BIN") or PINNED_CODEX).absolute()
# Protocol schemas recorded from real releases (tools/record-codex-schema).
CODEX_SCHEMAS = ROOT / "tests" / "fixtures" / "codex-schema"

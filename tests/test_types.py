"""The whole package type-checks clean: mypy, configured in pyproject.toml (`[tool.mypy]`),
over every module of `loopx_chat`. A type slip (a bare string
where a status enum is meant, a value that may be None used as if it were not) fails here,
with mypy's own lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_type_checks_clean(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues found" in done.stdout

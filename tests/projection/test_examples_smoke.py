"""The documented projection smoke runs as users run it, and fails loudly when it should."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "session_runtime" / "session-runtime-readonly-projection-smoke.py"
OK_LINE = "session-runtime-readonly-projection-smoke: ok"


def test_smoke_prints_the_ok_line() -> None:
    result = subprocess.run(
        [sys.executable, str(SMOKE)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [OK_LINE]


def test_smoke_fails_without_the_ok_line_when_a_check_breaks() -> None:
    # Sabotage the builder inside the smoke's own process: the smoke must notice.
    probe = (
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import loopx_chat.session_runtime as sr\n"
        "real = sr.build_session_runtime_readonly_projection\n"
        "def broken(**kwargs):\n"
        "    payload = real(**kwargs)\n"
        "    payload['first_screen']['waiting_on'] = 'nobody'\n"
        "    return payload\n"
        "sr.build_session_runtime_readonly_projection = broken\n"
        f"runpy.run_path({str(SMOKE)!r}, run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert OK_LINE not in result.stdout
    assert "FAILED [operator gate] waiting_on" in result.stderr

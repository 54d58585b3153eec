"""`pair` without a running service, or with a name a device cannot have: a specific error,
nothing printed that looks like a code, no file written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loopx_chat.service.pairing_qr import qr_text
from tests.helpers.qr import terminal_modules


def _pair(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "pair", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pair_needs_a_running_service(tmp_path: Path) -> None:
    png = tmp_path / "code.png"
    done = _pair(tmp_path / "state", "--png", str(png))
    assert done.returncode != 0 and "service_not_running" in done.stderr
    assert done.stdout == "" and not png.exists() and "Traceback" not in done.stderr


def test_a_bad_device_name_is_refused_before_a_code_is_made(tmp_path: Path) -> None:
    done = _pair(tmp_path / "state", "--name", "my phone!")
    assert done.returncode != 0 and "invalid_device_name" in done.stderr
    assert done.stdout == ""


def test_the_terminal_code_is_square_with_a_quiet_zone() -> None:
    rows = terminal_modules(qr_text("https://phone-test.example:8443/login#code=" + "A" * 22))
    # compact output draws two module rows per line: an odd size leaves a blank half-row
    size = len(rows[0])
    assert len(rows) in (size, size + 1)
    assert all(rows[0]) and all(rows[size - 1])  # light border above and below
    assert all(row[0] and row[-1] for row in rows[:size])

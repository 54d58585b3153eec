"""Reading a QR code back the way a phone's camera would, with an independent decoder.

`terminal_to_pgm` turns the half-block characters `loopx-chat pair` printed into an image
(a light module is a drawn block, as the terminal shows it; each character is two modules
tall), and `zbarimg` (Debian's zbar-tools) decodes that image or a PNG. Missing zbarimg: a
skip locally, a failure under CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

# Each character as (top light, bottom light).
HALVES = {"█": (True, True), "▀": (True, False), "▄": (False, True), " ": (False, False)}


def zbarimg() -> str:
    exe = shutil.which("zbarimg")
    if exe is None:
        message = "zbarimg (Debian zbar-tools) is missing; tools/ensure-system-tools.sh installs it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return exe


def terminal_modules(text: str) -> list[list[bool]]:
    """Rows of modules, True for light, from the QR lines of a terminal's output."""
    lines = [line for line in text.splitlines() if line and set(line) <= set(HALVES)]
    rows: list[list[bool]] = []
    for line in lines:
        rows.append([HALVES[c][0] for c in line])
        rows.append([HALVES[c][1] for c in line])
    return rows


def terminal_to_pgm(text: str, path: Path, scale: int = 6, pad: int = 4) -> Path:
    rows = terminal_modules(text)
    assert rows, "no QR code in the output"
    width = len(rows[0]) + 2 * pad
    light, dark = b"\xff", b"\x00"
    pixels = bytearray()
    blank = [True] * width
    for row in [blank] * pad + [[True] * pad + r + [True] * pad for r in rows] + [blank] * pad:
        line = b"".join((light if cell else dark) * scale for cell in row)
        pixels += line * scale
    header = f"P5\n{width * scale} {(len(rows) + 2 * pad) * scale}\n255\n".encode()
    path.write_bytes(header + bytes(pixels))
    return path


def decode(image: Path) -> str:
    done = subprocess.run(
        [zbarimg(), "--quiet", "--raw", str(image)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()

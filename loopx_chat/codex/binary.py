"""Find the codex executable to spawn.

Owns: `--codex-bin` / `LOOPX_CHAT_CODEX_BIN` / PATH lookup, and the step from the npm
wrapper (`@openai/codex/bin/codex.js`) to the native binary in the platform package. The
wrapper is a node process that *spawns* the native binary; SIGKILL of the wrapper orphans the
native process, which keeps the thread's writer lock, so we always spawn the native binary
when we can find it. It never spawns anything itself.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from loopx_chat.codex.app_server import child_environment
from loopx_chat.errors import CodexError, Remedy

# (sys.platform, machine) -> (platform package, target triple), as the wrapper maps them.
_PLATFORM_PACKAGES: dict[tuple[str, str], tuple[str, str]] = {
    ("linux", "x86_64"): ("codex-linux-x64", "x86_64-unknown-linux-musl"),
    ("linux", "aarch64"): ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
    ("linux", "arm64"): ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
    ("darwin", "x86_64"): ("codex-darwin-x64", "x86_64-apple-darwin"),
    ("darwin", "arm64"): ("codex-darwin-arm64", "aarch64-apple-darwin"),
}

INSTALL_REMEDY = Remedy(
    summary="Codex host tool is unavailable for loopx-chat.",
    next_action=(
        "Install the Codex CLI (npm install -g @openai/codex) or pass --codex-bin / set "
        "LOOPX_CHAT_CODEX_BIN to a working codex, then start loopx-chat again."
    ),
)


@dataclass(frozen=True)
class CodexBinary:
    """What to exec: `path` is the native binary when found, else what was given."""

    path: Path


def find_codex(codex_bin: str | None, environ: Mapping[str, str]) -> CodexBinary:
    requested = codex_bin or "codex"
    found = shutil.which(requested, path=environ.get("PATH", os.defpath))
    if found is None:
        raise CodexError(
            f"Codex executable {requested!r} is unavailable",
            error_code="host_tool_unavailable",
            remedy=INSTALL_REMEDY,
        )
    resolved = Path(found).resolve()
    native = native_binary_for_wrapper(resolved)
    if native is not None:
        return CodexBinary(path=native)
    return CodexBinary(path=Path(found).absolute())


def native_binary_for_wrapper(script: Path) -> Path | None:
    """The native binary beside an npm `@openai/codex/bin/codex.js`, or None."""
    if script.name != "codex.js" or script.parent.name != "bin":
        return None
    package_root = script.parent.parent  # .../node_modules/@openai/codex
    key = (sys.platform, platform.machine().lower())
    if key not in _PLATFORM_PACKAGES:
        return None
    package, triple = _PLATFORM_PACKAGES[key]
    exe = "codex.exe" if sys.platform == "win32" else "codex"
    # npm puts the platform package beside the wrapper, or nested below it.
    for scope_dir in (package_root.parent, package_root / "node_modules" / "@openai"):
        candidate = scope_dir / package / "vendor" / triple / "bin" / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def codex_version(binary: CodexBinary, environ: Mapping[str, str], codex_home: Path) -> str | None:
    """`codex --version` as a bare version string, or None when it cannot be read.

    Even this runs with the pinned home: codex writes scratch files under its CODEX_HOME at
    every start, and the ambient one is not ours to touch.
    """
    try:
        done = subprocess.run(
            [str(binary.path), "--version"],
            env=child_environment(environ, codex_home),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=10.0,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(done.stdout) if done.returncode == 0 else None


def parse_version(text: str) -> str | None:
    """The bare version in what `codex --version` prints (`codex-cli 0.171.0`), or None."""
    match = re.search(r"\d+\.\d+\.\d+[\w.+-]*", text)
    return match.group(0) if match else None

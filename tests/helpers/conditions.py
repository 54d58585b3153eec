"""System conditions for the state tests: a real small tmpfs and running as another user.

Both need root (CI runs as root). Without it they skip locally and FAIL under `CI`, so a
missing capability is never counted as a pass.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def small_tmpfs(where: Path, size: str = "256k") -> Iterator[Path]:
    """A real tmpfs of `size` mounted at `where`, unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        unavailable(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@contextmanager
def read_only_bind(where: Path) -> Iterator[Path]:
    """`where` re-mounted read-only over itself (root ignores mode bits, not a ro mount)."""
    steps = (
        ["mount", "--bind", str(where), str(where)],
        ["mount", "-o", "remount,bind,ro", str(where)],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)
            unavailable(f"cannot bind-mount read-only (needs root): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def as_nobody_prefix() -> list[str]:
    """The command prefix that runs the rest as `nobody` (root bypasses permission bits)."""
    if os.geteuid() != 0:
        unavailable("running as another user needs root")
    for tool in ("/usr/bin/setpriv", "/bin/setpriv"):
        if os.path.exists(tool):
            return [tool, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    unavailable("setpriv is not installed")
    return []  # pragma: no cover


RUNTIME_PACKAGES = ("loopx_chat", "click", "platformdirs", "psutil")


def nobody_runtime(base: Path) -> tuple[list[str], dict[str, str]]:
    """(argv prefix that runs `python -m loopx_chat`, env additions) that `nobody` can use
    wherever the checkout and its .venv live: a CI clone may sit in a 0700 folder that
    nobody cannot read, so the package and its dependencies are copied (world-readable)
    under `base` and run by the base interpreter without site-packages."""
    folder = base / "runtime"
    folder.mkdir(parents=True)
    for name in RUNTIME_PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        shutil.copytree(
            Path(spec.origin).parent, folder / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    python = getattr(sys, "_base_executable", sys.executable)
    return [python, "-S", "-m", "loopx_chat"], {"PYTHONPATH": str(folder)}

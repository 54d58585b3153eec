"""A launchd user and a service plist to resolve an install binding from, shared by the legacy
decoder and installer tests: HOME is `/Users/me`, the shell zsh, every startup file absent."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from loopx_chat.launchagent.binding import (
    InstallBinding,
    LaunchdUser,
    resolve_install_binding,
    startup_files_to_read,
)
from loopx_chat.launchagent.plist import ParsedPlist
from tests.helpers.fakes import FAKE_LAUNCHCTL

HOME = "/Users/me"
USER = LaunchdUser(home=HOME, name="me", shell="/bin/zsh")


def resolve_binding(
    *,
    explicit: str | None = None,
    existing: ParsedPlist | None = None,
    ambient: str | None = None,
    ambient_sqlite: str | None = None,
) -> InstallBinding:
    """The binding, with every startup file the plist's shell would read absent."""
    startup = dict.fromkeys(startup_files_to_read(existing, USER)) if existing else {}
    got, _ = resolve_install_binding(
        explicit=explicit,
        existing=existing,
        ambient_codex_home=ambient,
        user=USER,
        startup_text=startup,
        ambient_sqlite_home=ambient_sqlite,
    )
    return got


SERVICE = ("/usr/local/bin/loopx-chat", "serve")


def service_plist(env: dict[str, str] | None = None, args: Sequence[str] = SERVICE) -> ParsedPlist:
    return ParsedPlist(data={}, environment=env or {}, program_arguments=tuple(args))


def launchagent_cli(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """`loopx-chat launchagent ARGS --json` with HOME in `tmp_path` and the fake launchctl
    (its state in `tmp_path/launchd.json`) first on PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    fake = bindir / "launchctl"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_LAUNCHCTL}" "$@"\n')
    fake.chmod(0o755)
    env = {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN": "1",
        "FAKE_LAUNCHCTL_STATE": str(tmp_path / "launchd.json"),
        **extra,
    }
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "launchagent", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

"""A launchd user and a service plist to resolve an install binding from, shared by the legacy
decoder and installer tests: HOME is `/Users/me`, the shell zsh, every startup file absent."""

from __future__ import annotations

from collections.abc import Sequence

from loopx_chat.launchagent.binding import (
    InstallBinding,
    LaunchdUser,
    resolve_install_binding,
    startup_files_to_read,
)
from loopx_chat.launchagent.plist import ParsedPlist

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

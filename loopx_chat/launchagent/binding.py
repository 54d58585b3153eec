"""Which Codex home the LaunchAgent is bound to. Pure: decides from given values only.

Precedence (the point of the installer):
1. explicit `LOOPX_CHAT_CODEX_HOME` / `--codex-home`;
2. an existing plist: the home its service actually started with (`legacy.decode_program`:
   `EnvironmentVariables`, an `env` wrapper, or a legacy shell script that exports it, with
   `LOOPX_CHAT_CODEX_HOME` over `CODEX_HOME`), then `~/.codex` (the ambient `CODEX_HOME` is
   ignored once a plist exists: a later shell must not move an installed service);
3. a fresh install: the ambient `CODEX_HOME`, then `~/.codex`.

Every value must be an absolute path of printable characters; legacy scripts are tokenized,
never executed, and anything undecidable is refused (`legacy_binding_ambiguous`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from loopx_chat.launchagent.legacy import (
    decode_legacy_script,
    decode_program,
    decode_sqlite_home,
    expand_home_refs,
)
from loopx_chat.launchagent.plist import LaunchAgentError, ParsedPlist

__all__ = [
    "InstallBinding",
    "decode_legacy_script",
    "expand_home_refs",
    "resolve_install_binding",
]


# What an XML plist cannot carry (and no sane folder name has).
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class InstallBinding:
    path: str
    source: str
    # CODEX_SQLITE_HOME for the service, when one applies: codex keeps its thread index
    # there, so it moves with the home binding, never silently.
    sqlite_home: str | None = None


def _checked(value: str, source: str, sqlite_home: str | None = None) -> InstallBinding:
    if not PurePosixPath(value).is_absolute():
        raise LaunchAgentError(
            f"LOOPX_CHAT_CODEX_HOME must be absolute, got {value!r} (from {source})",
            error_code="codex_home_not_absolute",
        )
    if _CONTROL_CHARS.search(value):
        raise LaunchAgentError(
            f"the Codex home from {source} contains control characters; pass a plain "
            "absolute path as LOOPX_CHAT_CODEX_HOME",
            error_code="codex_home_not_absolute",
        )
    if sqlite_home is not None:
        sqlite_home = _checked(sqlite_home, f"CODEX_SQLITE_HOME ({source})").path
    return InstallBinding(path=posixpath.normpath(value), source=source, sqlite_home=sqlite_home)


def resolve_install_binding(
    *,
    explicit: str | None,
    existing: ParsedPlist | None,
    ambient_codex_home: str | None,
    user_home: str,
    ambient_sqlite_home: str | None = None,
) -> InstallBinding:
    """Decide the binding; raises `legacy_binding_ambiguous` / `codex_home_not_absolute`.

    The sqlite home goes with the home's source: an existing plist keeps its own; an explicit
    or fresh binding takes the installing shell's `CODEX_SQLITE_HOME`, if any.
    """
    ambient_sqlite = (
        expand_home_refs(ambient_sqlite_home, user_home) if ambient_sqlite_home else None
    )
    if explicit:
        return _checked(expand_home_refs(explicit, user_home), "explicit", ambient_sqlite)
    default = posixpath.join(user_home, ".codex")
    if existing is None:
        if ambient_codex_home:
            return _checked(
                expand_home_refs(ambient_codex_home, user_home),
                "ambient CODEX_HOME",
                ambient_sqlite,
            )
        return _checked(default, "default", ambient_sqlite)
    args, env = existing.program_arguments, existing.environment
    found = decode_program(args, env, user_home)
    sqlite = decode_sqlite_home(args, env, user_home)
    if found is not None:
        return _checked(found.value, found.source, sqlite)
    return _checked(default, "default (existing plist had no binding)", sqlite)

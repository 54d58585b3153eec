"""Which Codex home the LaunchAgent is bound to. Pure: decides from given values only.

Precedence (the point of the installer):
1. explicit `--codex-home` / `LOOPX_CHAT_CODEX_HOME` (a rebind when it differs from 2);
2. an existing plist: exactly the home its service would get if launchd started it today
   (`legacy.decode_service` gives the service's environment; loopx-chat's own precedence
   `LOOPX_CHAT_CODEX_HOME`, `CODEX_HOME`, `$HOME/.codex` is applied to it), or a refusal;
   the installing shell's `CODEX_HOME` is ignored once a plist exists, so a later shell
   never moves an installed service;
3. a fresh install: the ambient `CODEX_HOME`, then `~/.codex`.

`install` and `status` both call `existing_binding`, so they can never disagree. Every value
must be an absolute path of printable characters; nothing is ever executed.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from loopx_chat.home import HOME_ENV_PRECEDENCE
from loopx_chat.launchagent.legacy import (
    Ambiguous,
    ServiceLaunch,
    decode_service,
    launchd_environment,
    startup_files_for,
)
from loopx_chat.launchagent.plist import LaunchAgentError, ParsedPlist

# What an XML plist cannot carry (and no sane folder name has).
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class InstallBinding:
    path: str
    source: str
    # CODEX_SQLITE_HOME for the service, when one applies: codex keeps its thread index
    # there, so it moves with the home binding, never silently.
    sqlite_home: str | None = None
    # True when the existing plist carries the home in another form than ours (a shell
    # script, `CODEX_HOME`, an `env` wrapper, the implicit default): an upgrade rewrites it.
    legacy: bool = False


@dataclass(frozen=True)
class LaunchdUser:
    """What launchd puts in a job's environment for this user (TMPDIR is not known)."""

    home: str
    name: str | None = None
    shell: str | None = None


def expand_user_home(value: str, home: str) -> str:
    """`~` and `~/...` the way loopx-chat's own resolver expands them (nothing else)."""
    if value == "~" or value.startswith("~/"):
        return home + value[1:]
    return value


def _checked(value: str, source: str, sqlite_home: str | None = None) -> str:
    if not posixpath.isabs(value):
        raise LaunchAgentError(
            f"the Codex home from {source} must be an absolute path, got {value!r}; pass "
            "--codex-home <absolute home>",
            error_code="codex_home_not_absolute",
        )
    if _CONTROL_CHARS.search(value):
        raise LaunchAgentError(
            f"the Codex home from {source} contains control characters; pass a plain "
            "absolute path as --codex-home",
            error_code="codex_home_not_absolute",
        )
    return posixpath.normpath(value)


def _binding(value: str, source: str, sqlite: str | None, sqlite_source: str) -> InstallBinding:
    return InstallBinding(
        path=_checked(value, source),
        source=source,
        sqlite_home=_checked(sqlite, sqlite_source) if sqlite else None,
    )


def startup_files_to_read(existing: ParsedPlist, user: LaunchdUser) -> tuple[str, ...]:
    """The shell startup files `existing_binding` needs the text of (the caller reads them)."""
    env, _ = launchd_environment(
        existing.environment, user_home=user.home, user=user.name, shell=user.shell
    )
    return startup_files_for(existing.program_arguments, env)


def service_launch(
    existing: ParsedPlist, user: LaunchdUser, startup_text: Mapping[str, str | None]
) -> ServiceLaunch:
    program = existing.data.get("Program")
    if program is not None and (
        not existing.program_arguments or program != existing.program_arguments[0]
    ):
        raise Ambiguous("program_key", "the plist's `Program` differs from ProgramArguments[0]")
    env, origin = launchd_environment(
        existing.environment, user_home=user.home, user=user.name, shell=user.shell
    )
    return decode_service(existing.program_arguments, env, origin, startup_text)


def existing_binding(
    existing: ParsedPlist, user: LaunchdUser, startup_text: Mapping[str, str | None]
) -> InstallBinding:
    """The home the existing plist's service runs with, or `legacy_binding_ambiguous`."""
    launch = service_launch(existing, user, startup_text)
    env = launch.environment
    home_dir = env.get("HOME", "")
    if not home_dir:
        raise Ambiguous("home_unset", "the service starts without HOME")
    sqlite = env.get("CODEX_SQLITE_HOME") or None
    sqlite_source = f"CODEX_SQLITE_HOME from {launch.origin.get('CODEX_SQLITE_HOME', 'plist')}"
    if sqlite:
        sqlite = expand_user_home(sqlite, home_dir)
    for name in HOME_ENV_PRECEDENCE:
        value = env.get(name, "")
        if value:
            where = launch.origin.get(name, "EnvironmentVariables")
            binding = _binding(
                expand_user_home(value, home_dir),
                f"existing plist: {name} from {where}",
                sqlite,
                sqlite_source,
            )
            ours = name == "LOOPX_CHAT_CODEX_HOME" and where == "EnvironmentVariables"
            return _with_legacy(binding, not ours or launch.shell is not None)
    binding = _binding(
        posixpath.join(home_dir, ".codex"),
        "existing plist: no home variable, so $HOME/.codex",
        sqlite,
        sqlite_source,
    )
    return _with_legacy(binding, True)


def _with_legacy(binding: InstallBinding, legacy: bool) -> InstallBinding:
    return InstallBinding(binding.path, binding.source, binding.sqlite_home, legacy)


def resolve_install_binding(
    *,
    explicit: str | None,
    existing: ParsedPlist | None,
    ambient_codex_home: str | None,
    user: LaunchdUser,
    startup_text: Mapping[str, str | None],
    ambient_sqlite_home: str | None = None,
) -> tuple[InstallBinding, InstallBinding | None]:
    """(binding to install, the existing plist's binding or None).

    The existing binding is decided even when an explicit home is given, so a rebind can
    say what it replaces; a plist that cannot be decided does not stop an explicit rebind.
    The sqlite home goes with the home's source: an existing plist keeps its own; an
    explicit or fresh binding takes the installing shell's `CODEX_SQLITE_HOME`, if any.
    """
    ambient_sqlite = (
        expand_user_home(ambient_sqlite_home, user.home) if ambient_sqlite_home else None
    )
    current: InstallBinding | None = None
    if existing is not None:
        try:
            current = existing_binding(existing, user, startup_text)
        except LaunchAgentError:
            if not explicit:
                raise
    if explicit:
        return (
            _binding(
                expand_user_home(explicit, user.home),
                "explicit",
                ambient_sqlite,
                "CODEX_SQLITE_HOME (explicit install)",
            ),
            current,
        )
    if current is not None:
        return current, current
    if ambient_codex_home:
        chosen = _binding(
            expand_user_home(ambient_codex_home, user.home),
            "ambient CODEX_HOME",
            ambient_sqlite,
            "ambient CODEX_SQLITE_HOME",
        )
    else:
        chosen = _binding(
            posixpath.join(user.home, ".codex"), "default", ambient_sqlite, "CODEX_SQLITE_HOME"
        )
    return chosen, None

"""Which Codex home the systemd user service is bound to. Pure: decides from given texts only.

Precedence, as for the LaunchAgent:
1. explicit `--codex-home` / `LOOPX_CHAT_CODEX_HOME` (a rebind when it differs from 2);
2. an installed unit: exactly the home its service would get if systemd started it now. The
   environment is the unit's `Environment=` lines, then each drop-in's in file-name order,
   then the `EnvironmentFile=` files (which override, as in systemd); loopx-chat's own
   precedence (`LOOPX_CHAT_CODEX_HOME`, `CODEX_HOME`, `$HOME/.codex`) is applied to it. A
   unit whose `ExecStart=` does not start `loopx-chat serve` directly, or whose home cannot
   be read back exactly, is refused (`legacy_binding_ambiguous`);
3. a fresh install: the installing shell's `CODEX_HOME`, then `~/.codex`.

An explicit home that a drop-in or environment file would override is refused
(`binding_overridden`): the unit would say one home and the service run with another.
Nothing is ever executed; file texts are read by the caller.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loopx_chat.errors import Remedy
from loopx_chat.home import HOME_ENV_PRECEDENCE
from loopx_chat.systemd.unit import (
    STANDARD_PATH,
    ParsedUnit,
    ServiceUnitError,
    Unreadable,
    environment_assignments,
    is_service_argv,
)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class UnitBinding:
    path: str
    source: str
    sqlite_home: str | None = None


@dataclass(frozen=True)
class InstalledUnit:
    """What is on disk for the service: the unit, its drop-ins (file-name order) and the
    text of every `EnvironmentFile=` they name (None: no such file)."""

    unit: ParsedUnit
    dropins: tuple[ParsedUnit, ...] = ()
    env_files: Mapping[str, str | None] = None  # type: ignore[assignment]

    def files(self) -> tuple[ParsedUnit, ...]:
        return (self.unit, *self.dropins)


def ambiguous(detail: str) -> ServiceUnitError:
    return ServiceUnitError(
        f"cannot tell which Codex home the installed service runs with: {detail}. Nothing "
        "was changed; pass --codex-home to bind one explicitly",
        error_code="legacy_binding_ambiguous",
        remedy=Remedy(
            summary="The installed unit's Codex home cannot be decided.",
            next_action="Run `loopx-chat service install --codex-home /absolute/home`.",
        ),
    )


def env_file_assignments(text: str) -> dict[str, str]:
    """`NAME=value` lines of an environment file (`#`/`;` comments, one pair of quotes)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        name, eq, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if eq and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if eq:
            found[name] = value
    return found


def effective_environment(installed: InstalledUnit) -> tuple[dict[str, str], dict[str, str]]:
    """(environment, where each variable comes from) the service starts with."""
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    files: list[tuple[str, bool]] = []
    for parsed in installed.files():
        for line in parsed.lines:
            if line.section != "Service":
                continue
            if line.key == "Environment":
                if not line.value:
                    env, origin = {}, {}
                    continue
                try:
                    assigned = environment_assignments(line.value, parsed.user_home)
                except Unreadable as exc:
                    raise ambiguous(f"{parsed.where} has an Environment= with {exc}") from None
                env.update(assigned)
                origin.update(dict.fromkeys(assigned, parsed.where))
            elif line.key == "EnvironmentFile":
                if not line.value:
                    files = []
                else:
                    optional = line.value.startswith("-")
                    files.append((line.value[1:] if optional else line.value, optional))
    texts = installed.env_files or {}
    for path, optional in files:
        text = texts.get(path)
        if text is None:
            if optional:
                continue
            raise ambiguous(f"the environment file {path} cannot be read")
        assigned = env_file_assignments(text)
        env.update(assigned)
        origin.update(dict.fromkeys(assigned, path))
    return env, origin


def _checked(value: str, source: str) -> str:
    if not posixpath.isabs(value) or _CONTROL.search(value):
        raise ServiceUnitError(
            f"the Codex home from {source} must be a plain absolute path, got {value!r}; "
            "pass --codex-home <absolute home>",
            error_code="codex_home_not_absolute",
        )
    return posixpath.normpath(value)


def _expand(value: str, home: str) -> str:
    return home + value[1:] if value == "~" or value.startswith("~/") else value


def existing_binding(installed: InstalledUnit, user_home: str) -> UnitBinding:
    """The home the installed service runs with, or `legacy_binding_ambiguous`."""
    try:
        argv = installed.unit.exec_start()
    except Unreadable as exc:
        raise ambiguous(f"its ExecStart= holds {exc}") from None
    if not (is_service_argv(argv) and "serve" in argv):
        raise ambiguous("its ExecStart= does not start `loopx-chat serve` directly")
    env, origin = effective_environment(installed)
    sqlite = env.get("CODEX_SQLITE_HOME") or None
    sqlite = _checked(_expand(sqlite, user_home), "CODEX_SQLITE_HOME") if sqlite else None
    for name in HOME_ENV_PRECEDENCE:
        if env.get(name):
            where = posixpath.basename(origin.get(name, "")) or "the unit"
            source = f"installed unit: {name} from {where}"
            return UnitBinding(_checked(_expand(env[name], user_home), source), source, sqlite)
    source = "installed unit: no home variable, so $HOME/.codex"
    return UnitBinding(posixpath.join(user_home, ".codex"), source, sqlite)


def overriding_file(installed: InstalledUnit | None) -> str | None:
    """The drop-in or environment file that sets the service's home over the unit, if any."""
    if installed is None:
        return None
    try:
        _, origin = effective_environment(installed)
    except ServiceUnitError:
        return None
    where = origin.get("LOOPX_CHAT_CODEX_HOME")
    return where if where and where != installed.unit.where else None


def resolve_binding(
    *,
    explicit: str | None,
    installed: InstalledUnit | None,
    ambient_codex_home: str | None,
    ambient_sqlite_home: str | None,
    user_home: str,
) -> tuple[UnitBinding, UnitBinding | None]:
    """(binding to install, the installed unit's binding or None)."""
    current: UnitBinding | None = None
    if installed is not None:
        try:
            current = existing_binding(installed, user_home)
        except ServiceUnitError:
            if not explicit:
                raise
    sqlite = _expand(ambient_sqlite_home, user_home) if ambient_sqlite_home else None
    if explicit:
        chosen = UnitBinding(
            _checked(_expand(explicit, user_home), "explicit"),
            "explicit",
            _checked(sqlite, "CODEX_SQLITE_HOME") if sqlite else None,
        )
        over = overriding_file(installed)
        if over and (current is None or current.path != chosen.path):
            raise ServiceUnitError(
                f"{over} sets LOOPX_CHAT_CODEX_HOME, which would override the home the unit "
                f"binds ({chosen.path}); nothing was changed",
                error_code="binding_overridden",
                remedy=Remedy(
                    summary="A drop-in or environment file of yours sets the Codex home.",
                    next_action=f"Remove LOOPX_CHAT_CODEX_HOME from {over}, then install again.",
                ),
            )
        return chosen, current
    if current is not None:
        return current, current
    if ambient_codex_home:
        path = _checked(_expand(ambient_codex_home, user_home), "ambient CODEX_HOME")
        source = "ambient CODEX_HOME"
    else:
        path, source = posixpath.join(user_home, ".codex"), "default"
    return UnitBinding(
        path, source, _checked(sqlite, "CODEX_SQLITE_HOME") if sqlite else None
    ), None


def service_environment(
    binding: UnitBinding, codex_bin: str | None, state_dir: str | None
) -> tuple[tuple[str, str], ...]:
    """The `Environment=` pairs loopx-chat writes, in a fixed order."""
    path: list[str] = [posixpath.dirname(codex_bin)] if codex_bin else []
    path += [p for p in STANDARD_PATH if p not in path]
    env: list[tuple[str, str]] = [("LOOPX_CHAT_CODEX_HOME", binding.path)]
    if binding.sqlite_home:
        env.append(("CODEX_SQLITE_HOME", binding.sqlite_home))
    if codex_bin:
        env.append(("LOOPX_CHAT_CODEX_BIN", codex_bin))
    if state_dir:
        env.append(("LOOPX_CHAT_STATE_DIR", state_dir))
    env.append(("PATH", ":".join(path)))
    return tuple(env)


def dropin_order(names: Sequence[str]) -> list[str]:
    """Drop-ins apply in file-name order; only `*.conf` files count."""
    return sorted(n for n in names if n.endswith(".conf"))

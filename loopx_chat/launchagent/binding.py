"""Which Codex home the LaunchAgent is bound to. Pure: decides from given values only.

Precedence (the point of the installer):
1. explicit `LOOPX_CHAT_CODEX_HOME` / `--codex-home`;
2. an existing plist: `EnvironmentVariables.LOOPX_CHAT_CODEX_HOME`, then
   `EnvironmentVariables.CODEX_HOME`, then a home decoded from a legacy
   `[<sh|bash|zsh>, "-c", SCRIPT]` argv, then `~/.codex` (the ambient `CODEX_HOME` is ignored
   once a plist exists: a later shell must not move an installed service);
3. a fresh install: the ambient `CODEX_HOME`, then `~/.codex`.

Legacy scripts are tokenized, never executed. `~`, `$HOME` and `${HOME}` expand to the user's
home; any other expansion makes the binding ambiguous and the install refuses.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

from loopx_chat.launchagent.plist import LaunchAgentError, ParsedPlist

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
HOME_VARS = ("LOOPX_CHAT_CODEX_HOME", "CODEX_HOME")
AMBIGUOUS_NEXT = "pass LOOPX_CHAT_CODEX_HOME=<absolute home> explicitly to install"


@dataclass(frozen=True)
class InstallBinding:
    path: str
    source: str


def _ambiguous(detail: str) -> LaunchAgentError:
    return LaunchAgentError(
        f"the existing LaunchAgent's Codex home cannot be decoded safely ({detail}); "
        f"{AMBIGUOUS_NEXT}",
        error_code="legacy_binding_ambiguous",
    )


def expand_home_refs(value: str, user_home: str) -> str:
    """Expand `~`, `$HOME`, `${HOME}` at the start; refuse every other expansion."""
    for prefix in ("${HOME}", "$HOME", "~"):
        if value == prefix or value.startswith(prefix + "/"):
            value = user_home + value[len(prefix) :]
            break
    if "$" in value or "`" in value:
        raise _ambiguous("the value uses shell expansion")
    return value


def _tokens(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError as exc:  # unbalanced quotes
        raise _ambiguous(f"the script does not tokenize: {exc}") from None


def decode_legacy_script(script: str, user_home: str) -> tuple[str, str] | None:
    """Return (variable, value) of the home set by a legacy shell script, or None.

    `LOOPX_CHAT_CODEX_HOME` wins over `CODEX_HOME` when a script sets both.
    """
    if "`" in script or "$(" in script:
        # A command substitution anywhere in the script could rewrite the home at run time,
        # so the whole script is refused, not only the assignment.
        raise _ambiguous("the script contains command substitution")
    found: dict[str, set[str]] = {}
    tokens = _tokens(script)
    for i, token in enumerate(tokens):
        name, eq, value = token.partition("=")
        if not eq or name not in HOME_VARS:
            continue
        exported = i > 0 and tokens[i - 1] == "export"
        # `CODEX_HOME=/x exec tool` sets it for that command only, which is the service.
        prefix_form = i + 1 < len(tokens) and tokens[i + 1] not in (";", "&&", "||", "&")
        if exported or prefix_form:
            found.setdefault(name, set()).add(value)
    for name in HOME_VARS:
        values = found.get(name)
        if not values:
            continue
        if len(values) > 1:
            raise _ambiguous(f"{name} is assigned more than once with different values")
        return name, expand_home_refs(values.pop(), user_home)
    return None


def legacy_script(parsed: ParsedPlist) -> str | None:
    args = parsed.program_arguments
    if len(args) == 3 and posixpath.basename(args[0]) in SHELLS and args[1] == "-c":
        return args[2]
    return None


def _checked(value: str, source: str) -> InstallBinding:
    if not PurePosixPath(value).is_absolute():
        raise LaunchAgentError(
            f"LOOPX_CHAT_CODEX_HOME must be absolute, got {value!r} (from {source})",
            error_code="codex_home_not_absolute",
        )
    return InstallBinding(path=posixpath.normpath(value), source=source)


def resolve_install_binding(
    *,
    explicit: str | None,
    existing: ParsedPlist | None,
    ambient_codex_home: str | None,
    user_home: str,
) -> InstallBinding:
    """Decide the binding; raises `legacy_binding_ambiguous` / `codex_home_not_absolute`."""
    if explicit:
        return _checked(expand_home_refs(explicit, user_home), "explicit")
    default = posixpath.join(user_home, ".codex")
    if existing is None:
        if ambient_codex_home:
            return _checked(expand_home_refs(ambient_codex_home, user_home), "ambient CODEX_HOME")
        return _checked(default, "default")
    for name in HOME_VARS:
        value = existing.environment.get(name, "")
        if value:
            return _checked(value, f"existing plist EnvironmentVariables.{name}")
    script = legacy_script(existing)
    if script is not None:
        decoded = decode_legacy_script(script, user_home)
        if decoded is not None:
            name, value = decoded
            return _checked(value, f"existing plist legacy shell export of {name}")
    return _checked(default, "default (existing plist had no binding)")

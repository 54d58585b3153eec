"""Which Codex home an older LaunchAgent's program ran with. Pure: tokenizes, never executes.

Owns reading `ProgramArguments` (plus the plist's `EnvironmentVariables`) the way the shell
would have: an optional `env NAME=VALUE ...` wrapper, then `<sh|bash|zsh|dash|ksh> [options]
-c SCRIPT [args]`, whose script is followed through its straight-line commands
(`NAME=VALUE`, `export`, `unset`, `exec` / the last command, with the usual prefix
assignments) to the environment the service was started with. What the service saw wins,
so a script's `export CODEX_HOME=...` overrides the plist's `EnvironmentVariables`, and
`LOOPX_CHAT_CODEX_HOME` wins over `CODEX_HOME` as it does in loopx-chat.

It fails closed (`legacy_binding_ambiguous`) whenever the home could be something it cannot
see: command substitution, control flow (`&&`, `||`, `|`, `if`, subshells), `source`/`.`/
`eval`, `set -a`, a script file instead of `-c`, shell expansions other than `~`/`$HOME`,
a quoted `~`, different values assigned to one variable, startup files that may set the home
(login or interactive shells, zsh's `.zshenv`, bash's `$BASH_ENV`) when the script does not
set it itself, or a home variable named anywhere it could not decode. It never returns a
guess.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loopx_chat.home import HOME_ENV_PRECEDENCE
from loopx_chat.launchagent.plist import LaunchAgentError

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
HOME_VARS: tuple[str, ...] = HOME_ENV_PRECEDENCE  # what loopx-chat itself reads, in order
AMBIGUOUS_NEXT = "pass LOOPX_CHAT_CODEX_HOME=<absolute home> explicitly to install"

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_CONTROL = frozenset({"&&", "||", "|", "&", "(", ")", ";;", "|&", "{", "}", "!"})
_UNDECODABLE_COMMANDS = frozenset(
    {
        *("if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until"),
        *("do", "done", "select", "function", "[[", "]]", "[", "test", ".", "source"),
        *("eval", "read", "declare", "typeset", "local", "readonly", "alias", "trap"),
    }
)
_SAFE_LONG_OPTIONS = frozenset({"--noprofile", "--norc", "--posix", "--no-rcs"})


@dataclass(frozen=True)
class LegacyHome:
    """The home variable the old service saw, its raw value, and where it came from."""

    name: str
    value: str
    source: str


def ambiguous(detail: str) -> LaunchAgentError:
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
        raise ambiguous("the value uses shell expansion")
    return value


def _mentions_home(parts: Sequence[str]) -> bool:
    return any("CODEX_HOME" in part for part in parts)


def _tokens(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"  # a newline ends a command, like `;`
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError as exc:  # unbalanced quotes
        raise ambiguous(f"the script does not tokenize: {exc}") from None


def _commands(tokens: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False  # a redirection's target
            continue
        if set(token) <= {";", "\n"}:
            commands.append([])
        elif token in _CONTROL:
            raise ambiguous("the script uses control flow")
        elif set(token) <= {"<", ">", "&"} and ("<" in token or ">" in token):
            skip_next = not token.endswith("&")  # `>file`, `2>&1`: redirections, no env effect
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def _checked_value(name: str, value: str, script: str, user_home: str) -> str:
    # shlex drops quotes; the shell expands `~` only unquoted and `$HOME` not in '...'.
    if value.startswith("~") and f"{name}=~" not in script:
        raise ambiguous(f"{name} is a quoted `~`, which the shell does not expand")
    if "$" in value and f"{name}='" in script:
        raise ambiguous(f"{name} is single-quoted with a `$` the shell did not expand")
    return expand_home_refs(value, user_home)


def _service_environment(
    script: str, inherited: Mapping[str, str], user_home: str, names: Sequence[str]
) -> tuple[dict[str, str], set[str]]:
    """The environment the script's service command started with, and the names the script
    itself assigned on the way."""
    if "`" in script or "$(" in script:
        # Anywhere in the script, a substitution could rewrite the home at run time.
        raise ambiguous("the script contains command substitution")
    variables = dict(inherited)
    exported = set(inherited)  # inherited variables stay exported when reassigned
    assigned: dict[str, set[str]] = {}
    set_by_script: set[str] = set()
    service_env: dict[str, str] | None = None

    def assign(name: str, value: str) -> None:
        assigned.setdefault(name, set()).add(value)
        variables[name] = value
        set_by_script.add(name)

    for command in _commands(_tokens(script)):
        prefix: list[tuple[str, str]] = []
        while command and (match := _ASSIGNMENT.match(command[0])):
            prefix.append((match.group(1), match.group(2)))
            command = command[1:]
        if not command:
            for name, value in prefix:
                assign(name, value)
            continue
        head, args = command[0], command[1:]
        if head in _UNDECODABLE_COMMANDS:
            raise ambiguous(f"the script runs `{head}`")
        if head == "export":
            for arg in args:
                if arg.startswith("-"):
                    raise ambiguous("the script uses `export` with options")
                name, eq, value = arg.partition("=")
                if eq:
                    assign(name, value)
                exported.add(name)
            continue
        if head == "unset":
            for name in args:
                variables.pop(name, None)
                exported.discard(name)
                set_by_script.add(name)
            continue
        if head == "set":
            if any(a.startswith("-") and "a" in a[1:] for a in args) or "allexport" in args:
                raise ambiguous("the script exports every variable (`set -a`)")
            continue
        env = {name: variables[name] for name in exported if name in variables}
        for name, value in prefix:
            assigned.setdefault(name, set()).add(value)
            set_by_script.add(name)
            env[name] = value
        service_env = env
        if head == "exec":
            break  # nothing after an exec runs
    if service_env is None:
        service_env = {name: variables[name] for name in exported if name in variables}
    for name in names:
        if len(assigned.get(name, ())) > 1:
            raise ambiguous(f"{name} is assigned more than once with different values")
        if name in service_env and name in set_by_script:
            service_env[name] = _checked_value(name, service_env[name], script, user_home)
    return service_env, set_by_script


def _shell_script(args: Sequence[str]) -> tuple[str, str, set[str]]:
    """(shell, script, option letters) of `<shell> [options] -c SCRIPT [name [args]]`."""
    shell = posixpath.basename(args[0])
    letters: set[str] = set()
    i = 1
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "+o"):
            i += 2
            continue
        if arg == "--login":
            letters.add("l")
        elif arg.startswith("--"):
            if arg not in _SAFE_LONG_OPTIONS:
                raise ambiguous(f"the shell runs with option {arg}")
            if arg == "--no-rcs":
                letters.add("f")
        elif arg.startswith(("-", "+")) and len(arg) > 1:
            if arg[0] == "-":
                letters.update(arg[1:])
        else:
            break
        i += 1
    if "c" not in letters or i >= len(args):
        raise ambiguous(f"the LaunchAgent runs {shell} on a script file, which may set the home")
    return shell, args[i], letters


def decode_program(
    args: Sequence[str], environment: Mapping[str, str], user_home: str
) -> LegacyHome | None:
    """The home the old LaunchAgent's service started with, or None when it had none set.

    `environment` is the plist's `EnvironmentVariables`. Raises `legacy_binding_ambiguous`
    rather than guess.
    """
    return _decode(args, environment, user_home, HOME_VARS, startup_files_matter=True)


def decode_sqlite_home(
    args: Sequence[str], environment: Mapping[str, str], user_home: str
) -> str | None:
    """The `CODEX_SQLITE_HOME` the old service started with (it is half of a home's identity:
    codex keeps its thread index there), or None. Only what the plist itself shows counts:
    startup files are not suspected of setting it (it is rare, and the home is what binds)."""
    found = _decode(
        args, environment, user_home, ("CODEX_SQLITE_HOME",), startup_files_matter=False
    )
    return found.value if found else None


def _decode(
    args: Sequence[str],
    environment: Mapping[str, str],
    user_home: str,
    names: Sequence[str],
    *,
    startup_files_matter: bool,
) -> LegacyHome | None:
    inherited = dict(environment)
    from_env_wrapper: set[str] = set()
    rest = list(args)
    if rest and posixpath.basename(rest[0]) == "env":
        rest = rest[1:]
        while rest and (match := _ASSIGNMENT.match(rest[0])):
            inherited[match.group(1)] = match.group(2)
            from_env_wrapper.add(match.group(1))
            rest = rest[1:]
        if rest and rest[0].startswith("-"):
            raise ambiguous(f"`env` runs with option {rest[0]}")
    if not rest or posixpath.basename(rest[0]) not in SHELLS:
        if _mentions_home(rest):
            raise ambiguous("a Codex home is named in the program's arguments")
        return _pick(inherited, set(), from_env_wrapper, user_home, names)
    shell, script, letters = _shell_script(rest)
    service_env, set_by_script = _service_environment(script, inherited, user_home, names)
    startup_files = (
        bool({"l", "i"} & letters)
        or (shell == "zsh" and "f" not in letters)
        or (shell == "bash" and "BASH_ENV" in inherited)
    )
    found = _pick(service_env, set_by_script, from_env_wrapper, user_home, names)
    if (
        startup_files_matter
        and startup_files
        and (found is None or found.name not in set_by_script)
    ):
        raise ambiguous(
            f"{shell} reads startup files ({'login' if 'l' in letters else 'rc'} files) that may "
            "set the home, and the script does not set it itself"
        )
    return found


def _pick(
    env: Mapping[str, str],
    set_by_script: set[str],
    from_wrapper: set[str],
    user_home: str,
    names: Sequence[str],
) -> LegacyHome | None:
    for name in names:
        value = env.get(name, "")
        if not value:
            continue
        if name in set_by_script:
            source = f"existing plist legacy shell export of {name}"
        elif name in from_wrapper:
            source = f"existing plist `env` assignment of {name}"
            value = expand_home_refs(value, user_home)
        else:
            source = f"existing plist EnvironmentVariables.{name}"
        return LegacyHome(name, value, source)
    return None


def decode_legacy_script(script: str, user_home: str) -> tuple[str, str] | None:
    """(variable, value) a plain `sh -c SCRIPT` gives its service, or None."""
    found = decode_program(("/bin/sh", "-c", script), {}, user_home)
    return (found.name, found.value) if found else None

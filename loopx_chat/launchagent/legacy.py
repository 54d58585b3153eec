"""The environment an existing LaunchAgent's service starts with. Pure: parses, never executes.

Owns one question: if launchd started this plist today, which environment would the service
program receive? launchd gives a minimal environment (HOME, PATH, USER, LOGNAME, SHELL,
TMPDIR) with the plist's `EnvironmentVariables` over it, then execs `ProgramArguments`.
When that argv runs a shell script, the script is read against a small allowlist grammar
that is modelled exactly, the way sh (bash in POSIX mode), dash, bash and zsh all run it:

    script     := statement ((";" | newline) statement)*
    statement  := NAME=WORD ...                 (shell variables; exported if already so)
                | export NAME[=WORD] ...        | unset [-v] NAME ...
                | exec REDIRECTION ...          (redirects the shell, nothing else)
                | [NAME=WORD ...] [exec] PROGRAM WORD ...   (the service; nothing after it)
    WORD       := unquoted, '...' and "..." text, `\\x` escapes, `~` or `~/` at its start
                  (after `=` in an assignment; HOME set), `$NAME` / `${NAME}` of known variables
    PROGRAM    := env [-i] [-u NAME] [NAME=VALUE]... | nohup | nice [-n N]  ... in front of
                  loopx-chat / loopx / python -m loopx_chat

Startup files the shell would read (zsh's `.zshenv`, a login shell's profiles) are named by
`startup_files`; the caller reads them and hands their text back. None existing is fine; one
that exists must be inert (it cannot set a home variable, HOME, or how the script runs).

Anything outside the grammar is refused with `legacy_binding_ambiguous`, naming the construct
(`detail`, a stable code per rule) and saying that `--codex-home` settles it. It never returns
a guess and never evaluates anything: binding another home than the service's would send the
user's next turn to another account's history.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loopx_chat.launchagent.plist import LaunchAgentError, is_service_argv

SHELLS = frozenset({"sh", "bash", "zsh", "dash"})
AMBIGUOUS_NEXT = "pass --codex-home <absolute home> (or LOOPX_CHAT_CODEX_HOME) to install"
LAUNCHD_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UPPER_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# Set or changed by the shell itself, so their value is not the environment's.
_SHELL_OWNED = frozenset(
    {
        *("PWD", "OLDPWD", "SHLVL", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "PPID", "UID"),
        *("EUID", "GID", "EGID", "OPTIND", "OPTARG", "IFS", "PS1", "PS2", "PS4", "HOSTNAME"),
        *("HOSTTYPE", "MACHTYPE", "OSTYPE", "USERNAME", "TTY", "HISTCMD", "COLUMNS", "LINES"),
        *("EPOCHSECONDS", "EPOCHREALTIME", "ERRNO", "ENV", "BASH_ENV", "ZDOTDIR", "_"),
    }
)
# `${NAME}`, or `${NAME:-word}` / `${NAME-word}` with a plain word (no expansion, quoting,
# `~` or space in it: each of those is expanded differently inside the braces by some shell).
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([A-Za-z0-9_./:@%+,=-]*))?")
_UNQUOTED_SPECIAL = set("*?[]{}!^()<>&|;`\"'\\$~#=")
_IFS_OR_GLOB = re.compile(r"[ \t\n*?\[\]]")
# What an inert startup file must not contain: anything that could set a home variable or
# HOME, move where later startup files are read from, or change how the script runs.
_STARTUP_COMMANDS = (
    *("source", ".", "eval", "alias", "setopt", "unsetopt", "set", "emulate", "exec"),
    *("function", "typeset", "declare", "readonly", "local", "unset", "builtin", "command"),
    *("trap", "enable", "disable", "autoload", "zmodload"),
)
_STARTUP_DANGER = re.compile(
    r"CODEX_HOME|CODEX_SQLITE_HOME|ZDOTDIR|\bHOME\s*=|\bexport\b[^;\n]*\bHOME\b|\(\s*\)"
    r"|(^|[\s;&|(`])(" + "|".join(re.escape(c) for c in _STARTUP_COMMANDS) + r")(?=$|[\s;&|)])",
    re.M,
)
_COMMENT = re.compile(r"(^|\s)#.*$", re.M)


class Ambiguous(LaunchAgentError):
    """`legacy_binding_ambiguous`, with the rule that refused as a stable `detail` code."""

    def __init__(self, detail: str, what: str) -> None:
        super().__init__(
            f"the existing LaunchAgent's Codex home cannot be decided safely: {what} "
            f"[{detail}]; {AMBIGUOUS_NEXT}",
            error_code="legacy_binding_ambiguous",
        )
        self.detail = detail


@dataclass(frozen=True)
class ServiceLaunch:
    """What the service program receives: its argv, its environment, and where each variable
    came from (`EnvironmentVariables`, `launchd`, `shell script`, `env wrapper`)."""

    program: tuple[str, ...]
    environment: Mapping[str, str]
    origin: Mapping[str, str] = field(default_factory=dict)
    shell: str | None = None


def launchd_environment(
    plist_env: Mapping[str, str], *, user_home: str, user: str | None, shell: str | None
) -> tuple[dict[str, str], dict[str, str]]:
    """launchd's minimal environment with the plist's `EnvironmentVariables` over it, and the
    origin of each variable. TMPDIR is launchd's per-user folder, which is not known here."""
    env: dict[str, str] = {"HOME": user_home, "PATH": LAUNCHD_PATH}
    if user:
        env["USER"] = env["LOGNAME"] = user
    if shell:
        env["SHELL"] = shell
    origin = dict.fromkeys(env, "launchd")
    env.update(plist_env)
    origin.update(dict.fromkeys(plist_env, "EnvironmentVariables"))
    return env, origin


# -- the shell script ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Part:
    kind: str  # "text" | "param" | "param_default" | "tilde" | "tilde_eq"
    value: str
    quoted: bool = False  # a `~` is never quoted (quoted, it is text)


@dataclass
class _Word:
    parts: list[_Part] = field(default_factory=list)

    def assignment(self) -> tuple[str, list[_Part]] | None:
        """(NAME, value parts) when the word starts with an unquoted `NAME=`."""
        if not self.parts or self.parts[0].kind != "text" or self.parts[0].quoted:
            return None
        match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", self.parts[0].value)
        if not match:
            return None
        rest = self.parts[0].value[match.end() :]
        value = ([_Part("text", rest, False)] if rest else []) + self.parts[1:]
        return match.group(1), value


@dataclass
class _Statement:
    words: list[_Word] = field(default_factory=list)
    redirected: bool = False


def _merged(word: _Word) -> _Word:
    """Adjacent text of the same quoting as one part, so `NAME=` reads as one piece."""
    parts: list[_Part] = []
    for part in word.parts:
        last = parts[-1] if parts else None
        if last and last.kind == part.kind == "text" and last.quoted == part.quoted:
            parts[-1] = _Part("text", last.value + part.value, part.quoted)
        else:
            parts.append(part)
    return _Word(parts)


class _Lexer:
    """Splits a script into statements of words, refusing what the grammar does not hold."""

    def __init__(self, script: str) -> None:
        self.s = script
        self.i = 0

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def statements(self) -> list[_Statement]:
        out = [_Statement()]
        while self.i < len(self.s):
            c = self.peek()
            if c in " \t":
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2  # a line continuation between words
            elif c in ";\n":
                if c == ";" and self.peek(1) == ";":
                    raise Ambiguous("control_flow", "the script uses `;;`")
                out.append(_Statement())
                self.i += 1
            elif c == "#":
                while self.i < len(self.s) and self.peek() != "\n":
                    self.i += 1
            elif c in "&|()":
                raise Ambiguous("control_flow", f"the script uses `{c}` (control flow)")
            elif c in "<>" or (c.isdigit() and self._redirection_ahead()):
                self._redirection()
                out[-1].redirected = True
            else:
                out[-1].words.append(self._word())
        return [st for st in out if st.words or st.redirected]

    def _redirection_ahead(self) -> bool:
        j = self.i
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        return j < len(self.s) and self.s[j] in "<>"

    def _redirection(self) -> None:
        while self.peek().isdigit():
            self.i += 1
        op = self.peek()
        self.i += 1
        if op == "<" and self.peek() == "<":
            raise Ambiguous("heredoc", "the script uses a heredoc")
        doubled = self.peek() in (">", "|") and op == ">"
        if doubled:
            self.i += 1  # `>>` or `>|`
        if self.peek() == "&":
            if doubled:
                # `>>&2` and `>|&2`: a syntax error to bash and dash, a redirection of both
                # streams to zsh (which also refuses `>|&`). The shells disagree: refuse.
                raise Ambiguous("redirection", "the script uses a redirection it cannot read")
            self.i += 1
            start = self.i
            while self.peek().isdigit() or self.peek() == "-":
                self.i += 1
            if self.i == start:
                raise Ambiguous("redirection", "the script uses a redirection it cannot read")
            return
        # Tuples, not strings: at the end of the script peek() is "", which is in every str.
        if self.peek() in ("<", ">", "&", "|", "("):
            raise Ambiguous("redirection", "the script uses a redirection it cannot read")
        while self.peek() in (" ", "\t"):
            self.i += 1
        if self.peek() in ("", "\n", ";"):
            raise Ambiguous("redirection", "a redirection has no target")
        self._word()  # the target: no effect on the environment

    def _word(self) -> _Word:
        word = _Word()
        start = self.i
        while self.i < len(self.s):
            c = self.peek()
            if c in " \t\n;&|()<>":
                break
            if c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise Ambiguous("unbalanced_quote", "the script has an unclosed quote")
                word.parts.append(_Part("text", self.s[self.i + 1 : end], True))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._double_quoted(word)
            elif c == "\\":
                nxt = self.peek(1)
                if nxt == "":
                    raise Ambiguous("unbalanced_quote", "the script ends in a backslash")
                if nxt != "\n":  # `\<newline>` is removed
                    word.parts.append(_Part("text", nxt, True))
                self.i += 2
            elif c == "$":
                word.parts.append(self._dollar(quoted=False))
            elif c == "`":
                raise Ambiguous("command_substitution", "the script contains command substitution")
            elif c == "~" and self.i == start:
                self.i += 1
                self._tilde(word)
            elif c == "~" and self._after_assignment_equals(start):
                self.i += 1
                self._tilde(word, kind="tilde_eq")
            elif c in _UNQUOTED_SPECIAL and not (c in "=#" and self.i > start):
                # `=` and `#` inside a word are plain text in every shell modelled here.
                what = "a word starting with `=`" if c == "=" else f"an unquoted `{c}`"
                raise Ambiguous("unquoted_special", f"the script uses {what}")
            else:
                word.parts.append(_Part("text", c, False))
                self.i += 1
        return _merged(word)

    def _after_assignment_equals(self, start: int) -> bool:
        before = self.s[start : self.i]
        return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=", before))

    def _tilde(self, word: _Word, kind: str = "tilde") -> None:
        if self.peek() not in ("/", "", " ", "\t", "\n", ";"):
            raise Ambiguous("tilde_user", "the script uses `~user` or `~` before a non-slash")
        word.parts.append(_Part(kind, "~"))

    def _double_quoted(self, word: _Word) -> None:
        while True:
            c = self.peek()
            if c == "":
                raise Ambiguous("unbalanced_quote", "the script has an unclosed quote")
            if c == '"':
                self.i += 1
                return
            if c == "\\" and self.peek(1) in ('"', "\\", "$", "`", "\n"):
                if self.peek(1) != "\n":
                    word.parts.append(_Part("text", self.peek(1), True))
                self.i += 2
            elif c == "$":
                word.parts.append(self._dollar(quoted=True))
            elif c == "`":
                raise Ambiguous("command_substitution", "the script contains command substitution")
            else:
                word.parts.append(_Part("text", c, True))
                self.i += 1

    def _dollar(self, *, quoted: bool) -> _Part:
        nxt = self.peek(1)
        if nxt == "(":
            raise Ambiguous("command_substitution", "the script contains command substitution")
        if nxt == "{":
            inner, closed, _ = self.s[self.i + 2 :].partition("}")
            match = _BRACED.fullmatch(inner) if closed else None
            if not match:
                raise Ambiguous(
                    "parameter_operator",
                    "the script uses a parameter expansion with an operator other than "
                    "`${NAME:-word}` / `${NAME-word}` (e.g. `${NAME:=word}`)",
                )
            self.i += len(inner) + 3  # `${`, the inside, `}`
            name, op, default = match.group(1), match.group(2), match.group(3)
            if op:
                return _Part("param_default", f"{name}\0{op}\0{default}", quoted)
            return _Part("param", name, quoted)
        match = _NAME.match(self.s, self.i + 1)
        if not match:
            if nxt in ("'", '"'):
                raise Ambiguous("dollar_quote", "the script uses `$'...'` or `$\"...\"` quoting")
            raise Ambiguous("special_parameter", "the script uses a special parameter (`$1`, `$@`)")
        self.i = match.end()
        return _Part("param", match.group(0), quoted)


class _Shell:
    """Runs the allowlisted statements over a model of the shell's variables."""

    def __init__(self, env: Mapping[str, str], origin: Mapping[str, str]) -> None:
        self.vars = dict(env)
        self.exported = set(env)
        self.origin = dict(origin)

    def expand(self, parts: Sequence[_Part], *, split_context: bool) -> str:
        out: list[str] = []
        for part in parts:
            if part.kind == "text":
                out.append(part.value)
            elif part.kind == "tilde":
                out.append(self._home())
            elif part.kind == "tilde_eq":
                if split_context:
                    # bash expands `~` after `=` in an argument, POSIX sh and zsh do not.
                    raise Ambiguous("tilde_in_argument", "an argument has `~` after `=`")
                out.append(self._home())
            else:
                if part.kind == "param_default":
                    name, op, default = part.value.split("\0")
                    value = self._known(name) if name in self.vars else ""
                    if name not in self.vars or (op == ":-" and not value):
                        value = default
                    self._known(name)  # the same refusal of shell-owned names
                else:
                    value = self._known(part.value)
                if split_context and not part.quoted and _IFS_OR_GLOB.search(value):
                    raise Ambiguous(
                        "word_splitting",
                        f"${part.value} is unquoted and its value would be split or globbed",
                    )
                out.append(value)
        return "".join(out)

    def _home(self) -> str:
        if "HOME" not in self.vars:
            # With HOME unset, bash and zsh read the user database and dash leaves `~` as is.
            raise Ambiguous("tilde_without_home", "the script uses `~` while HOME is unset")
        return self._known("HOME")

    def _known(self, name: str) -> str:
        if (
            name in _SHELL_OWNED
            or name.startswith(("BASH", "ZSH"))
            or not _UPPER_NAME.fullmatch(name)
        ):
            raise Ambiguous("shell_variable", f"the script expands ${name}, which the shell sets")
        if name not in self.vars:
            if name == "TMPDIR":
                raise Ambiguous("unknown_variable", "the script expands $TMPDIR")
            return ""  # an unset variable expands to nothing (no `set -u` is allowed)
        return self.vars[name]

    def assign(self, name: str, value: str, how: str) -> None:
        if name in _SHELL_OWNED or not _UPPER_NAME.fullmatch(name):
            raise Ambiguous(
                "shell_variable", f"the script assigns {name}, which shells treat specially"
            )
        self.vars[name] = value
        self.origin[name] = how

    def run(self, statements: list[_Statement]) -> list[str]:
        """The service's argv (expanded words); the environment is left in `self`."""
        for index, statement in enumerate(statements):
            words = statement.words
            pending: list[tuple[str, list[_Part]]] = []
            while words and (found := words[0].assignment()):
                pending.append(found)
                words = words[1:]
            if not words:
                for name, parts in pending:  # left to right: `A=1 B=$A` sees the new A
                    self.assign(name, self.expand(parts, split_context=False), "shell script")
                continue
            prefix: list[tuple[str, str]] = []
            for name, parts in pending:
                # `${A:-x}` reads A as much as `$A` does (its name is before the first \0).
                if any(p.kind != "text" and p.value.split("\0")[0] in dict(pending) for p in parts):
                    raise Ambiguous(
                        "prefix_order", "a prefix assignment expands another from the same line"
                    )
                prefix.append((name, self.expand(parts, split_context=False)))
            head = self.expand(words[0].parts, split_context=True)
            if head in ("export", "unset") or (head == "exec" and len(words) == 1):
                if prefix:
                    raise Ambiguous(
                        "prefix_before_builtin",
                        f"the script puts an assignment before `{head}`",
                    )
                if head == "export":
                    self._export(words[1:])
                elif head == "unset":
                    self._unset(words[1:])
                continue  # `exec` with only redirections: the shell goes on
            argv = [head, *(self.expand(w.parts, split_context=True) for w in words[1:])]
            if argv[0] == "exec":
                argv = argv[1:]
                if argv[0].startswith("-"):
                    raise Ambiguous("exec_option", f"the script runs `exec {argv[0]}`")
            if index != len(statements) - 1:
                # Only the last program started is the one launchd keeps: an earlier one has
                # exited (or, after `exec`, nothing later runs) and a guess either way is wrong.
                raise Ambiguous(
                    "trailing_statements",
                    f"the script runs `{posixpath.basename(argv[0])}` before its last statement",
                )
            if not is_service_argv(argv) and posixpath.basename(argv[0]) not in _WRAPPERS:
                raise Ambiguous(
                    "unknown_command",
                    f"the script runs `{posixpath.basename(argv[0])}`, not loopx-chat",
                )
            for name, value in prefix:
                self.assign(name, value, "shell script")
                self.exported.add(name)
            return argv
        raise Ambiguous("no_program", "the script starts no program")

    def _export(self, words: Sequence[_Word]) -> None:
        for word in words:
            found = word.assignment()
            if found:
                name, parts = found
                self.assign(name, self.expand(parts, split_context=False), "shell script")
                self.exported.add(name)
                continue
            name = self.expand(word.parts, split_context=True)
            if name.startswith("-"):
                raise Ambiguous("export_option", f"the script runs `export {name}`")
            if not _NAME.fullmatch(name):
                raise Ambiguous("export_option", f"the script exports `{name}`")
            self.exported.add(name)

    def _unset(self, words: Sequence[_Word]) -> None:
        for word in words:
            name = self.expand(word.parts, split_context=True)
            if name == "-v":
                continue
            if name.startswith("-") or not _NAME.fullmatch(name):
                raise Ambiguous("unset_option", f"the script runs `unset {name}`")
            self.vars.pop(name, None)
            self.exported.discard(name)
            self.origin[name] = "shell script"

    def environment(self) -> dict[str, str]:
        return {name: self.vars[name] for name in self.exported if name in self.vars}


# -- argv: wrappers, shells, the service -------------------------------------------------

_WRAPPERS = frozenset({"env", "nohup", "nice"})


@dataclass(frozen=True)
class ShellCall:
    shell: str
    script: str
    login: bool
    no_rcs: bool


def shell_call(argv: Sequence[str]) -> ShellCall:
    """`<shell> [options] -c SCRIPT [name [args]]`, with only options whose effect is known."""
    shell = posixpath.basename(argv[0])
    letters: set[str] = set()
    long_opts: set[str] = set()
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg.startswith("--"):
            allowed = {"bash": {"--login", "--noprofile", "--norc", "--posix"}}.get(shell, set())
            if shell == "zsh":
                allowed = {"--login", "--no-rcs"}
            if arg not in allowed:
                raise Ambiguous("shell_option", f"{shell} runs with option {arg}")
            long_opts.add(arg)
        else:
            given = set(arg[1:])
            bad = given - set("cexl") - ({"f"} if shell == "zsh" else set())
            if bad:
                raise Ambiguous("shell_option", f"{shell} runs with option -{''.join(sorted(bad))}")
            letters |= given
        i += 1
    if i < len(argv) and argv[i].startswith("+"):
        raise Ambiguous("shell_option", f"{shell} runs with option {argv[i]}")
    if "c" not in letters or i >= len(argv):
        raise Ambiguous(
            "script_file", f"the LaunchAgent runs {shell} on a script file, which may set the home"
        )
    login = "l" in letters or "--login" in long_opts
    no_profile = "--noprofile" in long_opts
    return ShellCall(
        shell=shell,
        script=argv[i],
        login=login and not no_profile,
        no_rcs="f" in letters or "--no-rcs" in long_opts,
    )


def startup_files(call: ShellCall, env: Mapping[str, str]) -> tuple[str, ...]:
    """Every file the shell could read before the script, on macOS and on Debian; listing a
    file too many only makes the decoder refuse more, never guess."""
    home = env.get("HOME", "")
    files: list[str] = []
    if call.shell == "zsh":
        dot = env.get("ZDOTDIR") or home
        files += ["/etc/zshenv", "/etc/zsh/zshenv"]
        if not call.no_rcs:
            files.append(posixpath.join(dot, ".zshenv"))
            if call.login:
                for name in ("zprofile", "zlogin"):
                    files += [f"/etc/{name}", f"/etc/zsh/{name}", posixpath.join(dot, f".{name}")]
    elif call.login:
        files.append("/etc/profile")
        if call.shell == "bash":
            files += [posixpath.join(home, n) for n in (".bash_profile", ".bash_login")]
        files.append(posixpath.join(home, ".profile"))
    return tuple(files)


def _check_startup(call: ShellCall, env: Mapping[str, str], read: Mapping[str, str | None]) -> None:
    if call.shell in ("bash", "sh") and (env.get("BASH_ENV") or env.get("ENV")):
        raise Ambiguous("bash_env", f"{call.shell} reads the file named by BASH_ENV/ENV first")
    for path in startup_files(call, env):
        if path not in read:
            raise Ambiguous("startup_file_unread", f"{call.shell} would read {path}")
        text = read[path]
        if text is None:
            continue
        if _STARTUP_DANGER.search(_COMMENT.sub(r"\1", text)):
            raise Ambiguous(
                "startup_file",
                f"{call.shell} reads {path}, which may set the home or change how the script runs",
            )


def startup_files_for(argv: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """The startup files a caller must read before `decode_service` can decide `argv`
    (through `env` and wrappers to the shell, if there is one); () when none apply or the
    argv is refused anyway."""
    try:
        argv, env, _ = _unwrap(list(argv), dict(env), {})  # never an empty argv
        call = shell_call(argv) if posixpath.basename(argv[0]) in SHELLS else None
    except Ambiguous:
        call = None  # decode_service refuses it the same way
    return startup_files(call, env) if call else ()


def _unwrap(
    argv: list[str], env: dict[str, str], origin: dict[str, str]
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """Peel `env`, `nohup` and `nice` off the front of an argv, applying what `env` does."""
    while argv:
        base = posixpath.basename(argv[0])
        if base == "env":
            argv = argv[1:]
            options = True  # `--` ends the options; NAME=VALUE may still follow (GNU env)
            while argv:
                arg = argv[0]
                if options and arg in ("-i", "-", "--ignore-environment"):
                    env, origin = {}, {}
                elif options and arg in ("-u", "--unset") and len(argv) > 1:
                    env.pop(argv[1], None)
                    origin[argv[1]] = "env wrapper"
                    argv = argv[1:]
                elif options and arg.startswith("--unset="):
                    env.pop(arg[8:], None)
                elif options and arg == "--":
                    options = False
                elif options and arg.startswith("-"):
                    raise Ambiguous("env_option", f"`env` runs with option {arg}")
                elif match := re.match(r"([^=]+)=(.*)", arg, re.S):
                    env[match.group(1)] = match.group(2)  # passed literally: no expansion
                    origin[match.group(1)] = "env wrapper"
                else:
                    break
                argv = argv[1:]
            if not argv:
                raise Ambiguous("no_program", "`env` starts no program")
        elif base == "nohup":
            argv = argv[1:]
            if argv[:1] == ["--"]:
                argv = argv[1:]
        elif base == "nice":
            argv = argv[1:]
            if argv[:1] == ["-n"] and len(argv) > 1:
                argv = argv[2:]
            elif argv and re.fullmatch(r"-[0-9]+|--adjustment=-?[0-9]+", argv[0]):
                argv = argv[1:]
            elif argv and argv[0].startswith("-"):
                raise Ambiguous("nice_option", f"`nice` runs with option {argv[0]}")
        else:
            return argv, env, origin
    raise Ambiguous("no_program", "the LaunchAgent starts no program")


def decode_service(
    argv: Sequence[str],
    base_env: Mapping[str, str],
    origin: Mapping[str, str],
    startup_text: Mapping[str, str | None],
) -> ServiceLaunch:
    """What the service program receives when launchd runs `argv` over `base_env`.

    `startup_text` maps each path `startup_files_for` named to its text (None: no such
    file). Raises `Ambiguous` for anything outside the grammar.
    """
    if not argv:
        raise Ambiguous("no_program", "the plist has no ProgramArguments")
    current, env, where = _unwrap(list(argv), dict(base_env), dict(origin))
    shell: str | None = None
    if posixpath.basename(current[0]) in SHELLS:
        call = shell_call(current)
        shell = call.shell
        _check_startup(call, env, startup_text)
        model = _Shell(env, where)
        program = model.run(_Lexer(call.script).statements())
        current, env, where = _unwrap(program, model.environment(), model.origin)
    if not is_service_argv(current):
        raise Ambiguous(
            "unknown_program",
            f"the LaunchAgent runs `{posixpath.basename(current[0])}`, which is not loopx-chat; "
            "a wrapper may set the home",
        )
    return ServiceLaunch(program=tuple(current), environment=env, origin=where, shell=shell)

"""Write and read the systemd user units. Pure: text in, text out, no I/O.

Owns the two units `service install` writes (`loopx-chat.service`, `loopx-chat.socket`), the
quoting systemd applies to `ExecStart=` and `Environment=` (`%` specifiers, `$` expansion,
C escapes inside quotes), the fail-closed parse of whatever is on disk (`unit_malformed`),
and which lines are ours. It never evaluates anything a unit says: a value it cannot read
back exactly (a specifier other than `%h` / `%%`, a `$VAR` in an argument it needs) is
reported as such, never guessed.

Which lines are ours (rewritten on every install) is the table `OWN_KEYS`; `TUNABLE_KEYS`
are ours too, but a value the user changed is kept; every other line of a unit loopx-chat
wrote is the user's and is kept as it is, in its section. Of `Environment=` we own only the
variables in `OWN_ENV_KEYS`; the user's other variables stay. Drop-ins
(`loopx-chat.service.d/*.conf`) are never written or removed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loopx_chat.errors import LoopxChatError
from loopx_chat.state.push_options import SECRET_NAMES

SERVICE_UNIT = "loopx-chat.service"
SOCKET_UNIT = "loopx-chat.socket"
DROPIN_DIR = SERVICE_UNIT + ".d"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8767
# `serve --notify` / `--approval` values a unit may carry (the service's own lists are
# notify.dispatcher.MODES and codex.turn_defaults; a test keeps the three copies one).
NOTIFY_MODES = ("none", "desktop", "webhook", "both")
APPROVAL_MODES = ("never", "on-request", "untrusted")
# Folders after the codex one on the service's PATH (the user manager's own is minimal).
STANDARD_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
OPEN_FILES = 8192
# Every comment loopx-chat writes starts so: on an upgrade it is rewritten, any other
# comment is the user's and is kept.
OWN_COMMENT = "# loopx-chat"
HEADER = (
    f"{OWN_COMMENT}: written by `loopx-chat service install`. The lines loopx-chat owns are "
    "rewritten on each install;\n"
    f"{OWN_COMMENT}: lines you add (and loopx-chat.service.d/*.conf drop-ins) are kept.\n"
)
KEPT_COMMENT = f"{OWN_COMMENT}: kept from your unit"

# The keys loopx-chat writes, per unit and section: replaced on every install.
OWN_KEYS: Mapping[str, Mapping[str, frozenset[str]]] = {
    SERVICE_UNIT: {
        "Unit": frozenset({"Description", "Requires", "After"}),
        "Service": frozenset({"Type", "ExecStart", "WorkingDirectory"}),
        "Install": frozenset({"WantedBy"}),
    },
    SOCKET_UNIT: {
        "Unit": frozenset({"Description"}),
        "Socket": frozenset({"ListenStream"}),
        "Install": frozenset({"WantedBy"}),
    },
}
# Ours, but a value the user set on purpose survives an upgrade.
TUNABLE_KEYS: Mapping[str, Mapping[str, frozenset[str]]] = {
    SERVICE_UNIT: {"Service": frozenset({"Restart", "RestartSec", "LimitNOFILE"})},
    SOCKET_UNIT: {},
}
# The environment loopx-chat owns; every other variable in `Environment=` is the user's.
OWN_ENV_KEYS = frozenset(
    {
        "LOOPX_CHAT_CODEX_HOME",
        "PATH",
        "LOOPX_CHAT_CODEX_BIN",
        "CODEX_SQLITE_HOME",
        "LOOPX_CHAT_STATE_DIR",
        # a second home variable beside ours would only confuse: the binding is ours
        "CODEX_HOME",
        # a push secret is never written here (it would be readable by others): an install
        # moves one it finds to the state dir's 0600 file (state/push_secrets.py)
        *SECRET_NAMES,
    }
)
SERVICE_PROGRAMS = frozenset({"loopx-chat", "loopx"})
_PYTHON = re.compile(r"python(3(\.[0-9]+)?)?")
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_SECTION = re.compile(r"\[([^\[\]]+)\]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PORT = re.compile(r"[0-9]{1,5}")
# What systemd refuses in ExecStart's program path (its `string_is_safe`).
_UNSAFE_PROGRAM = re.compile(r"[\x00-\x1f\x7f\"'\\]")
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class ServiceUnitError(LoopxChatError):
    default_code = "service_error"


class Unreadable(ValueError):
    """A value holds something this parser will not evaluate (a specifier, a variable)."""


@dataclass(frozen=True)
class UnitSpec:
    """Everything the service unit says, in the installer's terms."""

    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    working_directory: str
    restart_sec: int = 2
    open_files: int = OPEN_FILES


@dataclass(frozen=True)
class Line:
    """One logical line of a unit (continuations joined); `key` None: a comment or blank."""

    section: str | None
    key: str | None
    value: str
    raw: str


@dataclass(frozen=True)
class ParsedUnit:
    """A unit file read line by line. Never evaluated."""

    lines: tuple[Line, ...]
    where: str = ""
    user_home: str = ""

    def values(self, section: str, key: str) -> list[str]:
        """The values of `key` in `section` in file order, after the last empty assignment
        (which resets a list setting in systemd)."""
        found: list[str] = []
        for line in self.lines:
            if line.section == section and line.key == key:
                found = [] if line.value == "" else [*found, line.value]
        return found

    def written_by_us(self) -> bool:
        return any(line.raw.startswith(OWN_COMMENT) for line in self.lines if line.key is None)

    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for value in self.values("Service", "Environment"):
            # A line holding what only systemd expands is not read (the binding, which must
            # be exact, is decided by `binding.effective_environment`, which refuses it).
            with contextlib.suppress(Unreadable):
                env.update(environment_assignments(value, self.user_home))
        return env

    def environment_files(self) -> tuple[tuple[str, bool], ...]:
        """(path, optional) per `EnvironmentFile=`; optional ones start with `-`."""
        files = []
        for value in self.values("Service", "EnvironmentFile"):
            optional = value.startswith("-")
            files.append((value[1:] if optional else value, optional))
        return tuple(files)

    def exec_start(self) -> tuple[str, ...]:
        starts = self.values("Service", "ExecStart")
        if not starts:
            return ()
        words = split_words(starts[-1], self.user_home, dollar=True)
        if words:
            words[0] = words[0].lstrip("-@:+!")
        return tuple(words)

    def option(self, name: str) -> str | None:
        """The value of `name` (`--port 1` or `--port=1`) in ExecStart's argv."""
        try:
            args = list(self.exec_start())
        except Unreadable:
            return None  # an option behind a $VARIABLE is not ours to guess
        for i, arg in enumerate(args):
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1 :]
        return None

    def port(self) -> int | None:
        value = self.option("--port")
        # ASCII digits only: `"²".isdigit()` is True, and int() refuses it.
        if value is not None and _PORT.fullmatch(value) and 0 < int(value) < 65536:
            return int(value)
        return None


def malformed(where: str, detail: str) -> ServiceUnitError:
    return ServiceUnitError(
        f"the systemd unit {where} is malformed ({detail}); it was left untouched. Fix or "
        "remove it, then run `loopx-chat service install` again",
        error_code="unit_malformed",
    )


def parse_unit(text: str, *, where: str, user_home: str = "") -> ParsedUnit:
    """Read a unit (or drop-in) as systemd does: sections, `Key=Value`, `#`/`;` comments,
    a trailing backslash continues the line. Anything else is `unit_malformed`."""
    if "\x00" in text:
        raise malformed(where, "a NUL byte")
    lines: list[Line] = []
    section: str | None = None
    pending = ""
    for physical in text.splitlines():
        if pending:
            if physical.lstrip().startswith(("#", ";")):
                continue  # comments inside a continuation are skipped, as systemd does
            physical = pending + " " + physical
            pending = ""
        stripped = physical.strip()
        if not stripped or stripped[0] in "#;":
            lines.append(Line(section, None, "", physical))
            continue
        if stripped.endswith("\\"):
            pending = stripped[:-1].rstrip()
            continue
        header = _SECTION.fullmatch(stripped)
        if header:
            section = header.group(1)
            lines.append(Line(section, None, "", physical))
            continue
        key, eq, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not _KEY.fullmatch(key):
            raise malformed(where, f"line {physical[:40]!r} is not Key=Value")
        if section is None:
            raise malformed(where, f"{key}= before any [Section]")
        if _CONTROL.search(value):
            raise malformed(where, f"{key}= holds control characters")
        lines.append(Line(section, key, value, stripped))
    if pending:
        raise malformed(where, "the last line ends in a backslash")
    return ParsedUnit(tuple(lines), where, user_home)


# -- systemd's quoting ---------------------------------------------------------------------
def _specifier(ch: str, user_home: str) -> str:
    if ch == "%":
        return "%"
    if ch == "h" and user_home:
        return user_home
    raise Unreadable(f"the specifier %{ch}")


def split_words(value: str, user_home: str, *, dollar: bool = False) -> list[str]:
    """Words as systemd splits `ExecStart=` / `Environment=`: whitespace-separated, `"..."`
    and `'...'` quoted, C escapes, `%%` and `%h` specifiers; in a command line's arguments
    (never its program) `$$` is `$`.
    A variable (`$X`) or another specifier raises `Unreadable`."""
    words: list[str] = []
    word: list[str] | None = None
    quote = ""
    i = 0
    while i < len(value):
        ch = value[i]
        if not quote and ch in " \t":
            if word is not None:
                words.append("".join(word))
                word = None
            i += 1
            continue
        word = [] if word is None else word
        if ch == quote:
            quote = ""
        elif not quote and ch in "\"'":
            quote = ch
        elif ch == "\\" and i + 1 < len(value):
            i += 1
            escaped = value[i]
            word.append(_C_ESCAPES.get(escaped, escaped))
        elif ch == "%" and i + 1 < len(value):
            i += 1
            word.append(_specifier(value[i], user_home))
        elif dollar and words and ch == "$":  # the program's own path is never expanded
            if value[i + 1 : i + 2] != "$":
                raise Unreadable("a $variable")
            i += 1
            word.append("$")
        else:
            word.append(ch)
        i += 1
    if quote:
        raise Unreadable("an unclosed quote")
    if word is not None:
        words.append("".join(word))
    return words


def environment_assignments(value: str, user_home: str) -> dict[str, str]:
    """The `NAME=value` assignments of one `Environment=` line (a word that is not one is
    ignored, as systemd does)."""
    found: dict[str, str] = {}
    for word in split_words(value, user_home):
        name, eq, val = word.partition("=")
        if eq and _ENV_NAME.fullmatch(name):
            found[name] = val
    return found


def quote_word(word: str, *, command: bool) -> str:
    """One word as systemd reads it back exactly (double quotes, C escapes, `%%`, and `$$`
    in a command line)."""
    if _CONTROL.search(word) or "\n" in word:
        raise ServiceUnitError(
            "a value for the unit holds control characters", error_code="codex_home_not_absolute"
        )
    text = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if command:
        text = text.replace("$", "$$")
    return f'"{text}"'


def quote_path(path: str) -> str:
    """A path setting (`WorkingDirectory=`) as systemd reads it back: `%` doubled; a path it
    would trim or misread (control characters, edge spaces, a leading `-`) is refused."""
    if _CONTROL.search(path) or "\n" in path or path != path.strip() or path[:1] != "/":
        raise ServiceUnitError(
            f"{path!r} cannot be a unit's working directory", error_code="unit_malformed"
        )
    return path.replace("%", "%%")


# -- writing -------------------------------------------------------------------------------
def render_service(spec: UnitSpec) -> str:
    env = "\n".join(
        f"Environment={quote_word(f'{k}={v}', command=False)}" for k, v in spec.environment
    )
    program, *args = spec.argv
    if _UNSAFE_PROGRAM.search(program):
        # systemd refuses it ("Executable name contains special characters").
        raise ServiceUnitError(
            f"systemd cannot run a program whose path holds a quote or a backslash "
            f"({program!r}); install loopx-chat in a plain folder (pipx install ...) and run "
            "`loopx-chat service install` from there",
            error_code="program_path_unsupported",
        )
    # The program is not expanded: only its `%` is doubled; the arguments' `$` are too.
    argv = " ".join(
        [quote_word(program, command=False), *(quote_word(a, command=True) for a in args)]
    )
    return (
        HEADER
        + "[Unit]\n"
        + "Description=loopx-chat: the owner's Codex control page on loopback\n"
        + f"Requires={SOCKET_UNIT}\n"
        + f"After={SOCKET_UNIT}\n"
        + "\n[Service]\n"
        + "Type=simple\n"
        + f"ExecStart={argv}\n"
        + f"{env}\n"
        # A path setting: never quoted or unescaped, only specifiers expanded.
        + f"WorkingDirectory={quote_path(spec.working_directory)}\n"
        # After a crash or a non-zero exit; a clean stop (`systemctl stop`) stays down.
        + "Restart=on-failure\n"
        + f"RestartSec={spec.restart_sec}\n"
        + f"LimitNOFILE={spec.open_files}\n"
        + "\n[Install]\n"
        + "WantedBy=default.target\n"
    )


def render_socket(port: int, host: str = DEFAULT_HOST) -> str:
    """The socket systemd holds while the service restarts (connections wait in its queue)."""
    return (
        HEADER
        + "[Unit]\n"
        + "Description=loopx-chat: the port systemd holds for the service\n"
        + "\n[Socket]\n"
        + f"ListenStream={host}:{port}\n"
        + "\n[Install]\n"
        + "WantedBy=sockets.target\n"
    )


def is_service_argv(argv: Sequence[str]) -> bool:
    """Does this argv start loopx-chat (or the public `loopx`) directly?"""
    base = argv[0].rsplit("/", 1)[-1] if argv else ""
    if base in SERVICE_PROGRAMS:
        return True
    return bool(_PYTHON.fullmatch(base)) and list(argv[1:3]) == ["-m", "loopx_chat"]


@dataclass
class _Merge:
    unit: str
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    extra: dict[str | None, list[str]] = field(default_factory=dict)
    tuned: dict[tuple[str, str], str] = field(default_factory=dict)

    def take(self, line: Line, own: bool) -> None:
        if line.key is None:
            raw = line.raw.strip()  # a comment, a blank line or a section header
            if own and raw[:1] in ("#", ";") and not raw.startswith(OWN_COMMENT):
                self.extra.setdefault(line.section, []).append(line.raw)
            return
        name = f"{line.section}.{line.key}"
        section = line.section or ""
        if line.key == "Environment" and section == "Service":
            self._environment(line, own)
        elif line.key in OWN_KEYS[self.unit].get(section, ()):
            pass
        elif line.key in TUNABLE_KEYS[self.unit].get(section, ()):
            if own:
                self.tuned[(section, line.key)] = line.value
        elif own:
            self.extra.setdefault(line.section, []).append(line.raw)
            self.kept.append(name)
        else:
            self.dropped.append(name)

    def _environment(self, line: Line, own: bool) -> None:
        try:
            assigned = environment_assignments(line.value, "")
        except Unreadable:
            assigned = {}
        theirs = {k: v for k, v in assigned.items() if k not in OWN_ENV_KEYS}
        if not line.value:
            # An empty `Environment=` resets the list: after ours it would drop the binding.
            self.dropped.append("Service.Environment=")
            return
        for name in sorted(assigned):
            if name == "CODEX_HOME" or (not own and name not in OWN_ENV_KEYS):
                self.dropped.append(f"Environment.{name}")
        if not own or (assigned and not theirs):
            return
        if assigned and len(theirs) < len(assigned):
            # A line mixing our variables with theirs: theirs stay, one line each.
            for name, value in theirs.items():
                self.extra.setdefault("Service", []).append(
                    f"Environment={quote_word(f'{name}={value}', command=False)}"
                )
        else:
            self.extra.setdefault("Service", []).append(line.raw)
        self.kept += [f"Environment.{name}" for name in sorted(theirs) or [line.value[:40]]]


def merge_user_lines(
    unit: str, ours: str, existing: ParsedUnit | None
) -> tuple[str, list[str], list[str]]:
    """(unit text, what was kept, what was dropped). From a unit loopx-chat wrote, every line
    the user added is kept in its section (their values of `TUNABLE_KEYS` replace ours);
    from a foreign unit nothing is kept and each line that is not ours is listed as dropped."""
    if existing is None:
        return ours, [], []
    own = existing.written_by_us()
    merge = _Merge(unit)
    for line in existing.lines:
        merge.take(line, own)
    out: list[str] = []
    section: str | None = None
    placed: set[str | None] = set()

    def flush(name: str | None) -> None:
        extra = merge.extra.get(name)
        if extra and name not in placed:
            placed.add(name)
            if out and out[-1] == "":
                out.pop()
            out.extend([KEPT_COMMENT, *extra, ""])

    for text in ours.splitlines():
        header = _SECTION.fullmatch(text.strip())
        if header:
            flush(section)
            section = header.group(1)
        key, eq, _ = text.partition("=")
        if eq and section and (section, key) in merge.tuned:
            tuned = merge.tuned[(section, key)]
            if tuned != text.partition("=")[2]:
                merge.kept.append(f"{section}.{key}")
            text = f"{key}={tuned}"
        out.append(text)
    flush(section)
    for name, extra in merge.extra.items():
        if name not in placed and name is not None:
            out += ["", f"[{name}]", KEPT_COMMENT, *extra]
    text = "\n".join(out).rstrip("\n") + "\n"
    return text, sorted(set(merge.kept)), sorted(set(merge.dropped))

"""Build and parse the LaunchAgent plist. Pure: bytes in, bytes out, no I/O.

Owns the canonical shape the installer writes (a direct argv, never a shell; environment in
`EnvironmentVariables`; absolute paths) and the fail-closed parse of whatever is on disk: XML
or binary in, a checked record out, or `plist_malformed`. It never executes or evaluates any
plist content.
"""

from __future__ import annotations

import plistlib
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopx_chat.errors import LoopxChatError
from loopx_chat.state.push_options import SECRET_NAMES

DEFAULT_LABEL_PREFIX = "com.loopx"
LABEL_SUFFIX = "chat"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8767
# `serve --notify` values the plist may carry (the service's own list is notify.dispatcher).
NOTIFY_MODES = ("none", "desktop", "webhook", "both")
# `serve --approval` values (the service's own list is codex.turn_defaults; a test keeps them one).
APPROVAL_MODES = ("never", "on-request", "untrusted")
# launchd throttles any relaunch, intentional ones included; 10 s is its own default.
THROTTLE_INTERVAL_SEC = 10
# Standard: no background CPU/IO throttling for a service a person's browser waits on.
PROCESS_TYPE = "Standard"
# A launchd job's PATH is /usr/bin:/bin:/usr/sbin:/sbin (path_helper never runs); these
# are appended after the folder of the codex found at install time.
STANDARD_PATH = ("/opt/homebrew/bin", "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")


class LaunchAgentError(LoopxChatError):
    default_code = "launchagent_error"


@dataclass(frozen=True)
class AgentSpec:
    """Everything the plist says, in the installer's terms."""

    label: str
    program_arguments: tuple[str, ...]
    environment: Mapping[str, str]
    working_directory: str
    stdout_path: str
    stderr_path: str
    throttle_interval: int = THROTTLE_INTERVAL_SEC
    process_type: str = PROCESS_TYPE


@dataclass(frozen=True)
class ParsedPlist:
    """The parts of an existing plist the installer reads back. Never executed."""

    data: Mapping[str, Any]
    environment: Mapping[str, str] = field(default_factory=dict)
    program_arguments: tuple[str, ...] = ()

    def port(self) -> int | None:
        args = list(self.program_arguments)
        for i, arg in enumerate(args):
            value = args[i + 1] if arg == "--port" and i + 1 < len(args) else None
            if arg.startswith("--port="):
                value = arg[7:]
            # ASCII digits only: `"²".isdigit()` is True, and int() refuses it.
            if value is not None and _PORT.fullmatch(value) and 0 < int(value) < 65536:
                return int(value)
        return None

    def option(self, name: str) -> str | None:
        """The value of `name` (`--notify X` or `--notify=X`) in the service's argv."""
        args = list(self.program_arguments)
        for i, arg in enumerate(args):
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1 :]
        return None


_PORT = re.compile(r"[0-9]{1,5}")
# What the XML writer refuses; values with these cannot be written back.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


# The environment the installer owns; everything else in `EnvironmentVariables` is the user's.
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
# Keys of ours that a user may have changed on purpose; an upgrade keeps their value.
USER_TUNABLE_KEYS = ("StandardOutPath", "StandardErrorPath", "ProcessType")
SERVICE_PROGRAMS = frozenset({"loopx-chat", "loopx"})
_PYTHON = re.compile(r"python(3(\.[0-9]+)?)?")


def is_service_argv(argv: Sequence[str]) -> bool:
    """Does this argv start loopx-chat (or the public `loopx`) directly?"""
    base = posixpath.basename(argv[0]) if argv else ""
    if base in SERVICE_PROGRAMS:
        return True
    return bool(_PYTHON.fullmatch(base)) and list(argv[1:3]) == ["-m", "loopx_chat"]


def is_own_plist(parsed: ParsedPlist) -> bool:
    """A plist loopx-chat wrote: a direct argv to loopx-chat `serve`, bound through
    `LOOPX_CHAT_CODEX_HOME` in `EnvironmentVariables`."""
    args = parsed.program_arguments
    return (
        is_service_argv(args) and "serve" in args and "LOOPX_CHAT_CODEX_HOME" in parsed.environment
    )


def merge_user_additions(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], *, own: bool
) -> tuple[dict[str, Any], list[str], list[str]]:
    """(new plist, keys kept, keys dropped). From a plist loopx-chat wrote, everything the
    user added is kept: launchd keys we do not set, their values of `USER_TUNABLE_KEYS`, and
    environment variables we do not own. From a foreign plist nothing is kept, and every
    key that is not ours is listed as dropped."""
    merged = dict(ours)
    env = dict(ours.get("EnvironmentVariables", {}))
    kept: list[str] = []
    dropped: list[str] = []
    their_env = theirs.get("EnvironmentVariables", {})
    their_env = their_env if isinstance(their_env, Mapping) else {}
    for key in sorted(theirs):
        if key in ours:
            if own and key in USER_TUNABLE_KEYS and theirs[key] != ours[key]:
                merged[key] = theirs[key]
                kept.append(key)
            continue
        (kept if own else dropped).append(key)
        if own:
            merged[key] = theirs[key]
    for name in sorted(their_env):
        if name in OWN_ENV_KEYS:
            if name == "CODEX_HOME" or (not own and name not in env):
                dropped.append(f"EnvironmentVariables.{name}")
            continue
        if own:
            env[name] = their_env[name]
            kept.append(f"EnvironmentVariables.{name}")
        else:
            dropped.append(f"EnvironmentVariables.{name}")
    merged["EnvironmentVariables"] = env
    return merged, kept, dropped


OPEN_FILES = 8192


def label_for(prefix: str | None) -> str:
    return f"{prefix or DEFAULT_LABEL_PREFIX}.{LABEL_SUFFIX}"


def listeners(port: int) -> dict[str, Any]:
    """launchd's `Sockets` entry: launchd binds the service's loopback port and keeps it while
    the service restarts, so no other user can take it between two runs; `serve` receives it
    through `launch_activate_socket("Listeners")` (service/launchd_socket.py)."""
    return {
        "Listeners": {
            "SockNodeName": "127.0.0.1",
            "SockServiceName": str(port),
            "SockType": "stream",
            "SockFamily": "IPv4",
        }
    }


def build_plist(spec: AgentSpec) -> dict[str, Any]:
    port = ParsedPlist(data={}, program_arguments=spec.program_arguments).port()
    sockets = {"Sockets": listeners(port)} if port is not None else {}
    return {
        **sockets,
        "Label": spec.label,
        "ProgramArguments": list(spec.program_arguments),
        "EnvironmentVariables": dict(spec.environment),
        "RunAtLoad": True,
        # Restart after a crash or a non-zero exit; a clean exit (SIGTERM at logout,
        # `launchctl bootout`) stays down.
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": spec.throttle_interval,
        "ProcessType": spec.process_type,
        "WorkingDirectory": spec.working_directory,
        "StandardOutPath": spec.stdout_path,
        "StandardErrorPath": spec.stderr_path,
        # launchd's default soft limit is 256 open files: the service raises its own as far
        # as the hard limit allows, and this raises where it starts from.
        "SoftResourceLimits": {"NumberOfFiles": OPEN_FILES},
    }


def render_plist(data: Mapping[str, Any]) -> bytes:
    """Canonical XML, keys sorted, so two installs of the same spec are byte-identical."""
    return plistlib.dumps(dict(data), fmt=plistlib.FMT_XML, sort_keys=True)


def _malformed(where: str, detail: str) -> LaunchAgentError:
    return LaunchAgentError(
        f"existing LaunchAgent plist {where} is malformed ({detail}); it was left untouched. "
        "Fix or remove it, or pass LOOPX_CHAT_CODEX_HOME explicitly after moving it aside",
        error_code="plist_malformed",
    )


def parse_plist(raw: bytes, *, where: str) -> ParsedPlist:
    """Parse XML or binary; any shape the installer cannot trust is `plist_malformed`."""
    try:
        data = plistlib.loads(raw)
    except Exception as exc:
        # InvalidFileException, expat's ExpatError and ValueError by design, and assorted
        # others (struct.error, OverflowError, RecursionError...) on a damaged binary plist.
        raise _malformed(where, type(exc).__name__) from None
    if not isinstance(data, dict):
        raise _malformed(where, "top level is not a dictionary")
    env = data.get("EnvironmentVariables", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise _malformed(where, "EnvironmentVariables is not a dictionary of strings")
    args = data.get("ProgramArguments", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _malformed(where, "ProgramArguments is not a list of strings")
    if any(_CONTROL_CHARS.search(v) for v in (*env.keys(), *env.values(), *args)):
        raise _malformed(where, "a value contains control characters")
    return ParsedPlist(data=data, environment=dict(env), program_arguments=tuple(args))

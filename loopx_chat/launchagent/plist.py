"""Build and parse the LaunchAgent plist. Pure: bytes in, bytes out, no I/O.

Owns the canonical shape the installer writes (a direct argv, never a shell; environment in
`EnvironmentVariables`; absolute paths) and the fail-closed parse of whatever is on disk: XML
or binary in, a checked record out, or `plist_malformed`. It never executes or evaluates any
plist content.
"""

from __future__ import annotations

import plistlib
import re
import xml.parsers.expat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loopx_chat.errors import LoopxChatError

DEFAULT_LABEL_PREFIX = "com.loopx"
LABEL_SUFFIX = "chat"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8767
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


_PORT = re.compile(r"[0-9]{1,5}")
# What the XML writer refuses; values with these cannot be written back.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def label_for(prefix: str | None) -> str:
    return f"{prefix or DEFAULT_LABEL_PREFIX}.{LABEL_SUFFIX}"


def build_plist(spec: AgentSpec) -> dict[str, Any]:
    return {
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
    except (plistlib.InvalidFileException, xml.parsers.expat.ExpatError, ValueError) as exc:
        raise _malformed(where, type(exc).__name__) from None
    except Exception as exc:  # plistlib raises assorted errors on truncated binary input
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

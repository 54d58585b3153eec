"""The codex configuration that makes a real app-server talk only to the loopback mock.

What this module owns:
  * `MINIMAL_CATALOG`: the smallest model catalog codex 0.171.0 accepts for the mock model;
  * `offline_config_toml` / `write_offline_codex_config`: a home's `config.toml` and
    `model_catalog.json` for a mock at a base URL (0600 files, atomically replaced, in a home
    made 0700 if missing).

What it must never do:
  * write a secret or point codex at anything but the given loopback URL;
  * touch any other file of the home.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopx_chat.state.private_files import PRIVATE_FILE_MODE, atomic_write_bytes, ensure_private_dir

_FIRST_PRINTABLE = 0x20
_DELETE = 0x7F

MOCK_MODEL = "mock-model"
# The first line of every config.toml written here: how a home made for the mock is told
# from a person's own (`loopx-chat mock serve --codex-home` rewrites only such a file).
OFFLINE_HEADER = (
    "# Written by loopx_chat.codex.offline_config: offline codex against a loopback mock."
)

# The smallest catalog entry codex 0.171.0 accepts: each field below was reported as a
# `missing field` when left out (see codex-app-server.md §7).  A `model_catalog_json` file REPLACES
# the bundled catalog, which removes the "Model metadata for `mock-model` not found" warning.
MINIMAL_CATALOG: dict[str, Any] = {
    "models": [
        {
            "slug": MOCK_MODEL,
            "display_name": "Mock Model",
            "base_instructions": "You are a test assistant.",
            "supported_reasoning_levels": [],
            "shell_type": "shell_command",
            "visibility": "list",
            "supported_in_api": True,
            "priority": 1,
            "support_verbosity": False,
            "truncation_policy": {"mode": "tokens", "limit": 10000},
            "experimental_supported_tools": [],
        }
    ]
}


def _toml_string(value: str) -> str:
    """A TOML basic string; escapes what TOML requires (json.dumps would emit surrogate pairs)."""
    out = ['"']
    for char in value:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif code < _FIRST_PRINTABLE or code == _DELETE:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def offline_config_toml(base_url: str, catalog_path: Path) -> str:
    """config.toml text that points codex at the mock only (see codex-app-server.md §3, §7)."""
    lines = [
        OFFLINE_HEADER,
        f"model_catalog_json = {_toml_string(str(catalog_path))}",
        f"model = {_toml_string(MOCK_MODEL)}",
        'model_provider = "mock"',
        'approval_policy = "never"',
        'sandbox_mode = "read-only"',
        "check_for_update_on_startup = false",
        "",
        "[model_providers.mock]",
        'name = "loopx mock Responses API"',
        f"base_url = {_toml_string(base_url)}",
        'wire_api = "responses"',
        # No env_key: with requires_openai_auth = false codex sends no Authorization header, so
        # no secret has to exist anywhere for the offline path.
        "requires_openai_auth = false",
        "supports_websockets = false",
        # Fail fast instead of retrying against a mock that answers deterministically.
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "stream_idle_timeout_ms = 20000",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        # plugins=false is the one that removes all startup network traffic (§3).
        "plugins = false",
        "apps = false",
        "remote_plugin = false",
        # Otherwise an unreachable provider is retried forever and the turn never ends.
        "unbounded_connection_retries = false",
        # Skips the `bash -lc` environment snapshot at thread start.
        "shell_snapshot = false",
        "",
    ]
    return "\n".join(lines)


def write_offline_codex_config(codex_home: Path, base_url: str) -> None:
    """Write `model_catalog.json` and `config.toml` into `codex_home` for the mock at `base_url`.

    The home is created with mode 0700 if it does not exist (codex refuses a missing CODEX_HOME).
    Existing files of those two names are replaced; nothing else in the home is touched.
    """
    home = Path(codex_home)
    if not home.exists():
        ensure_private_dir(home)
    catalog_path = home.resolve() / "model_catalog.json"
    # The catalog goes first so that config.toml never points at a file that is not there yet;
    # both atomically, so codex never reads a half-written file.
    catalog = json.dumps(MINIMAL_CATALOG, indent=2) + "\n"
    atomic_write_bytes(catalog_path, catalog.encode(), mode=PRIVATE_FILE_MODE)
    config = offline_config_toml(base_url, catalog_path).encode()
    atomic_write_bytes(home / "config.toml", config, mode=PRIVATE_FILE_MODE)

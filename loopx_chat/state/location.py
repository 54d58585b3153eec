"""Where owner-local state lives when the command line does not say.

Owns the one rule: `LOOPX_CHAT_STATE_DIR` when set and non-empty, else the platform's user
state folder (platformdirs). It never creates, reads or checks the folder (the state layer
does, on first write), so every command can ask it without loading the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

STATE_DIR_ENV = "LOOPX_CHAT_STATE_DIR"
APP_NAME = "loopx-chat"


def default_state_dir(environ: Mapping[str, str]) -> Path:
    """`LOOPX_CHAT_STATE_DIR` when set and non-empty, else the platform's user state dir."""
    value = environ.get(STATE_DIR_ENV, "")
    if value:
        return Path(value).expanduser().resolve(strict=False)
    # Resolved once here: no symlink is ever followed below the root (private_files).
    import platformdirs  # only when no state dir was named: 11 ms a command start

    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)).resolve(strict=False)

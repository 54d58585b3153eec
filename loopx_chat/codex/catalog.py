"""The catalog-compatibility helper: the binary's own built-in model catalog, in a temp file.

Used only when `thread/start`/`thread/resume` fails because the user's `model_catalog_json`
lacks `base_instructions`. It runs `codex debug models` in a throwaway `CODEX_HOME` (so no user
override leaks in), validates the result and writes it to a temp file for one retry. It never
reads, edits or copies the user's own catalog.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from loopx_chat.codex.app_server import child_environment
from loopx_chat.codex.errors_map import CATALOG_REMEDY
from loopx_chat.errors import CodexError

DEBUG_MODELS_TIMEOUT_SEC = 15.0


def catalog_incompatible(detail: str) -> CodexError:
    return CodexError(
        f"Codex app-server model catalog compatibility retry failed ({detail})",
        error_code="catalog_incompatible",
        remedy=CATALOG_REMEDY,
    )


def write_builtin_catalog(executable: Path, environ: Mapping[str, str]) -> Path:
    """Return a temp file holding the binary's built-in catalog; the caller deletes it."""
    # Only the retry pays for these (with random, bz2, lzma): every chat command imports
    # this module, and almost none retries (issue 18).
    import shutil
    import tempfile

    scratch_home = Path(tempfile.mkdtemp(prefix="loopx-chat-codex-home-"))
    try:
        env = child_environment(environ, scratch_home)
        try:
            done = subprocess.run(
                [str(executable), "debug", "models"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=DEBUG_MODELS_TIMEOUT_SEC,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise catalog_incompatible(
                f"`codex debug models` timed out after {DEBUG_MODELS_TIMEOUT_SEC:g}s"
            ) from None
        except OSError as exc:
            raise catalog_incompatible(
                f"`codex debug models` could not run: {exc.strerror}"
            ) from None
    finally:
        shutil.rmtree(scratch_home, ignore_errors=True)
    if done.returncode != 0:
        raise catalog_incompatible(f"`codex debug models` exited {done.returncode}")
    try:
        catalog = json.loads(done.stdout)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise catalog_incompatible("`codex debug models` did not print JSON") from None
    models = catalog.get("models") if isinstance(catalog, dict) else None
    if not isinstance(models, list) or not models:
        raise catalog_incompatible("`codex debug models` printed no models")
    for model in models:
        instructions = model.get("base_instructions") if isinstance(model, dict) else None
        if not isinstance(instructions, str) or not instructions.strip():
            raise catalog_incompatible("a built-in model has no base_instructions")
    fd, name = tempfile.mkstemp(prefix="loopx-chat-model-catalog-", suffix=".json")
    with os.fdopen(fd, "wb") as handle:
        handle.write(done.stdout)
    return Path(name)

"""The text of a chat turn, from MESSAGE, `-` (stdin) or `--file PATH`: one reader for the
click commands and the served fast path alike.

Owns the rule: exactly one source, at most `MESSAGE_LIMIT_BYTES`, UTF-8, not blank; every
refusal a `UsageError` (`usage_error`, or `invalid_text` for bytes that are not UTF-8) before
anything is opened, spawned or sent. It loads no click and writes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from loopx_chat.codex import turn_defaults
from loopx_chat.errors import UsageError

MESSAGE_LIMIT_BYTES = turn_defaults.MESSAGE_LIMIT_BYTES


def _read_limited(read: Callable[[int], bytes], source: str) -> str:
    data = read(MESSAGE_LIMIT_BYTES + 1)
    if len(data) > MESSAGE_LIMIT_BYTES:
        raise UsageError(
            f"the message from {source} is larger than {MESSAGE_LIMIT_BYTES >> 20} MiB; "
            "send a shorter one",
            error_code="usage_error",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(
            f"the message from {source} is not valid text (not UTF-8); nothing was sent. "
            "Convert it (e.g. `iconv -t UTF-8`) and send it again",
            error_code="invalid_text",
        ) from None


def message_text(message: str | None, file: Path | None) -> str:
    """The turn's text from MESSAGE, `-` (stdin) or --file; refused when empty or too big."""
    if (message is None) == (file is None):
        raise UsageError(
            "give the message as MESSAGE, as `-` to read stdin, or with --file PATH (one of them)",
            error_code="usage_error",
        )
    if file is not None:
        try:
            with file.open("rb") as handle:
                text = _read_limited(handle.read, "--file")
        except OSError as exc:
            raise UsageError(
                f"cannot read --file {file}: {exc.strerror or type(exc).__name__}",
                error_code="usage_error",
            ) from None
    elif message == "-":
        text = _read_limited(sys.stdin.buffer.read, "stdin")
    else:
        text = message or ""
    if not text.strip():
        # A billed turn with nothing to say is never what was meant.
        raise UsageError(
            "the message is empty; nothing was sent. Give the text to send",
            error_code="usage_error",
        )
    return text

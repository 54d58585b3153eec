"""The webhook's signing secret, in the Standard Webhooks form: `whsec_<base64 key>`.

Owns `<state>/notify-webhook-secret`: made once (a 32-byte random key, 0600, in the private
state dir), read with the same checks as the owner's secret (ours, regular, nobody else can
read it), and an older secret (a bare token whose bytes were the HMAC key) rewritten once to
`whsec_` + base64 of those same bytes, so a receiver keeps verifying with the same key. It
never logs, prints or returns the secret in an error: a refusal names the file only.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

from loopx_chat.errors import Remedy, StateError
from loopx_chat.state.private_files import (
    PRIVATE_FILE_MODE,
    atomic_write_bytes,
    create_private,
    ensure_private_dir,
    notice,
    state_write,
)
from loopx_chat.state.service_runtime import read_private

SECRET_FILE = "notify-webhook-secret"
PREFIX = "whsec_"
KEY_BYTES = 32
_CURRENT = re.compile(r"whsec_[A-Za-z0-9+/]{22,344}={0,2}")
_LEGACY = re.compile(r"[A-Za-z0-9_-]{43,128}")  # before 0.x: token_urlsafe, used as the key


def signing_key(secret: str) -> bytes:
    """The HMAC key a `whsec_` secret stands for (what every Standard Webhooks library uses)."""
    text = secret.removeprefix(PREFIX)
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _refused(path: Path, why: str) -> StateError:
    return StateError(
        f"{path} {why}; loopx-chat will not sign notices with it and left it as it is",
        error_code="state_unsafe",
        remedy=Remedy(
            summary="The webhook's signing secret must be yours and readable by you only.",
            next_action=f"Delete {path} and start the service again: it makes a new one "
            "(give the new secret to your receiver).",
        ),
    )


def webhook_secret(state_dir: Path) -> str:
    """The `whsec_` secret, made now when there is none, moved from the older form once."""
    path = state_dir / SECRET_FILE
    try:
        raw = read_private(path, 512)
    except ValueError as exc:
        raise _refused(path, f"is not safe to use ({exc})") from None
    if raw is None:
        return _make(state_dir, path)
    text = raw.decode("ascii", "replace").strip()
    if _CURRENT.fullmatch(text):
        return text
    if not _LEGACY.fullmatch(text):
        raise _refused(path, "does not hold a webhook secret")
    moved = PREFIX + base64.b64encode(text.encode("ascii")).decode("ascii")
    with state_write(path):
        atomic_write_bytes(path, moved.encode("ascii") + b"\n", mode=PRIVATE_FILE_MODE)
    notice(
        f"{path} now holds the webhook secret in the Standard Webhooks form (whsec_...); "
        "the key is the same, so a receiver given the new form verifies every notice"
    )
    return moved


def _make(state_dir: Path, path: Path) -> str:
    secret = PREFIX + base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")
    with state_write(state_dir):
        ensure_private_dir(state_dir)
    with state_write(path):
        if not create_private(path, secret.encode("ascii") + b"\n"):
            return webhook_secret(state_dir)  # another start won the race: use its secret
    return secret

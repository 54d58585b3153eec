"""The owner's browsers and devices, each with its own credential: `devices.json`.

Owns the device records (id, name, the device's signing key, when it was added and last
seen, whether it may start work, when it was revoked) in one 0600 file of the 0700 state
dir, written atomically under a lock, and reading them back only from a regular file of this
user. A device's key is what its browser signs each request with (a WebCrypto HMAC key it
keeps non-extractable); the master secret (`service-token`) never reaches a browser.

It never returns a key in a public view (`public()`), never logs one, and never trusts a
file another user could have written.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx_chat.errors import StateError, UsageError

if TYPE_CHECKING:
    from loopx_chat.state.file_lock import FileLock

DEVICES_FILE = "devices.json"
DEVICES_SCHEMA = "loopx_chat_devices_v1"
KEY_BYTES = 32
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
_ID = re.compile(r"dev-[A-Za-z0-9_-]{8,40}")
_LIMIT = 1 << 20


@dataclass(frozen=True)
class Device:
    device_id: str
    name: str
    created_at: str
    key: str = field(repr=False)  # base64url of KEY_BYTES; only the service checks with it
    last_seen: str | None = None
    revoked_at: str | None = None
    full: bool = True  # may start turns and runs (a phone paired without --full may not)
    # Signed in at the machine by `loopx-chat open` (not paired from afar): with `full`, the
    # only kind of browser whose page may show a pairing code for another device.
    desk: bool = False

    @property
    def may_pair(self) -> bool:
        return self.active and self.full and self.desk

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def key_bytes(self) -> bytes:
        return base64.urlsafe_b64decode(self.key + "=" * (-len(self.key) % 4))

    @property
    def actor(self) -> str:
        """Who decided, as gate records name it."""
        return f"owner-device:{self.name}"

    def public(self) -> dict[str, Any]:
        return {
            "device_id": self.device_id,
            "name": self.name,
            "created_at": self.created_at,
            "last_seen": self.last_seen,
            "revoked_at": self.revoked_at,
            "full": self.full,
            "desk": self.desk,
        }

    def to_record(self) -> dict[str, Any]:
        return {**self.public(), "key": self.key}


def valid_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UsageError(
            "a device name is 1-40 characters from A-Z a-z 0-9 . _ - (starting with a letter "
            "or digit)",
            error_code="invalid_device_name",
        )
    return name


def _path(state_dir: Path) -> Path:
    return state_dir / DEVICES_FILE


def _from_record(doc: object) -> Device | None:
    if not isinstance(doc, dict):
        return None
    try:
        device = Device(
            device_id=str(doc["device_id"]),
            name=str(doc["name"]),
            created_at=str(doc["created_at"]),
            key=str(doc["key"]),
            last_seen=doc.get("last_seen") if isinstance(doc.get("last_seen"), str) else None,
            revoked_at=doc.get("revoked_at") if isinstance(doc.get("revoked_at"), str) else None,
            full=doc.get("full") is True,
            desk=doc.get("desk") is True,  # a record from before the field: never a desk's
        )
    except KeyError:
        return None
    if not _ID.fullmatch(device.device_id) or not _NAME.fullmatch(device.name):
        return None
    if len(device.key_bytes) != KEY_BYTES:
        return None
    return device


def load(state_dir: Path) -> tuple[Device, ...]:
    """Every device record (revoked ones included); none when the file is not there.
    A file that is not this user's private regular file is `state_unsafe`: never read."""
    path = _path(state_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ()
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink in its place: never followed
            raise StateError(
                f"{path} is a symlink, not a private file of this user; it was not read — "
                "move it aside (every browser then logs in again)",
                error_code="state_unsafe",
            ) from None
        raise StateError(
            f"{path} cannot be read ({exc.strerror})", error_code="state_unreadable"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise StateError(
                f"{path} is not a private file of this user; it was not read — move it aside "
                "(every browser then logs in again)",
                error_code="foreign_owner" if info.st_uid != os.getuid() else "state_unsafe",
            )
        raw = os.read(fd, _LIMIT + 1)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise StateError(
            f"{path} is not a devices file; move it aside (every browser then logs in again)",
            error_code="state_corrupt",
        ) from None
    if not isinstance(doc, dict) or doc.get("schema_version") != DEVICES_SCHEMA:
        raise StateError(f"{path} is not a devices file", error_code="state_corrupt")
    found = (_from_record(d) for d in doc.get("devices") or ())
    return tuple(d for d in found if d is not None)


def _save(state_dir: Path, devices: tuple[Device, ...]) -> None:
    from loopx_chat.state.private_files import (
        PRIVATE_FILE_MODE,
        atomic_write_bytes,
        ensure_private_dir,
        state_write,
    )

    doc = {"schema_version": DEVICES_SCHEMA, "devices": [d.to_record() for d in devices]}
    with state_write(state_dir):
        ensure_private_dir(state_dir)
    with state_write(_path(state_dir)):
        atomic_write_bytes(
            _path(state_dir),
            (json.dumps(doc, sort_keys=True) + "\n").encode(),
            mode=PRIVATE_FILE_MODE,
        )


def _lock(state_dir: Path) -> FileLock:
    from loopx_chat.state.file_lock import FileLock

    return FileLock(state_dir / ".devices.lock")


def add(
    state_dir: Path, name: str | None, now: str, *, full: bool = True, desk: bool = False
) -> Device:
    """A new device with a fresh key. A name in use by an active device is refused; with no
    name, `browser-N` (the first free N)."""
    with _lock(state_dir):
        devices = load(state_dir)
        active = {d.name for d in devices if d.active}
        if name is None:
            n = 1
            while f"browser-{n}" in active:
                n += 1
            name = f"browser-{n}"
        elif valid_name(name) in active:
            raise UsageError(
                f"a device named {name} is already paired; revoke it first or pick another name",
                error_code="device_name_taken",
            )
        key = base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).rstrip(b"=").decode()
        device = Device(
            device_id="dev-" + secrets.token_urlsafe(12),
            name=name,
            created_at=now,
            key=key,
            full=full,
            desk=desk,
        )
        _save(state_dir, (*devices, device))
        return device


def find(devices: tuple[Device, ...], name_or_id: str) -> Device:
    for device in devices:
        if device.active and name_or_id in (device.name, device.device_id):
            return device
    raise UsageError(
        f"no paired device is named {name_or_id}; `loopx-chat devices` lists them",
        error_code="device_not_found",
    )


def revoke(state_dir: Path, name_or_id: str, now: str) -> Device:
    with _lock(state_dir):
        devices = load(state_dir)
        target = find(devices, name_or_id)
        done = replace(target, revoked_at=now)
        _save(state_dir, tuple(done if d is target else d for d in devices))
        return done


def touch(state_dir: Path, device_id: str, now: str) -> None:
    """Record when a device was last seen (the caller limits how often)."""
    with _lock(state_dir):
        devices = load(state_dir)
        _save(
            state_dir,
            tuple(replace(d, last_seen=now) if d.device_id == device_id else d for d in devices),
        )

"""The running service's view of the owner's devices: who may sign requests, right now.

Owns the in-memory copy of `devices.json` (re-read when the file's stat changes, so a
`devices revoke` from any shell takes effect on the next request and ends that device's open
streams), the one-time login codes of this run, adding a device when a code is redeemed,
and when a device was last seen (written at most once a minute per device).

It never hands out a key but to the browser that redeemed the code, and never logs one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from pathlib import Path

from loopx_chat.errors import LoopxChatError, StateError
from loopx_chat.service.device_auth import (
    LIVE_CODES_LIMIT,
    LOGIN_CODE_TTL_SEC,
    LoginCodes,
    LoginGrant,
    NonceCache,
)
from loopx_chat.state import devices as store
from loopx_chat.state.devices import Device

TOUCH_EVERY_SEC = 60.0


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class DeviceRegistry:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.codes = LoginCodes()
        self.nonces = NonceCache()
        # This run of the service: every signature names it, so none outlives a restart.
        self.run_id = secrets.token_urlsafe(12)
        self._lock = threading.Lock()
        self._signature: tuple[int, int, int] | None = None
        self._devices: dict[str, Device] = {}
        self._touched: dict[str, float] = {}

    def _refresh(self) -> None:
        try:
            info = os.stat(self.state_dir / store.DEVICES_FILE)
            signature = (info.st_ino, info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            signature = (0, 0, 0)
        if signature == self._signature:
            return
        try:
            found = store.load(self.state_dir)
        except StateError:
            found = ()  # an unsafe or corrupt file lets nobody in; `devices` says why
        self._devices = {d.device_id: d for d in found if d.active}
        self._signature = signature

    def lookup(self, device_id: str) -> tuple[bytes, str] | None:
        with self._lock:
            self._refresh()
            device = self._devices.get(device_id)
        if device is None:
            return None
        return device.key_bytes, device.name

    def device(self, device_id: str | None) -> Device | None:
        if device_id is None:
            return None
        with self._lock:
            self._refresh()
            return self._devices.get(device_id)

    def active(self, device_id: str) -> bool:
        return self.lookup(device_id) is not None

    def seen(self, device_id: str) -> None:
        now = time.time()
        with self._lock:
            if now - self._touched.get(device_id, 0.0) < TOUCH_EVERY_SEC:
                return
            self._touched[device_id] = now
        with contextlib.suppress(StateError, OSError):
            store.touch(self.state_dir, device_id, _utc(now))

    def issue_code(
        self, name: str | None, *, full: bool = True, desk: bool = False
    ) -> tuple[str, float]:
        """The one place a login or pairing code is minted (the CLI's `open` and `pair`, a
        program, the desk's page): valid name first, then the live-code limit."""
        if name is not None:
            store.valid_name(name)
        now = time.time()
        with self._lock:
            code = self.codes.issue(now, name, full=full, desk=desk)
        if code is None:
            raise LoopxChatError(
                f"{LIVE_CODES_LIMIT} sign-in codes are waiting to be used; use one or wait "
                "a few minutes for them to expire",
                error_code="too_many_login_codes",
            )
        return code, now + LOGIN_CODE_TTL_SEC

    def redeem(self, code: object) -> Device | None:
        """A new device for a live one-time code (spent now); None otherwise."""
        with self._lock:
            grant: LoginGrant | None = self.codes.redeem(code, time.time())
        if grant is None:
            return None
        return store.add(
            self.state_dir, grant.name, _utc(time.time()), full=grant.full, desk=grant.desk
        )

"""Who may use the service: the owner's own channel, a program with the secret, or one of
the owner's devices. Pure: a request's method, path, query and headers in; a decision out.

Loopback is shared by every local user and process, so everything but a bare `GET /healthz`
and the page's empty shell (`PUBLIC`: it holds no data) needs one of:
- the owner's Unix socket (`owner_channel`): the server checked the peer's uid;
- `Authorization: Bearer <secret>` from a program that reads the 0600 `service-token`;
- a device's signed headers (service/device_auth.py): a browser that logged in with a
  one-time code; it never holds the master secret, and no cookie exists to ride along.
Comparisons are constant-time. No secret is ever part of a decision's text, so no refusal,
log line or page can carry it.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from loopx_chat.service.device_auth import NonceCache, signed_headers, verify

HEALTH_PATH = "/healthz"
LOGIN_PATH = "/login"
SCRIPT_PATH = "/assets/first-screen.js"
# What anyone may fetch: the bare health check, the page's shell and script (no data in
# either), a one-time code's redemption and the service's proof of its device keys.
PUBLIC: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/"),
        ("GET", LOGIN_PATH),
        ("GET", SCRIPT_PATH),
        ("POST", "/api/auth/login"),
        ("POST", "/api/auth/prove"),
    }
)
# A program may say which of the owner's surfaces it speaks for (the CLI delegating to the
# service says `cli`); a device is always the page.
SURFACE_HEADER = "x-loopx-surface"
PROGRAM_SURFACES = frozenset({"api", "cli"})


class Access(StrEnum):
    HEALTH = "health"  # the bare health check: says only that the service is up
    PUBLIC = "public"  # the shell, its script, a code's redemption: no data
    OWNER = "owner"  # the owner's channel, secret or device came with the request
    REFUSED = "refused"


# A device id -> (its key, its name), or None for no such active device.
DeviceLookup = Callable[[str], "tuple[bytes, str] | None"]


@dataclass(frozen=True)
class AccessDecision:
    access: Access
    # Through which of the owner's surfaces: `page` (a device), `api` or `cli`.
    surface: str | None = None
    reason: str = ""
    device: str | None = None  # the device's name, for a device's request
    device_id: str | None = None

    @property
    def actor(self) -> str | None:
        """Who made a decision sent this way, as gate records name it."""
        if self.device:
            return f"owner-device:{self.device}"
        return f"owner-{self.surface}" if self.surface else None

    @property
    def authenticated(self) -> bool:
        return self.access is Access.OWNER


def _same(sent: str, secret: str) -> bool:
    return hmac.compare_digest(sent.encode("utf-8", "replace"), secret.encode("ascii"))


def bearer(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _program_surface(headers: Mapping[str, str]) -> str:
    surface = (headers.get(SURFACE_HEADER) or "api").strip().lower()
    return surface if surface in PROGRAM_SURFACES else "api"


def decide(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    secret: str,
    *,
    body: bytes = b"",
    owner_channel: bool = False,
    devices: DeviceLookup | None = None,
    nonces: NonceCache | None = None,
    now_ms: int = 0,
    run_id: str = "",
) -> AccessDecision:
    """Whether this request may go on, and as whom. Checked before any routing."""
    if owner_channel:
        return AccessDecision(Access.OWNER, surface=_program_surface(headers))
    if path == HEALTH_PATH and method in ("GET", "HEAD") and not query:
        return AccessDecision(Access.HEALTH)
    sent_bearer = bearer(headers)
    if sent_bearer is not None:
        if sent_bearer and _same(sent_bearer, secret):
            return AccessDecision(Access.OWNER, surface=_program_surface(headers))
        return AccessDecision(Access.REFUSED, reason="the bearer token is not this service's")
    signed = signed_headers(headers)
    if signed is not None and devices is not None and nonces is not None:
        found = devices(signed.device_id)
        if found is None:
            return AccessDecision(Access.REFUSED, reason="this device is not paired (or revoked)")
        key, name = found
        target = f"{path}?{query}" if query else path
        why = verify(signed, key, method, target, body, now_ms, nonces, run_id)
        if why is not None:
            return AccessDecision(Access.REFUSED, reason=why)
        return AccessDecision(Access.OWNER, surface="page", device=name, device_id=signed.device_id)
    if (("GET" if method == "HEAD" else method), path) in PUBLIC and not query:
        return AccessDecision(Access.PUBLIC)
    return AccessDecision(
        Access.REFUSED,
        reason="this service answers its owner only: open it with `loopx-chat open`",
    )


def wants_html(headers: Mapping[str, str], path: str) -> bool:
    return path == "/" or "text/html" in (headers.get("accept") or "")

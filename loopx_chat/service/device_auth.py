"""How a browser proves it is one of the owner's devices, and how the service proves itself
to it. Pure: keys, headers, times and nonces in; decisions out (no I/O, no clock of its own).

A browser gets in once, with a one-time code (`LoginCodes`: single use, short-lived, guesses
rate-limited) that `loopx-chat open` or `pair` hands it; it gets its own key back, imports it
as a non-extractable WebCrypto HMAC key and keeps only that key object (IndexedDB). From then
on every request carries the device id, a time, a nonce and an HMAC of the request over
those; nothing a browser keeps or sends is the service's master secret, and nothing rides
along by itself (no cookie: cookies are sent to every port of a host, RFC 6265 §8.5). A page
served later on the same origin by someone else can use the key object only while it runs
there, never read it out; and before the page signs anything it asks the service to prove
it knows the device's key (`server_proof`), so a squatter on the port receives no signature.

Never logs, returns or compares a key in a way that shows it; comparisons are constant-time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

DEVICE_HEADER = "x-loopx-device"
TIME_HEADER = "x-loopx-time"
NONCE_HEADER = "x-loopx-nonce"
SIGNATURE_HEADER = "x-loopx-signature"
SIGNED_HEADERS = (DEVICE_HEADER, TIME_HEADER, NONCE_HEADER, SIGNATURE_HEADER)
# The SHA-256 of the body (b64url), declared by a signed request that wants more than the
# ordinary body limit: its signature is checked against it before the body is read.
DIGEST_HEADER = "x-loopx-content-sha256"
# A signed request is good this long either side of the service's clock (the page learns the
# service's time when it checks the service, so a phone's clock skew does not matter).
WINDOW_MS = 120_000
NONCES_KEPT = 4096
LOGIN_CODE_TTL_SEC = 300.0
# Failed code redemptions allowed per window before every redemption is refused for a while:
# a code has 128 bits, so this only keeps a guesser from costing the service anything.
GUESS_LIMIT = 20
GUESS_WINDOW_SEC = 60.0
# Live (unspent, unexpired) codes at once, whoever asked (the owner's CLI or the desk's
# page): more is refused until one is spent or expires, so no caller fills the memory.
LIVE_CODES_LIMIT = 16


def login_url(base: str, code: str) -> str:
    """The URL a one-time code signs a browser in at: the code in the fragment, which no
    browser sends to any server, proxy or log."""
    return f"{base}/login#code={code}"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def signing_string(
    method: str, target: str, time_ms: str, nonce: str, body: bytes, run_id: str
) -> bytes:
    """What a device signs: the request's method, path and query, its time and nonce, the
    SHA-256 of its body, and the id of this run of the service (learned with its proof), so
    nothing signed before a restart works after it. The page's script builds the same."""
    digest = b64url(hashlib.sha256(body).digest())
    return signing_string_of_digest(method, target, time_ms, nonce, digest, run_id)


def signing_string_of_digest(
    method: str, target: str, time_ms: str, nonce: str, digest: str, run_id: str
) -> bytes:
    """`signing_string` with the body's digest already made (b64url SHA-256)."""
    parts = ("loopx-v1", run_id, method, target, time_ms, nonce, digest)
    return "\n".join(parts).encode("utf-8")


def sign(key: bytes, message: bytes) -> str:
    return b64url(hmac.new(key, message, hashlib.sha256).digest())


def server_proof(key: bytes, challenge: str, run_id: str) -> str:
    """The service's answer to a page's challenge, naming this run: only a holder of the
    device's key (the owner's service) can make it, and the page checks it before it signs
    anything."""
    return sign(key, f"loopx-server-v1\n{challenge}\n{run_id}".encode())


@dataclass(frozen=True)
class Signed:
    """A request's device headers, when it carries all four."""

    device_id: str
    time_ms: int
    nonce: str
    signature: str


def signed_headers(headers: Mapping[str, str]) -> Signed | None:
    values = [headers.get(name) for name in SIGNED_HEADERS]
    if not all(values):
        return None
    device_id, time_ms, nonce, signature = (str(v).strip() for v in values)
    if not time_ms.isdigit() or len(time_ms) > 16 or len(nonce) > 64 or len(signature) > 64:
        return None
    return Signed(device_id, int(time_ms), nonce, signature)


class NonceCache:
    """Nonces seen within the window, so a signed request is taken once (bounded)."""

    def __init__(self, size: int = NONCES_KEPT) -> None:
        self._seen: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._size = size

    def taken(self, device_id: str, nonce: str) -> bool:
        """Whether this nonce of this device was taken already (nothing is recorded)."""
        return (device_id, nonce) in self._seen

    def first_use(self, device_id: str, nonce: str, time_ms: int, now_ms: int) -> bool:
        while self._seen:
            key, seen_at = next(iter(self._seen.items()))
            if seen_at >= now_ms - 2 * WINDOW_MS and len(self._seen) < self._size:
                break
            del self._seen[key]
        if self.taken(device_id, nonce):
            return False
        self._seen[(device_id, nonce)] = time_ms
        return True


def verify(
    signed: Signed,
    key: bytes,
    method: str,
    target: str,
    body: bytes,
    now_ms: int,
    nonces: NonceCache,
    run_id: str,
) -> str | None:
    """None when the request is this device's, for this run, fresh and first; else why not."""
    if abs(now_ms - signed.time_ms) > WINDOW_MS:
        return "the request's time is too far from the service's; reload the page"
    text = signing_string(method, target, str(signed.time_ms), signed.nonce, body, run_id)
    expected = sign(key, text)
    if not hmac.compare_digest(expected, signed.signature):
        return "the request's signature is not this device's"
    if not nonces.first_use(signed.device_id, signed.nonce, signed.time_ms, now_ms):
        return "the request was already taken once"
    return None


def vouches_before_body(
    signed: Signed,
    key: bytes,
    method: str,
    target: str,
    declared_digest: str,
    now_ms: int,
    nonces: NonceCache,
    run_id: str,
) -> bool:
    """Whether a signed request's headers alone show it is this device's: fresh, its nonce
    not taken, and its signature good over the body digest it declares. Checked before the
    body is read (a larger body is read only for the owner); the full `verify` runs on the
    body once read, so a body that is not the declared one is refused then."""
    if abs(now_ms - signed.time_ms) > WINDOW_MS or nonces.taken(signed.device_id, signed.nonce):
        return False
    text = signing_string_of_digest(
        method, target, str(signed.time_ms), signed.nonce, declared_digest, run_id
    )
    return hmac.compare_digest(sign(key, text), signed.signature)


@dataclass(frozen=True)
class LoginGrant:
    """What a one-time code lets its browser become: a device with this name (None: the
    next free `browser-N`) that may, or may not (`full=False`), start work."""

    name: str | None
    full: bool
    expires_at: float
    desk: bool = False  # `loopx-chat open` at the machine, not a pairing from afar


class LoginCodes:
    """One-time codes of this run of the service (memory only: a restart voids them)."""

    def __init__(self) -> None:
        self._codes: dict[str, LoginGrant] = {}
        self._failures: list[float] = []

    def issue(
        self, now: float, name: str | None = None, *, full: bool = True, desk: bool = False
    ) -> str | None:
        """A new code; None while `LIVE_CODES_LIMIT` codes are live."""
        self._codes = {c: g for c, g in self._codes.items() if g.expires_at > now}
        if len(self._codes) >= LIVE_CODES_LIMIT:
            return None
        code = secrets.token_urlsafe(16)
        self._codes[code] = LoginGrant(name, full, now + LOGIN_CODE_TTL_SEC, desk)
        return code

    def redeem(self, code: object, now: float) -> LoginGrant | None:
        """The grant of a live code, which is then spent; None for anything else (and after
        too many failures, None for everything until the window passes)."""
        self._failures = [t for t in self._failures if t > now - GUESS_WINDOW_SEC]
        if len(self._failures) >= GUESS_LIMIT:
            return None
        grant = self._codes.pop(code, None) if isinstance(code, str) else None
        if grant is None or grant.expires_at <= now:
            self._failures.append(now)
            return None
        return grant

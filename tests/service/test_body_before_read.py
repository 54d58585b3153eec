"""A signed request's headers vouch for it before its body is read only when its signature
is good over the body digest it declares, fresh, with an unused nonce
(`device_auth.vouches_before_body`); the full check then holds the body to that digest."""

from __future__ import annotations

import hashlib

from loopx_chat.service.device_auth import (
    WINDOW_MS,
    NonceCache,
    Signed,
    b64url,
    sign,
    signing_string,
    verify,
    vouches_before_body,
)

KEY = b"k" * 32
RUN = "run-1"
TARGET = "/api/chat/sessions/s/turns"
NOW = 1_000_000_000


def _signed(body: bytes, nonce: str = "n1", time_ms: int = NOW, key: bytes = KEY) -> Signed:
    text = signing_string("POST", TARGET, str(time_ms), nonce, body, RUN)
    return Signed("dev", time_ms, nonce, sign(key, text))


def _digest(body: bytes) -> str:
    return b64url(hashlib.sha256(body).digest())


def test_the_declared_digest_is_checked_with_the_signature() -> None:
    body = b'{"text": "hi"}'
    nonces = NonceCache()
    signed = _signed(body)
    assert vouches_before_body(signed, KEY, "POST", TARGET, _digest(body), NOW, nonces, RUN)
    assert not vouches_before_body(signed, KEY, "POST", TARGET, _digest(b"x"), NOW, nonces, RUN)
    assert not vouches_before_body(
        _signed(body, key=b"o" * 32), KEY, "POST", TARGET, _digest(body), NOW, nonces, RUN
    )
    late = NOW + WINDOW_MS + 1
    assert not vouches_before_body(signed, KEY, "POST", TARGET, _digest(body), late, nonces, RUN)
    # Nothing was recorded: the full check takes the nonce once, then it is spent.
    assert verify(signed, KEY, "POST", TARGET, body, NOW, nonces, RUN) is None
    assert not vouches_before_body(signed, KEY, "POST", TARGET, _digest(body), NOW, nonces, RUN)


def test_a_body_that_is_not_the_declared_one_fails_the_full_check() -> None:
    declared = b'{"text": "small"}'
    signed = _signed(declared)
    nonces = NonceCache()
    assert vouches_before_body(signed, KEY, "POST", TARGET, _digest(declared), NOW, nonces, RUN)
    assert verify(signed, KEY, "POST", TARGET, b" " * 4096, NOW, nonces, RUN) is not None

"""`state/service_runtime`: the home identity the CLI and the service compare."""

from __future__ import annotations

import hashlib

import pytest

from loopx_chat.state import service_runtime
from loopx_chat.state.service_runtime import home_identity


@pytest.mark.parametrize("home", ["/Users/me/.codex", "/tmp/é home", "relative/home", "/x\udcff"])
def test_the_home_identity_is_the_sha256_prefix_hashlib_gives(home: str) -> None:
    expected = hashlib.sha256(home.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    assert home_identity(home) == expected


def test_the_identity_is_the_same_without_the_builtin_sha256(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_builtin_sha(name: str, *args: object, **kwargs: object) -> object:
        if name in ("_sha2", "_sha256"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_builtin_sha)
    assert service_runtime._sha256_hex(b"/h") == hashlib.sha256(b"/h").hexdigest()

"""What every smoke script shares: a failure type and checks that still run under `python -O`.

Imported by the smoke scripts in this folder (they put the checkout's `examples/` folder on
`sys.path` themselves); never imported by the package.
"""

from __future__ import annotations


class SmokeFailure(Exception):
    pass


def check(condition: bool, message: str) -> None:
    # Not `assert`: the smoke must still check under `python -O`.
    if not condition:
        raise SmokeFailure(message)


def expect(actual: object, wanted: object, what: str) -> None:
    check(actual == wanted, f"{what}: expected {wanted!r}, got {actual!r}")

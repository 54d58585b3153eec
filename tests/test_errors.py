"""Every error code the package raises is listed in ERROR_CODES (the documented contract)."""

from __future__ import annotations

import re
from pathlib import Path

from loopx_chat.errors import ERROR_CODES

PACKAGE = Path(__file__).resolve().parent.parent / "loopx_chat"


def test_every_raised_code_is_registered() -> None:
    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        used |= set(re.findall(r'error_code="([a-z_]+)"', path.read_text()))
    assert used, "the scan found no codes: the pattern is wrong"
    assert used - ERROR_CODES == set()


def test_codes_are_snake_case() -> None:
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", code) for code in ERROR_CODES)


def test_every_code_is_in_the_reference() -> None:
    """The error-code list a user reads (docs/reference.md, linked from the README)."""
    text = (PACKAGE.parent / "docs" / "reference.md").read_text()
    section = text.split("### Error codes", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z][a-z0-9_]*)`", section))
    assert ERROR_CODES - documented == set()

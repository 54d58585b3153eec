"""Which tests need the pinned real codex: those that use the `codex_bin` fixture, directly or
through another fixture (the `service` fixture, for one). They get the `codex` marker, so
`-m "not codex"` deselects exactly them; `codex_bin` itself still fails under CI when the
binary is missing, so a CI run that selects them never turns them into skips."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"


def needs_real_codex(item: pytest.Item) -> bool:
    return "codex_bin" in getattr(item, "fixturenames", ())


def in_integration(item: pytest.Item) -> bool:
    return item.path.is_relative_to(INTEGRATION)


def mark_real_codex(items: Iterable[pytest.Item]) -> None:
    for item in items:
        if needs_real_codex(item):
            item.add_marker(pytest.mark.codex)

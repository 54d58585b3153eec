"""The one ERRORS table: every code the package raises has an exit code and an outcome, every
outcome has an HTTP status, and the documented list matches the table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from loopx_chat.errors import ERROR_CODES, ERRORS, Outcome, spec_for
from loopx_chat.service.app import HTTP_STATUS, http_status

PACKAGE = Path(__file__).resolve().parent.parent / "loopx_chat"


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(PACKAGE.rglob("*.py"))]


def _raised_codes() -> set[str]:
    """Every literal `error_code=` keyword and every class's `default_code`."""
    used: set[str] = set()
    for path, tree in _trees():
        used |= set(re.findall(r'error_code="([a-z_]+)"', path.read_text()))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "error_code" and isinstance(keyword.value, ast.Constant):
                        used.add(keyword.value.value)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (
                        isinstance(item, ast.Assign)
                        and [ast.unparse(t) for t in item.targets] == ["default_code"]
                        and isinstance(item.value, ast.Constant)
                    ):
                        used.add(item.value.value)
    return used


def test_every_raised_code_has_an_exit_code_and_an_http_status() -> None:
    used = _raised_codes()
    assert {"usage_error", "state_error", "codex_error", "thread_busy"} <= used, "scan broken"
    assert used - set(ERRORS) == set()
    for code in used:
        assert 1 <= ERRORS[code].exit_code <= 255
        assert http_status(code) in range(400, 600)


def test_every_outcome_has_one_http_status() -> None:
    assert set(HTTP_STATUS) == set(Outcome)


def test_literal_statuses_in_the_service_agree_with_the_table() -> None:
    """`error_response(413, "body_too_large", ...)`: the status written next to a code is the
    one the table gives that code."""
    seen = 0
    for path, tree in _trees():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func).endswith("error_response")
                and len(node.args) >= 2
                and all(isinstance(arg, ast.Constant) for arg in node.args[:2])
            ):
                status, code = node.args[0].value, node.args[1].value
                assert http_status(code) == status, f"{path.name}:{node.lineno} {code}"
                seen += 1
    assert seen >= 5, "the scan found no literal statuses: the pattern is wrong"


def test_an_unregistered_code_is_an_internal_failure_not_another_kind() -> None:
    assert spec_for("no_such_code_anywhere").outcome is Outcome.INTERNAL
    assert http_status("no_such_code_anywhere") == 500


def test_codes_are_snake_case() -> None:
    assert frozenset(ERRORS) == ERROR_CODES
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", code) for code in ERROR_CODES)


def test_every_code_is_in_the_reference() -> None:
    """The error-code list a user reads (docs/reference.md, linked from the README)."""
    text = (PACKAGE.parent / "docs" / "reference.md").read_text()
    section = text.split("### Error codes", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z][a-z0-9_]*)`", section))
    assert ERROR_CODES - documented == set()

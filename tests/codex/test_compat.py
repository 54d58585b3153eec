"""The protocol table (`codex.compat.PROTOCOL`) is every method the package uses, and its pure
checks read a schema the way codex writes it.

The first test parses the package (ast): every JSON-RPC method it sends (`request`, `notify`,
`_rpc`, `call`, ...), compares a notification with, or names as a server request it answers
must be in the table, so a new use cannot ship without the check that `home check` runs."""

from __future__ import annotations

import ast
import gzip
import json
import re
from pathlib import Path

from loopx_chat.codex.compat import (
    PROTOCOL,
    SCHEMA_FILES,
    TESTED_RANGE,
    USED_METHODS,
    features_lost,
    missing_uses,
    range_position,
    surface_from_schema,
)
from tests.helpers.paths import CODEX_SCHEMAS, ROOT

PACKAGE = ROOT / "loopx_chat"
# Calls whose first string argument is a method sent to codex.
SENDERS = frozenset({"request", "notify", "_rpc", "call", "_call"})
# A string shaped like a JSON-RPC method of codex's (`thread/goal/set`, `item/tool/call`).
METHOD_SHAPE = re.compile(r"^[a-z][A-Za-z]*(/[a-z][A-Za-z]*)+$")
# Strings of that shape that are not codex methods: our own HTTP routes and unrelated text.
NOT_METHODS = frozenset({"n/a"})


def _calls_and_shapes(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    sent: set[str] = set()
    compared: set[str] = set()
    shaped: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in SENDERS:
                for arg in node.args[:2]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        sent.add(arg.value)
                        break
        elif isinstance(node, ast.Compare):
            left = node.left
            if isinstance(left, ast.Attribute) and left.attr == "method":
                for right in node.comparators:
                    if isinstance(right, ast.Constant) and isinstance(right.value, str):
                        compared.add(right.value)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and METHOD_SHAPE.match(node.value)
        ):
            shaped.add(node.value)
    return sent, compared, shaped


def test_every_method_the_package_uses_is_in_the_table() -> None:
    sent: set[str] = set()
    compared: set[str] = set()
    shaped: set[str] = set()
    for path in sorted((PACKAGE / "codex").rglob("*.py")) + sorted(
        (PACKAGE / "controller").rglob("*.py")
    ):
        if path.name == "compat.py":
            continue
        s, c, m = _calls_and_shapes(ast.parse(path.read_text(), str(path)))
        sent |= s
        compared |= c
        shaped |= m
    # The scan finds what it must: a sender, a compared notification, a shaped name.
    assert {"initialize", "turn/start", "initialized"} <= sent
    assert {"turn/completed", "item/agentMessage/delta"} <= compared
    assert "item/commandExecution/requestApproval" in shaped
    unknown = (sent | compared | shaped) - USED_METHODS - NOT_METHODS
    assert not unknown, f"methods used but not in codex.compat.PROTOCOL: {sorted(unknown)}"


def test_every_table_entry_is_used_by_the_package() -> None:
    text = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name not in ("compat.py",))
    unused = sorted(m for m in USED_METHODS if f'"{m}"' not in text)
    assert not unused, f"in the table but used nowhere: {unused}"


def _recorded(version: str, surface: str):  # type: ignore[no-untyped-def]
    folder = CODEX_SCHEMAS / version / surface
    return surface_from_schema(
        {
            kind: json.loads(gzip.decompress((folder / f"{name}.gz").read_bytes()))
            for kind, name in SCHEMA_FILES.items()
        }
    )


def test_the_oldest_recorded_release_has_everything_and_experimental_fields_need_its_schema() -> (
    None
):
    stable = _recorded(TESTED_RANGE.oldest, "stable")
    experimental = _recorded(TESTED_RANGE.oldest, "experimental")
    assert missing_uses(stable, experimental) == ()
    # collaborationMode exists only with --experimental: checked against the stable schema
    # alone, it is named, with the features that need it.
    only_stable = missing_uses(stable, stable)
    assert [(m.method, m.params) for m in only_stable] == [("turn/start", ("collaborationMode",))]
    assert features_lost(only_stable) == ("plan mode", "goal runs")


def test_range_position() -> None:
    assert range_position(TESTED_RANGE.oldest) == "inside"
    assert range_position(TESTED_RANGE.newest) == "inside"
    assert range_position("0.159.9") == "older"
    assert range_position("0.180.0") == "newer"
    assert range_position("1.0.0-alpha.2") == "newer"
    assert range_position("garbage") == "unknown" and range_position(None) == "unknown"


def test_the_table_names_its_kinds_and_features() -> None:
    assert {u.kind for u in PROTOCOL} == set(SCHEMA_FILES)
    assert all(u.features for u in PROTOCOL)
    assert Path(CODEX_SCHEMAS / TESTED_RANGE.oldest).is_dir()

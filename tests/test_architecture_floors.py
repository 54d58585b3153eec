"""The house keeps its shape: every import in `loopx_chat/` points down the floors, never up.

The floors, from the ground up, are written here once. The test parses every module's
imports (module level and inside functions alike, since a lazy import is still a
dependency), maps each module to its room (the package right under `loopx_chat/`), and fails
on an import from a lower floor to a higher one, between two rooms of the same floor, or a
module left loose at the top level. `docs/architecture.md` carries the same table, rendered
from `FLOORS` below; when the two differ the failure prints the table to paste.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "loopx_chat"
ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"
TOP_LEVEL_MODULES = frozenset(
    {"__init__", "__main__", "home", "errors", "visible_text", "valid_text", "pids"}
)


@dataclass(frozen=True)
class Floor:
    level: int
    rooms: tuple[str, ...]
    owns: str


# Ground floor first. "top" is the top-level modules (the binding, the errors, the version).
FLOORS: tuple[Floor, ...] = (
    Floor(
        0,
        ("top",),
        "the Codex-home binding (`home`), the error hierarchy, the control-character filter "
        "(`visible_text`), the valid-Unicode check (`valid_text`), the pid probe (`pids`), "
        "the version",
    ),
    Floor(1, ("session_runtime",), "the pure projection core and its public contracts"),
    Floor(2, ("state",), "owner-local storage: paths, atomic/append-only writes, records"),
    Floor(
        3,
        ("codex", "launchagent", "systemd", "notify"),
        "adapters: the codex binary and its rollouts; the macOS LaunchAgent; the systemd user "
        "service; owner notices",
    ),
    Floor(
        4,
        ("goals", "model_mock"),
        "goal-level control records and the pure decisions over them; a loopback mock of "
        "the model API (demo, tests, benchmarks)",
    ),
    Floor(5, ("controller",), "driving Codex threads on the pinned home"),
    Floor(6, ("service",), "the loopback HTTP front door"),
    Floor(7, ("cli",), "the command line: parse, call, render"),
)
LEVEL = {room: floor.level for floor in FLOORS for room in floor.rooms}


def room_of(module: str) -> str:
    parts = module.split(".")
    assert parts[0] == "loopx_chat", module
    if len(parts) == 1 or parts[1] in TOP_LEVEL_MODULES - {"__main__"}:
        return "top"
    if parts[1] == "__main__":
        return "cli"  # the entry point sits with the command line
    return parts[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, source: str) -> list[tuple[int, str]]:
    """Every loopx_chat module `source` (at `path`) imports, relative imports resolved."""
    tree = ast.parse(source, filename=str(path))
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return [(line, name) for line, name in found if name.split(".")[0] == "loopx_chat"]


def all_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def module_problems(path: Path, source: str) -> list[str]:
    problems = []
    importer = room_of(module_name(path))
    for line, target in imported_modules(path, source):
        imported = room_of(target)
        if imported == importer:
            continue
        rel = path.relative_to(ROOT)
        if imported not in LEVEL:
            problems.append(f"{rel}:{line} imports {target}: room {imported!r} has no floor")
        elif LEVEL[imported] > LEVEL[importer]:
            problems.append(
                f"{rel}:{line} ({importer}, floor {LEVEL[importer]}) imports {target} "
                f"({imported}, floor {LEVEL[imported]}): an upward import"
            )
        elif LEVEL[imported] == LEVEL[importer]:
            problems.append(
                f"{rel}:{line} ({importer}) imports {target} ({imported}): two rooms of "
                "one floor must not depend on each other"
            )
    return problems


def upward_imports() -> list[str]:
    return [
        problem
        for path in all_modules()
        for problem in module_problems(path, path.read_text(encoding="utf-8"))
    ]


def render_floor_table() -> str:
    lines = [
        "| floor | package | owns | may import |",
        "|---|---|---|---|",
    ]
    for floor in reversed(FLOORS):
        rooms = ", ".join(
            "top level (`home`, `errors`, `visible_text`, `valid_text`)"
            if r == "top"
            else f"`{r}/`"
            for r in floor.rooms
        )
        below = [r for f in FLOORS if f.level < floor.level for r in f.rooms]
        may = ", ".join("top level" if r == "top" else f"`{r}`" for r in reversed(below))
        lines.append(f"| {floor.level} | {rooms} | {floor.owns} | {may or 'nothing of ours'} |")
    return "\n".join(lines)


def test_every_room_has_a_floor_and_every_module_a_room() -> None:
    rooms = {room_of(module_name(p)) for p in all_modules()}
    assert rooms <= set(LEVEL), sorted(rooms - set(LEVEL))
    loose = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in TOP_LEVEL_MODULES)
    assert loose == [], f"modules left at the top level of loopx_chat/: {loose}"


def test_no_import_runs_up_a_floor_or_across_one() -> None:
    problems = upward_imports()
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    ("where", "source", "verdict"),
    [
        ("state/probe.py", "from ..controller import chat_controller\n", "upward"),
        ("state/probe.py", "def f():\n    import loopx_chat.goals.status\n", "upward"),
        ("codex/probe.py", "from loopx_chat.launchagent import plist\n", "one floor"),
        ("goals/probe.py", "from loopx_chat.nowhere import x\n", "no floor"),
        ("goals/probe.py", "from loopx_chat.state import jsonl\n", None),
        ("goals/probe.py", "from . import status\n", None),
    ],
)
def test_the_checker_judges_each_kind_of_import(
    where: str, source: str, verdict: str | None
) -> None:
    # The check itself must be able to fail: a virtual module is judged without writing it.
    problems = module_problems(PACKAGE / where, source)
    if verdict is None:
        assert problems == []
    else:
        assert len(problems) == 1 and verdict in problems[0], problems


@pytest.mark.parametrize("floor", FLOORS, ids=lambda f: "+".join(f.rooms))
def test_each_room_is_a_package(floor: Floor) -> None:
    for room in floor.rooms:
        if room != "top":
            assert (PACKAGE / room / "__init__.py").is_file(), room


def test_architecture_doc_shows_these_floors() -> None:
    table = render_floor_table()
    text = ARCHITECTURE_DOC.read_text(encoding="utf-8")
    assert table in text, "docs/architecture.md must contain this floor table:\n\n" + table

"""What every CLI command receives: the environment snapshot and the global options.

It never re-reads `os.environ`; commands get the snapshot taken at startup.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from loopx_chat.errors import LoopxChatError
from loopx_chat.home import CodexHomeBinding, resolve_codex_home
from loopx_chat.state.session_store import SessionStore

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class CliContext:
    environ: Mapping[str, str]
    cwd: Path
    state_dir: Path
    codex_bin: str | None
    state_dir_explicit: bool = False

    def binding(self) -> CodexHomeBinding:
        return resolve_codex_home(self.environ, self.cwd)

    def store(self) -> SessionStore:
        return SessionStore(self.state_dir)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def emit_ok(doc: dict[str, Any], as_json: bool, lines: Iterable[str]) -> None:
    """A command's result: `{"ok": true, **doc}` with --json, else the human lines."""
    if as_json:
        emit_json({"ok": True, **doc})
        return
    for line in lines:
        click.echo(line)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(func)


def renders_errors(func: F) -> F:
    """Turn a `LoopxChatError` into a message (or JSON) and exit 1; never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except LoopxChatError as exc:
            if kwargs.get("as_json"):
                emit_json(exc.to_dict())
            else:
                click.echo(f"error [{exc.error_code}]: {exc.message}", err=True)
                if exc.gate:
                    click.echo(f"  {exc.gate.summary}", err=True)
                    click.echo(f"  next: {exc.gate.next_action}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]

"""What every CLI command receives: the environment snapshot and the global options.

It never re-reads `os.environ`; commands get the snapshot taken at startup.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from loopx_chat.cli.chat_output import json_document
from loopx_chat.errors import LoopxChatError, StateError, UsageError, spec_for
from loopx_chat.home import CodexHomeBinding, resolve_codex_home
from loopx_chat.visible_text import ControlMode, visible_text

if TYPE_CHECKING:
    from loopx_chat.controller.chat_controller import ControllerConfig
    from loopx_chat.goals.gate_store import GateStore
    from loopx_chat.goals.goal_ledger import GoalLedger
    from loopx_chat.state.session_store import SessionStore

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class CliContext:
    environ: Mapping[str, str]
    cwd: Path
    state_dir: Path
    codex_bin: str | None
    state_dir_explicit: bool = False
    # Set by the `chat` group from its options; None: the controller's own defaults.
    controller_config: ControllerConfig | None = None
    # `--direct`: run every command in this process, never through a running service.
    direct: bool = False

    def binding(self) -> CodexHomeBinding:
        return resolve_codex_home(self.environ, self.cwd)

    def store(self) -> SessionStore:
        # Loaded by the commands that read sessions, not by every command (`codex facts`
        # reads only the host's rollouts and its own index).
        from loopx_chat.state.session_store import SessionStore

        return SessionStore(self.state_dir)

    def gate_store(self) -> GateStore:
        # Loaded, like the session store, only by the commands that read goals.
        from loopx_chat.goals.gate_store import GateStore

        return GateStore(self.state_dir)

    def goal_ledger(self) -> GoalLedger:
        from loopx_chat.goals.goal_ledger import GoalLedger

        return GoalLedger(self.gate_store())


def emit_json(data: Any) -> None:
    click.echo(json_document(data))


def emit_ok(
    doc: dict[str, Any], as_json: bool, lines: Iterable[str], *, empty: str | None = None
) -> None:
    """A command's result: `{"ok": true, **doc}` with --json, else the human lines (or, when
    there are none, `empty`: the one sentence saying the list is empty)."""
    if as_json:
        emit_json({"ok": True, **doc})
        return
    printed = False
    for line in lines:
        click.echo(visible_text(line, ControlMode.ESCAPES))
        printed = True
    if not printed and empty:
        click.echo(empty)


def read_json_input(source: str, what: str, *, limit: int | None = None) -> object:
    """A JSON document from a file (`-`: stdin) through the one safe reader: regular files
    only, bounded, depth-capped. Every refusal is `input_invalid` saying why."""
    # The state layer loads with the commands that read or write state, not with every
    # command (a chat turn delegated to the running service touches none of it).
    from loopx_chat.state.safe_read import DOCUMENT_LIMIT, JsonRefused, parse_json, read_regular
    from loopx_chat.valid_text import checked_tree

    limit = DOCUMENT_LIMIT if limit is None else limit
    try:
        if source == "-":
            raw = sys.stdin.buffer.read(limit + 1)
        else:
            raw = read_regular(Path(source), limit=limit)
    except FileNotFoundError:
        raise UsageError(f"{what} {source}: no such file", error_code="input_invalid") from None
    except StateError as exc:
        raise UsageError(f"{what}: {exc.message}", error_code="input_invalid") from None
    if len(raw) > limit:
        raise UsageError(f"{what} is larger than {limit >> 20} MiB", error_code="input_invalid")
    try:
        doc = parse_json(raw)
    except JsonRefused as exc:
        raise UsageError(
            f"{what} is not usable JSON ({exc.reason})",
            error_code="invalid_text" if exc.not_utf8 else "input_invalid",
        ) from None
    return checked_tree(doc, what)


# Where `--json`, once parsed, is noted for the error boundary (`LazyGroup.invoke`): the
# contexts of one command line share `meta`.
JSON_REQUESTED = "loopx_chat.json_requested"


def _note_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    ctx.meta[JSON_REQUESTED] = value
    return value


def json_option(func: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=_note_json,
        help="Print one JSON document instead of text.",
    )(func)


def nothing_found(things: str, goal_id: str | None = None) -> str:
    """The one way an empty list is said: `no gates for goal G`, `no sessions`."""
    return f"no {things}" + (f" for goal {goal_id}" if goal_id else "")


def as_known_error(exc: BaseException) -> LoopxChatError | None:
    """The documented error for an exception reaching the command layer, if it has one."""
    if isinstance(exc, LoopxChatError):
        return exc
    if isinstance(exc, OSError):
        # An OS error nobody below mapped: a read unless it says the disk refused a write.
        from loopx_chat.state.private_files import state_os_error

        return state_os_error(exc, exc.filename or "the state dir", writing=False)
    if isinstance(exc, RecursionError):
        return StateError(
            "a file or input is nested too deeply to read; it was left untouched",
            error_code="state_corrupt",
        )
    return None


def _internal_log(exc: BaseException) -> str:
    """Write the traceback for the owner; where it went, or why it could not be written."""
    import tempfile  # only a failure that needs the internal log pays for these
    import traceback

    from loopx_chat.state.private_files import ensure_private_dir, open_private_append, write_all

    text = "".join(traceback.format_exception(exc))
    cli = click.get_current_context(silent=True)
    obj = cli.find_object(CliContext) if cli else None
    candidates = [obj.state_dir / "logs"] if obj else []
    candidates.append(Path(tempfile.gettempdir()) / f"loopx-chat-{os.getuid()}")
    for folder in candidates:
        path = folder / "internal-errors.log"
        try:
            ensure_private_dir(folder)
            fd = open_private_append(path)
            try:
                from loopx_chat.state.session_store import utc_now

                write_all(fd, f"--- {utc_now()}\n{text}".encode(errors="replace"))
            finally:
                os.close(fd)
        except (OSError, LoopxChatError):
            continue
        return f"details in {path}"
    return "the details could not be logged"


def render_failure(exc: BaseException, as_json: bool) -> int:
    """Print one failure (one JSON document with --json); its exit code (`errors.ERRORS`).
    A refused output is not a command's failure: it goes on to `cli.run`, which says
    `output_unwritable`."""
    if isinstance(exc, OSError) and raised_writing_output(exc):
        raise exc
    known = as_known_error(exc)
    if known is None:
        summary = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        known = LoopxChatError(
            f"unexpected {summary.rstrip(': ')[:200]} ({_internal_log(exc)}); please report it",
            error_code="internal_error",
        )
    if as_json:
        emit_json(known.to_dict())
    else:
        click.echo(f"error [{known.error_code}]: {known.message}", err=True)
        if known.remedy:
            click.echo(f"  {known.remedy.summary}", err=True)
            click.echo(f"  next: {known.remedy.next_action}", err=True)
    return spec_for(known.error_code).exit_code


def raised_writing_output(exc: OSError) -> bool:
    """Whether `exc` came out of `click.echo`, the one way commands write their output: a
    refused stdout (a full device, say) is then not a state write that failed. Every state
    write maps its own errors to a state code before they get here, with the path."""
    echo = click.echo.__code__
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is echo:
            return True
        tb = tb.tb_next
    return False

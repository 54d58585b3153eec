"""`chat send` through the owner's running service, without click: the fast path of the
command line's most frequent turn.

Owns one decision and one run. `served_code(argv)` answers None, having read nothing and sent
nothing, for any command line it cannot answer exactly as the click command would: not a
`chat send` that `chat_argv.parse` reads, `--direct`, a path click would refuse, the first-output
timeout from the environment, a stream that is not UTF-8, no service of ours (a stale file, one
that fails `find_service`'s identity check, another home's: click then says why, once, and runs
the turn here), a service that answers `busy` (the click command then runs it here, with the
message read from stdin given back to it). Otherwise it runs the turn through the service
client exactly as `chat_cmd.chat_send` does through `delegation.ServedChat`, prints through the
same renderer (`chat_output`) with a writer that behaves as `click.echo`, and answers the exit
status. A failure is said by `context.render_failure`, the one error renderer, loaded only then.
It never weakens the identity check, never puts anything on argv, and loads no click, no
controller and no state store on a turn that succeeds.
"""

from __future__ import annotations

import errno
import io
import os
import re
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any, TextIO

from loopx_chat.cli.chat_argv import CHAT, ChatLine, parse
from loopx_chat.cli.chat_output import SERVED_HOST_LOOP, finish, host_loop_line, started_line
from loopx_chat.codex.turn_defaults import FIRST_OUTPUT_ENV
from loopx_chat.errors import LoopxChatError
from loopx_chat.visible_text import ControlMode, visible_text

# click's own pattern for the ANSI escapes `click.echo` strips from a stream that is no terminal.
_ANSI = re.compile(r"\033\[[0-?]*[ -/]*[@-~]")
_POLICY = ("approval", "plan", "decision_timeout")  # `approval_options.chat_policy_options`
# What this process's probe found, by (state dir, home), for the click command a line is then
# handed to (`delegation.service_for`): a service skipped after its 1 s wait is not waited for,
# and its note not earned, twice. The same check, a moment ago, in the same process.
_PROBED: dict[tuple[Path, Path], object] = {}
NOT_PROBED = object()


def probed(state_dir: Path, home: Path) -> object:
    """What `find_service` answered this process for `state_dir` and `home` (once), or
    `NOT_PROBED`."""
    return _PROBED.pop((state_dir, home), NOT_PROBED)


class _OutputRefused(Exception):
    """Writing the turn's end failed: `cli.run` says `output_unwritable`, as after click."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _Echo:
    """`click.echo` for a str, outside any click context: the newline, ANSI escapes stripped
    when the stream is no terminal or NO_COLOR is set, a flush after every write."""

    def __init__(self, no_color: bool) -> None:
        self.no_color = no_color

    def __call__(self, message: str | None = None, *, nl: bool = True, err: bool = False) -> None:
        stream = sys.stderr if err else sys.stdout
        out = (message or "") + ("\n" if nl else "")
        if out:
            if self.no_color or not _isatty(stream):
                out = _ANSI.sub("", out)
            stream.write(out)
        stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except Exception:
        return False


def _utf8(stream: TextIO) -> bool:
    """A stream click would write to as it is (it rewraps one whose encoding is ASCII)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    return encoding.replace("_", "") == "utf8"


def _path_click_takes(raw: str, *, dir_okay: bool, file_okay: bool) -> bool:
    """Whether click.Path(dir_okay, file_okay) takes `raw` without a word of its own."""
    try:
        st = os.stat(raw)
    except OSError:
        return True
    if (not file_okay and S_ISREG(st.st_mode)) or (not dir_okay and S_ISDIR(st.st_mode)):
        return False
    return os.access(raw, os.R_OK)


def _state_dir(line: ChatLine, environ: Mapping[str, str]) -> Path | None:
    raw = line.global_options.get("state_dir")
    if raw is None:
        from loopx_chat.state.location import default_state_dir

        return default_state_dir(environ)
    if not _path_click_takes(str(raw), dir_okay=True, file_okay=False):
        return None
    return Path(str(raw)).expanduser().resolve()


def _takes(line: ChatLine, environ: Mapping[str, str]) -> bool:
    """What click reads the same way, before anything is read from the state dir."""
    if line.global_options.get("direct") or not (_utf8(sys.stdout) and _utf8(sys.stderr)):
        return False
    if "first_output_timeout" not in line.chat_options and environ.get(FIRST_OUTPUT_ENV):
        return False  # click reads (and checks) it from the environment
    file = line.send_options.get("message_file")
    return file is None or _path_click_takes(str(file), dir_okay=False, file_okay=True)


def turn_options(line: ChatLine) -> dict[str, Any]:
    """The turn's own options given, in the order `delegation.given_turn_options` records
    them: the `chat` group's, then `--approval`, `--plan`, `--decision-timeout`."""
    chat = {o.dest: line.chat_options[o.dest] for o in CHAT if o.dest in line.chat_options}
    policy = {name: line.send_options[name] for name in _POLICY if name in line.send_options}
    return chat | policy


def served_code(words: list[str]) -> int | None:
    """The exit status of `words` run as a served `chat send`, or None (see the module)."""
    try:
        return _served_code(words)
    except (KeyboardInterrupt, EOFError):
        return _aborted(_Echo(no_color=bool(os.environ.get("NO_COLOR"))))


def _aborted(echo: _Echo) -> int:
    """What click's standalone mode does on Ctrl-C: a newline, then `Aborted!`, status 1."""
    echo(err=True)
    echo("Aborted!", err=True)
    return 1


def _served_code(words: list[str]) -> int | None:
    line = parse(words)
    if line is None:
        return None
    environ = dict(os.environ)
    try:
        if not _takes(line, environ):
            return None
        cwd = Path.cwd()
        state_dir = _state_dir(line, environ)
        if state_dir is None or not os.path.exists(state_dir / "service.json"):
            return None
        from loopx_chat.home import resolve_home_path
        from loopx_chat.service.client import ServiceClient, find_service

        home = resolve_home_path(environ, cwd)[0]
        service = _PROBED[(state_dir, home)] = find_service(state_dir, home)
    except Exception:
        return None  # click meets the same and says it its way
    if not isinstance(service, ServiceClient):
        return None  # click says why (from `_PROBED`) and runs the turn here
    return _Run(line, environ, cwd, state_dir, service).code()


class _Run:
    """One served `chat send`, from reading its message to its exit status."""

    def __init__(
        self, line: ChatLine, environ: dict[str, str], cwd: Path, state_dir: Path, service: Any
    ) -> None:
        self.line, self.environ, self.cwd, self.state_dir = line, environ, cwd, state_dir
        self.service = service
        self.as_json = bool(line.send_options.get("as_json"))
        self.echo = _Echo(no_color=bool(environ.get("NO_COLOR")))
        self.text: str | None = None

    def code(self) -> int | None:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            return self._turn()
        except _OutputRefused as refused:
            raise refused.error from None
        except LoopxChatError as exc:
            if exc.error_code == "busy":
                self._give_back_stdin()
                return None  # click runs it here, after its one note
            return self._failed(exc)
        except (KeyboardInterrupt, EOFError):
            return _aborted(self.echo)
        except Exception as exc:
            return self._failed(exc)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _turn(self) -> int:
        from loopx_chat.cli.chat_message import message_text

        file = self.line.send_options.get("message_file")
        self.text = message_text(self.line.message, Path(str(file)) if file else None)
        streamed = False
        echo = self.echo

        def on_delta(delta: str) -> None:
            nonlocal streamed
            streamed = True
            if not self.as_json:
                echo(visible_text(delta, ControlMode.PICTURES), nl=False)
                sys.stdout.flush()

        def on_started(turn_id: str) -> None:
            if not self.as_json:
                echo(started_line(turn_id), err=True)

        def on_notice(line: str) -> None:
            echo(f"[loopx-chat] {line}", err=True)

        options = turn_options(self.line)
        result = self.service.submit_turn(
            self.line.session_id,
            self.text,
            self.line.send_options.get("client_turn_id"),
            on_delta=on_delta,
            on_started=on_started,
            on_notice=on_notice,
            **({"options": options} if options else {}),
        )
        try:
            if result.get("host_loop"):
                echo(host_loop_line(SERVED_HOST_LOOP), err=True)
            return 0 if finish(echo, result, self.as_json, streamed) else 1
        except OSError as exc:
            # click's standalone mode ends a closed pipe with status 1, quietly; any other
            # refused output is `cli.run`'s `output_unwritable`.
            if exc.errno == errno.EPIPE:
                return 1
            raise _OutputRefused(exc) from None

    def _give_back_stdin(self) -> None:
        """The message read from stdin, there again for the click command to read."""
        if self.line.message == "-" and self.text is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(self.text.encode("utf-8")), encoding="utf-8")

    def _failed(self, exc: BaseException) -> int:
        """`exc` said by the one error renderer, in a click context as the command's."""
        import click

        from loopx_chat.cli.context import CliContext, render_failure
        from loopx_chat.cli.root import main

        given = self.line.global_options
        codex_bin = given.get("codex_bin")
        cli = CliContext(
            environ=self.environ,
            cwd=self.cwd,
            state_dir=self.state_dir,
            codex_bin=str(codex_bin)
            if codex_bin
            else self.environ.get("LOOPX_CHAT_CODEX_BIN") or None,
            state_dir_explicit=bool(
                self.line.global_options.get("state_dir")
                or self.environ.get("LOOPX_CHAT_STATE_DIR")
            ),
        )
        ctx = click.Context(main, info_name="loopx-chat", obj=cli)
        if self.echo.no_color:
            ctx.color = False
        with ctx:
            return render_failure(exc, self.as_json)


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)

"""The `loopx-chat` command line: the process's entry (`run`) and its end.

`run` is the console script and `python -m loopx_chat`. A `chat send` with a running service
of ours goes through `served_send` without loading click (the command line's most frequent
turn, and a third of its start); every other command line, and that one whenever the fast
path cannot answer it exactly as click would, runs the click group `main` (`cli/root.py`,
loaded on first use: `from loopx_chat.cli import main` still works). Importing this package
loads nothing but the standard library.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn


def __getattr__(name: str) -> Any:
    if name == "main":  # the click group, loaded on first use
        from loopx_chat.cli.root import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run() -> NoReturn:
    """The console script and `python -m loopx_chat`: run the command, then end the process.

    A `chat send` the running service can take is sent there without click
    (`served_send.served_code`, None when it cannot take it: then nothing was read or sent);
    anything else is the click group's (`run_click`).
    """
    words = sys.argv[1:]
    # A look at the words first: every other command starts as before, loading nothing more.
    # (`main` is set here only by an in-process caller that put its own in.)
    if "send" in words and "chat" in words and "main" not in globals():
        from loopx_chat.cli.served_send import served_code

        code = _ended(lambda: served_code(words))
        if code is not None:
            _end(code)
    run_click()


def run_click() -> NoReturn:
    """The full click command line, then the end of the process (`_end`)."""
    command = globals().get("main") or __getattr__("main")
    _end(_ended(lambda: command() or 0) or 0)


def _ended(body: Callable[[], int | None]) -> int | None:
    """`body`'s exit status, SystemExit and a refused output included."""
    try:
        return body()  # click's standalone mode always ends by raising SystemExit
    except SystemExit as exc:
        return _exit_status(exc.code)
    except OSError as exc:
        # Only writing the output gets here (every other OSError is a command's error code):
        # `--help > /dev/full`, say. click itself already ends a closed pipe quietly.
        from loopx_chat.errors import ERRORS

        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(
                f"error [output_unwritable]: could not write the output "
                f"({exc.strerror or type(exc).__name__}); whatever the command did is done, "
                "and `loopx-chat status` shows it.\n"
            )
        return ERRORS["output_unwritable"].exit_code


def _end(code: int) -> NoReturn:
    """End the process with `code` once everything the interpreter would do at exit is done.

    Other non-daemon threads joined, atexit callbacks run (a library's log flush among them),
    stdout and stderr flushed; what it skips is tearing down some 200 modules and their
    objects, 30 to 50 ms of nothing for a process that is ending anyway (measured in
    docs/performance.md). In-process callers (tests, `CliRunner`) call `main` and keep their
    interpreter.
    """
    try:
        me = threading.current_thread()
        for worker in threading.enumerate():
            if worker is not me and not worker.daemon:
                worker.join()
        atexit._run_exitfuncs()
    except KeyboardInterrupt:
        code = 130  # Ctrl-C while ending: stop now, as a shell expects, with no traceback
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # what CPython's own exit does when a final flush fails
    os._exit(code)


def _exit_status(code: object) -> int:
    """SystemExit's code as the process status, the way the interpreter maps it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1

"""How a `loopx-chat` process ends: `cli.run` skips the interpreter's teardown, nothing else.

Each case runs a real process: the exit status, every byte of buffered output, other
threads' work and atexit callbacks must be exactly what a normal interpreter exit gives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopx_chat.cli import main
from tests.helpers.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
# A full device is Linux's; elsewhere (a Mac) these are skipped, but never under CI, where a
# missing /dev/full must fail rather than pass unseen.
NEEDS_DEV_FULL = pytest.mark.skipif(
    not Path("/dev/full").exists() and not os.environ.get("CI"), reason="needs /dev/full (Linux)"
)


def _run_with_fake_main(body: str) -> subprocess.CompletedProcess[bytes]:
    """`cli.run()` in a fresh interpreter, with `main` replaced by `body`'s `fake_main`."""
    script = (
        textwrap.dedent(
            """
        import atexit, sys, threading
        import loopx_chat.cli as cli
        """
        )
        + textwrap.dedent(body)
        + "\ncli.main = fake_main\ncli.run()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=60, check=False
    )


def test_run_joins_threads_runs_atexit_and_flushes_every_byte() -> None:
    done = _run_with_fake_main(
        """
        def fake_main():
            atexit.register(lambda: sys.stdout.write("atexit-ran\\n"))
            def writer():
                for _ in range(200):
                    sys.stdout.write("x" * 1000)  # buffered: only a flush gets it out
                sys.stdout.write("\\n")
            threading.Thread(target=writer).start()  # not a daemon: exit waits for it
            raise SystemExit(3)
        """
    )
    assert done.returncode == 3
    assert done.stdout == b"x" * 200_000 + b"\natexit-ran\n"
    assert done.stderr == b""


@pytest.mark.parametrize(
    ("raised", "status", "stderr"),
    [
        ("None", 0, b""),
        ("0", 0, b""),
        ("2", 2, b""),
        ("256 + 7", 7, b""),  # the status is the low byte, as the kernel keeps it
        ("'a message'", 1, b"a message\n"),
    ],
)
def test_run_maps_system_exit_like_the_interpreter(raised: str, status: int, stderr: bytes) -> None:
    done = _run_with_fake_main(f"def fake_main():\n    raise SystemExit({raised})\n")
    plain = subprocess.run(
        [sys.executable, "-c", f"raise SystemExit({raised})"], capture_output=True, check=False
    )
    assert (done.returncode, done.stderr) == (plain.returncode, plain.stderr) == (status, stderr)


def test_cli_exit_status_and_output_match_the_in_process_cli(tmp_path: Path) -> None:
    from click.testing import CliRunner

    argv = ["--state-dir", str(tmp_path / "state"), "status", "--json"]
    real = subprocess.run(
        [sys.executable, "-m", "loopx_chat", *argv], capture_output=True, timeout=60, check=False
    )
    in_process = CliRunner().invoke(main, argv)
    assert real.returncode == in_process.exit_code == 0
    assert real.stdout.decode() == in_process.stdout

    bad = subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--no-such-option"], capture_output=True, check=False
    )
    assert bad.returncode == 2
    assert b"No such option" in bad.stderr


@NEEDS_DEV_FULL
@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_output_to_a_full_device_is_output_unwritable(argv: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "loopx_chat", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.startswith(b"error [output_unwritable]: could not write the output (")
    assert b"Traceback" not in done.stderr


@NEEDS_DEV_FULL
@pytest.mark.parametrize(
    "argv", [["status"], ["status", "--json"], ["goal", "list"], ["codex", "facts"]]
)
def test_a_command_whose_output_is_refused_says_so_not_a_state_error(
    tmp_path: Path, argv: list[str]
) -> None:
    """Inside a command, a refused stdout is not a state write that failed: the state dir is
    untouched, and the message says the output could not be written."""
    home = tmp_path / "home"
    home.mkdir()
    state = tmp_path / "state"
    env = {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home)}
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.startswith(b"error [output_unwritable]: could not write the output (")
    assert b"state_unwritable" not in done.stderr and b"Traceback" not in done.stderr


def test_ctrl_c_while_waiting_for_a_thread_ends_130_without_a_traceback() -> None:
    script = textwrap.dedent(
        """
        import sys, threading
        import loopx_chat.cli as cli
        def fake_main():
            threading.Thread(target=threading.Event().wait).start()  # never ends by itself
            raise SystemExit(0)
        cli.main = fake_main
        cli.run()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        # The kernel says when the main thread sleeps on a futex with another thread alive:
        # that is `run` joining the thread, the moment a user's Ctrl-C would land.
        main_wchan = Path(f"/proc/{proc.pid}/task/{proc.pid}/wchan")
        tasks = Path(f"/proc/{proc.pid}/task")
        wait_for(
            lambda: len(list(tasks.iterdir())) >= 2 and "futex" in main_wchan.read_text(),
            timeout=30,
        )
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert b"Traceback" not in err and out == b""

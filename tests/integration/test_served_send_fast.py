"""`chat send` through the running service without click (`cli/served_send.py`) answers
byte for byte what the click command answers: the same stdout, stderr, exit status and
`--json` document, for turns and for bad input alike; anything it does not read exactly as
click does goes to click.

Each case runs twice as real processes on the same running `serve` and the pinned codex
against the loopback mock: the console script's `run` (the fast path) on one session, and
the click command alone (`run_click`) on a twin session at the same point of its history.
Ids and times are the only words that may differ; they are replaced by placeholders in
order of appearance."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.model_mock.responses import MockResponsesServer
from tests.integration.test_cli_delegation import Cli, Normal, _fake_runtime, _hung_socket

pytestmark = pytest.mark.codex

_PRELUDE = (
    "import atexit, os, sys\n"
    "sys.argv[0] = 'loopx-chat'\n"
    "atexit.register(lambda: open(os.environ['PROBE_OUT'], 'w').write("
    "json.dumps(sorted(sys.modules))))\n"
    "import json\n"
)
FAST = _PRELUDE + "from loopx_chat.cli import run\nrun()\n"
CLICK = _PRELUDE + "from loopx_chat.cli import run_click\nrun_click()\n"


class Twins:
    """Two sessions opened alike on one running service, one for each path."""

    def __init__(self, cli: Cli, tmp: Path, sessions: int = 2) -> None:
        self.cli, self.tmp = cli, tmp
        self.sessions: list[str] = []
        for _ in range(sessions):
            opened = cli("chat", "new", "--goal", "g", "--json", "mock:text=ok")
            assert opened.exit_code == 0, opened.output
            self.sessions.append(json.loads(opened.stdout)["session_id"])

    def command(self, script: str, session: str, words: list[str]) -> dict[str, Any]:
        """`subprocess` arguments for `words` (`{sid}`: `session`) through `script`."""
        env = {**self.cli.env, "LOOPX_CHAT_CODEX_HOME": str(self.cli.home), "NO_COLOR": "1"}
        base = ["--state-dir", str(self.cli.state), "--codex-bin", self.cli.codex_bin]
        args = [w.replace("{sid}", session) for w in words]
        return {
            "args": [sys.executable, "-c", script, *base, *args],
            "env": {**env, "PROBE_OUT": str(self.tmp / "probe.json")},
        }

    def normal(self, session: str) -> Normal:
        norm = Normal(self.cli.state)
        norm.names[session] = "<session>"
        return norm

    def run(
        self, script: str, session: str, words: list[str], stdin: bytes = b""
    ) -> tuple[int, str, str, list[str]]:
        done = subprocess.run(
            **self.command(script, session, words),
            input=stdin,
            capture_output=True,
            timeout=120,
            check=False,
        )
        loaded = json.loads((self.tmp / "probe.json").read_text())
        norm = self.normal(session)
        # The mock numbers its replies across both sessions: the one word that may differ.
        out = re.sub(r"mock reply #\d+", "mock reply #N", done.stdout.decode())
        try:
            shown = json.dumps(norm.doc(json.loads(out)), sort_keys=True)
        except ValueError:
            shown = norm.text(out)
        return done.returncode, shown, norm.text(done.stderr.decode()), loaded

    def both(self, words: list[str], stdin: bytes = b"") -> tuple[Any, Any, list[str]]:
        """(fast path's answer, click's answer, the modules the fast path loaded)."""
        *fast, loaded = self.run(FAST, self.sessions[0], words, stdin)
        *slow, click_loaded = self.run(CLICK, self.sessions[1], words, stdin)
        assert "click" in click_loaded  # the yardstick is the click command
        return fast, slow, loaded


@pytest.fixture
def twins(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    start_service: Callable[..., Any],
    mock: MockResponsesServer,
) -> Twins:
    cli = Cli(tmp_path / "state", bound_home, base_env, codex_bin)
    start_service(cli.state, cli.home, cli.env, cli.codex_bin)
    return Twins(cli, tmp_path)


# Command lines the fast path takes: it must answer without click, as click answers.
TAKEN: list[tuple[str, list[str], bytes]] = [
    ("human", ["chat", "send", "{sid}", "mock:text=alpha beta gamma"], b""),
    ("json", ["chat", "send", "{sid}", "--json", "mock:text=one two"], b""),
    ("retry id", ["chat", "send", "--client-turn-id", "r1", "{sid}", "mock:text=x"], b""),
    ("retry again", ["chat", "send", "{sid}", "--client-turn-id=r1", "mock:text=x"], b""),
    (
        "own options",
        [
            *("chat", "--sandbox", "workspace-write", "--idle-timeout", "30"),
            *("--turn-timeout=90", "--first-output-timeout", "45", "send", "{sid}"),
            *("--approval", "never", "--decision-timeout", "7.5", "--json", "mock:text=opts"),
        ],
        b"",
    ),
    ("stdin", ["chat", "send", "{sid}", "-"], b"mock:text=from stdin"),
    ("after --", ["chat", "send", "{sid}", "--", "mock:text=dashes"], b""),
    ("failed turn", ["chat", "send", "{sid}", "mock:fail"], b""),
    ("failed turn json", ["chat", "send", "{sid}", "--json", "mock:fail"], b""),
    ("control chars", ["chat", "send", "{sid}", "mock:text=a\x1b[31mred\x07"], b""),
    # bad input, each refused with its own error code and no traceback
    ("empty", ["chat", "send", "{sid}", "   "], b""),
    ("empty json", ["chat", "send", "{sid}", "--json", ""], b""),
    ("two messages", ["chat", "send", "{sid}", "hi", "--file", "/nonexistent/m.txt"], b""),
    ("no message", ["chat", "send", "{sid}"], b""),
    ("missing file", ["chat", "send", "{sid}", "--file", "/nonexistent/m.txt"], b""),
    ("stdin not utf-8", ["chat", "send", "{sid}", "--json", "-"], b"\xff\xfe hi"),
    ("unknown session", ["chat", "send", "a" * 32, "hi"], b""),
    ("unknown session json", ["chat", "send", "a" * 32, "--json", "hi"], b""),
    ("bad session id", ["chat", "send", "../x", "--json", "hi"], b""),
]
# Command lines it leaves to click (which answers them, errors included).
LEFT: list[tuple[str, list[str]]] = [
    ("help", ["chat", "send", "--help"]),
    ("unknown option", ["chat", "send", "{sid}", "--nope", "hi"]),
    ("zero timeout", ["chat", "--idle-timeout", "0", "send", "{sid}", "hi"]),
    ("odd number", ["chat", "--idle-timeout", "1e3", "send", "{sid}", "mock:text=e"]),
    ("bad choice", ["chat", "send", "{sid}", "--approval", "Never", "hi"]),
    ("flag with value", ["chat", "send", "{sid}", "--json=1", "hi"]),
    ("three words", ["chat", "send", "{sid}", "hi", "there"]),
    ("no session", ["chat", "send"]),
    ("option-like message", ["chat", "send", "{sid}", "-x"]),
    ("direct", ["--direct", "chat", "send", "a" * 32, "hi"]),
    ("not utf-8 word", ["chat", "send", "{sid}", "caf\udce9"]),
    ("a dir as --file", ["chat", "send", "{sid}", "--file", "/"]),
]


def test_taken_lines_answer_as_click_does_without_loading_it(twins: Twins) -> None:
    for what, words, stdin in TAKEN:
        fast, slow, loaded = twins.both(words, stdin)
        assert fast == slow, what
        assert "Traceback" not in fast[2], what
        if fast[0] == 0:
            assert "click" not in loaded, what  # the turn ran on the fast path
            assert not [m for m in loaded if m.startswith("loopx_chat.controller")], what
    # and it refused with the codes the contract names
    codes = {what: twins.both(words, stdin)[0] for what, words, stdin in TAKEN[-9:]}
    assert all(code != 0 for code, *_ in codes.values())
    assert "usage_error" in codes["empty"][2]
    assert '"error_code": "invalid_text"' in codes["stdin not utf-8"][1]
    assert "session_not_found" in codes["unknown session"][2]


def test_lines_it_does_not_read_exactly_go_to_click(twins: Twins) -> None:
    for what, words in LEFT:
        fast, slow, loaded = twins.both(words)
        assert fast == slow, what
        assert "click" in loaded, what  # click answered it
        assert "Traceback" not in fast[2], what


def _ended_by(twins: Twins, script: str, session: str, signum: int) -> tuple[int, str, str]:
    proc = subprocess.Popen(
        **twins.command(script, session, ["chat", "send", session, "mock:hang"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # "[loopx-chat] turn ... running": codex has the turn
    assert b"running" in first, first
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    norm = twins.normal(session)
    return proc.returncode, norm.text(out.decode()), norm.text((first + err).decode())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_end_both_paths_alike(twins: Twins, signum: int) -> None:
    fast = _ended_by(twins, FAST, twins.sessions[0], signum)
    slow = _ended_by(twins, CLICK, twins.sessions[1], signum)
    assert fast == slow
    assert fast[0] != 0 and "Traceback" not in fast[2]


def test_a_hung_service_is_probed_once_and_said_as_click_says_it(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    """The fast path's 1 s probe of a silent service is the one the click command then uses:
    one connection, one note, the same answer as click's alone."""
    cli = Cli(tmp_path / "state", bound_home, base_env, codex_bin)
    _fake_runtime(cli.state, cli.home, 9)  # our pid, a port nobody is asked about
    twins = Twins(cli, tmp_path, sessions=0)
    words = ["chat", "send", "a" * 32, "--json", "hi"]
    with _hung_socket(cli.state) as held:
        *fast, loaded = twins.run(FAST, "-", words)
        fast_connections = len(held)
        *slow, _ = twins.run(CLICK, "-", words)
        assert len(held) - fast_connections == 1
    assert fast_connections == 1
    assert fast == slow
    assert "did not answer within 1 s" in fast[2] and fast[2].count("not using the service") == 1
    assert '"error_code": "session_not_found"' in fast[1]
    assert "click" in loaded

"""The CLI through the owner's running service: the same answers as the direct path, the
reply streamed from its first delta, no `thread_busy` with the service's warm thread, and
the direct path whenever the service is not usable (down, hung, stale, another home's).

Real `loopx-chat serve` processes and the pinned codex against the loopback mock."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from loopx_chat import __version__
from loopx_chat.cli import main
from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import (
    RUNTIME_FILE,
    ServiceRuntime,
    ensure_secret,
    home_identity,
    runtime_for_this_process,
    write_runtime,
)
from tests.helpers.module_probe import probe_modules
from tests.helpers.waiting import wait_value

SKIP_NOTE = "not using the service"


class Cli:
    """`loopx-chat` in process on one state dir and home."""

    def __init__(self, state: Path, home: Path, env: dict[str, str], codex_bin: str) -> None:
        self.state, self.home, self.env, self.codex_bin = state, home, env, codex_bin

    def __call__(self, *args: str) -> Result:
        env = {**self.env, "LOOPX_CHAT_CODEX_HOME": str(self.home), "NO_COLOR": "1"}
        base = ["--state-dir", str(self.state), "--codex-bin", self.codex_bin]
        return CliRunner().invoke(main, [*base, *args], env=env)


@pytest.fixture
def cli_for(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> Callable[[str], Cli]:
    return lambda name: Cli(tmp_path / name, bound_home, base_env, codex_bin)


@pytest.fixture
def served(
    cli_for: Callable[[str], Cli], start_service: Callable[..., Any], mock: MockResponsesServer
) -> tuple[Cli, str]:
    """A state dir with its service running, and a session opened through it (its thread
    is warm in the service)."""
    cli = cli_for("state")
    start_service(cli.state, cli.home, cli.env, cli.codex_bin)
    opened = cli("chat", "new", "--goal", "g", "--json", "mock:text=ok")
    assert opened.exit_code == 0, opened.output
    return cli, json.loads(opened.stdout)["session_id"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Normal:
    """Ids and times replaced by placeholders, the same id by the same one everywhere."""

    def __init__(self, state: Path) -> None:
        self.names: dict[str, str] = {str(state): "<state>"}

    def _name(self, value: str) -> str:
        return self.names.setdefault(value, f"<id{len(self.names)}>")

    def doc(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self.doc(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.doc(v, key) for v in value]
        if isinstance(value, str) and value:
            if (key == "id" or key.endswith("_id")) and value not in self.names:
                return self._name(value)
            if key.endswith("_at"):
                return "<time>"
            return self.text(value)
        return value

    def text(self, text: str) -> str:
        for value, name in sorted(self.names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(value, name)
        text = re.sub(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b",
                      lambda m: self._name(m.group()), text)  # fmt: skip
        return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "<time>", text)


def _run_the_list(cli: Cli) -> list[tuple[str, int, Any, str]]:
    """The chat and gate commands, each as (what, exit code, normalized output, stderr)."""
    norm = Normal(cli.state)
    out: list[tuple[str, int, Any, str]] = []

    def step(what: str, *args: str) -> Any:
        result = cli(*args)
        doc = json.loads(result.stdout) if "--json" in args else None
        shown = norm.doc(doc) if doc is not None else norm.text(result.stdout)
        out.append((what, result.exit_code, shown, norm.text(result.stderr)))
        return doc

    opened = step("new", "chat", "new", "--goal", "g1", "--json", "mock:text=first words here")
    sid = opened["session_id"]
    step("send", "chat", "send", sid, "--client-turn-id", "r1", "mock:text=alpha beta gamma")
    step("retry", "chat", "send", sid, "--client-turn-id", "r1", "--json", "mock:text=x")
    step("resume", "chat", "resume", sid, "--json")
    step("resume human", "chat", "resume", sid)
    step("interrupt idle", "chat", "interrupt", sid, "--json")
    step("interrupt idle human", "chat", "interrupt", sid)
    step("unknown session", "chat", "send", "a" * 32, "--json", "hi")
    step("unknown session human", "chat", "send", "a" * 32, "hi")
    step("new human", "chat", "new", "--goal", "g2", "mock:text=one two three four")
    gate = cli("gate", "request", "--goal", "g1", "--question", "ship it?", "--json")
    gate_id = json.loads(gate.stdout)["gate"]["gate_id"]
    norm.doc({"gate_id": gate_id})
    resolve = ["gate", "resolve", gate_id, "--goal", "g1"]
    step("resolve", *resolve, "--decision", "approve", "--reason", "fine", "--json")
    step("resolve again", *resolve, "--decision", "reject", "--json")
    step("resolve again human", *resolve, "--decision", "reject")
    typo = ["gate", "resolve", "gate-0123456789ab", "--goal", "g-typo", "--decision", "approve"]
    step("resolve typo", *typo, "--json")
    step("resolve typo human", *typo)
    step("resolve unknown gate", "gate", "resolve", "gate-nope", "--goal", "g1", "--decision",
         "approve", "--json")  # fmt: skip
    return out


def test_the_chat_and_gate_commands_answer_the_same_through_the_service(
    cli_for: Callable[[str], Cli], start_service: Callable[..., Any], mock: MockResponsesServer
) -> None:
    direct = cli_for("direct-state")
    delegated = cli_for("served-state")
    service = start_service(delegated.state, delegated.home, delegated.env, delegated.codex_bin)
    here = _run_the_list(direct)
    served_before = len(service.served())
    there = _run_the_list(delegated)
    assert [row[0] for row in here] == [row[0] for row in there]
    for mine, theirs in zip(here, there, strict=True):
        assert mine == theirs, mine[0]
    assert not any(SKIP_NOTE in row[3] for row in there)
    # It really went through the service: every delegated command is a request it logged.
    posts = [line for line in service.served()[served_before:] if " POST " in line]
    assert len(posts) >= 15, posts
    assert not (direct.state / RUNTIME_FILE).exists()
    # The human send streamed the whole reply, both ways.
    assert dict((r[0], r[2]) for r in there)["send"] == "alpha beta gamma\n"
    # The gate decision records who made it: the owner's CLI, both ways.
    resolved = dict((r[0], r[2]) for r in there)["resolve"]
    assert resolved["gate"]["decided_by"] == "owner-cli"


def test_the_reply_streams_from_its_first_delta(
    served: tuple[Cli, str],
) -> None:
    cli, sid = served
    words = " ".join(f"w{i}" for i in range(12))
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(cli.state)),
            *("--codex-bin", cli.codex_bin, "chat", "send", sid),
            f"mock:slow=0.25 mock:text={words}",
        ],
        env={**cli.env, "LOOPX_CHAT_CODEX_HOME": str(cli.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    first = os.read(proc.stdout.fileno(), 2)  # unbuffered: communicate() reads the rest
    still_running = proc.poll() is None
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert first == b"w0" and still_running  # the first words arrived while the turn ran
    assert (first + rest).decode() == words + "\n"
    assert SKIP_NOTE.encode() not in err


def test_no_thread_busy_when_the_service_holds_the_thread_warm(
    served: tuple[Cli, str],
) -> None:
    cli, sid = served
    # The service holds the thread warm now: a second owner of it is refused ...
    forced = cli("--direct", "chat", "send", sid, "--json", "mock:text=here")
    assert forced.exit_code == 1 and json.loads(forced.stdout)["error_code"] == "thread_busy"
    # ... and the CLI, which sends through the service, is not.
    for n in range(3):
        sent = cli("chat", "send", sid, "--json", f"mock:text=again {n}")
        assert sent.exit_code == 0, sent.output
        assert json.loads(sent.stdout)["turn"]["status"] == "completed"


def test_a_delegated_send_loads_no_controller_no_state_layer_no_filelock(
    served: tuple[Cli, str],
) -> None:
    cli, sid = served
    args = ["--state-dir", str(cli.state), "chat", "send", sid, "--json", "mock:text=probe"]
    env = {**cli.env, "LOOPX_CHAT_CODEX_HOME": str(cli.home)}
    done, code, loaded = probe_modules(args, env)
    assert code in (None, 0), done.stderr
    assert json.loads(done.stdout)["turn"]["status"] == "completed"
    assert "loopx_chat.service.client" in loaded  # the probe sees the delegated path
    heavy = (
        "filelock",
        "loopx_chat.state",
        "loopx_chat.controller",
        "loopx_chat.codex",
        "loopx_chat.goals",
        "loopx_chat.service.app",
        "loopx_chat.service.server",
        "http.server",
        "loopx_chat.cli.records_cmds",
        "loopx_chat.cli.goal_cmds",
        "http.client",
        "email",
        "ssl",
        "psutil",
        "tomllib",
        "_hashlib",
    )
    # Of the state layer it needs where the state dir is (a path rule), `service.json`
    # (`service_runtime`) and the owner's socket (`owner_socket`), standard library only.
    allowed = {
        "loopx_chat.state",
        "loopx_chat.state.location",
        "loopx_chat.state.service_runtime",
        "loopx_chat.state.owner_socket",
    }
    # and of the codex adapter only the turn defaults the `chat` options show (no imports)
    allowed |= {"loopx_chat.codex", "loopx_chat.codex.turn_defaults"}
    assert [m for m in loaded if m.startswith(heavy) and m not in allowed] == []


# -- fallback: the CLI runs the turn itself --------------------------------------------------


def _runs_here_with_one_note(cli: Cli, mock: MockResponsesServer, why: str) -> float:
    before = len(mock.requests)
    started = time.monotonic()
    result = cli("chat", "new", "--goal", "g", "--json", "mock:text=here")
    took = time.monotonic() - started
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["turn"]["status"] == "completed"
    notes = [line for line in result.stderr.splitlines() if SKIP_NOTE in line]
    assert len(notes) == 1 and why in notes[0], result.stderr
    assert len(mock.requests) > before  # the turn ran (here: no service did it)
    return took


def _fake_runtime(state: Path, home: Path, port: int, pid: int | None = None) -> None:
    ensure_secret(state)
    runtime = runtime_for_this_process(port, __version__, home, "2026-12-01T00:00:00Z")
    if pid is not None:
        runtime = ServiceRuntime(
            port=port,
            pid=pid,
            started_at=runtime.started_at,
            version=__version__,
            codex_home_id=home_identity(home),
            process_started=None,
        )
    write_runtime(state, runtime)


def test_a_service_that_is_down_is_skipped(
    cli_for: Callable[[str], Cli], mock: MockResponsesServer
) -> None:
    cli = cli_for("state")
    _fake_runtime(cli.state, cli.home, _free_port())  # our pid, no socket in the state dir
    _runs_here_with_one_note(cli, mock, "nothing listens on its socket")


@contextmanager
def _hung_socket(state: Path) -> Iterator[list[socket.socket]]:
    """The owner's socket of `state`, accepting connections and never answering: the
    connections it took."""
    from loopx_chat.state import owner_socket

    server = owner_socket.listen(state)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    worker = threading.Thread(target=accept, daemon=True)
    worker.start()
    try:
        yield held
    finally:
        stop.set()
        worker.join()
        for conn in held:
            conn.close()
        server.close()


def test_a_hung_service_is_skipped_after_one_second(
    cli_for: Callable[[str], Cli], mock: MockResponsesServer
) -> None:
    cli = cli_for("state")
    _fake_runtime(cli.state, cli.home, _free_port())
    with _hung_socket(cli.state):
        _hung_service_is_skipped(cli, mock)


def _hung_service_is_skipped(cli: Cli, mock: MockResponsesServer) -> None:
    _runs_here_with_one_note(cli, mock, "did not answer within 1 s")
    # How long the wait is: a command that fails at once here takes about one second more.
    unknown = ["gate", "resolve", "gate-nope", "--goal", "g", "--decision", "approve", "--json"]
    started = time.monotonic()
    forced = cli("--direct", *unknown)
    plain = time.monotonic() - started
    started = time.monotonic()
    probed = cli(*unknown)
    took = time.monotonic() - started
    assert forced.exit_code == probed.exit_code == 1
    assert json.loads(probed.stdout) == json.loads(forced.stdout)
    assert 0.95 <= took - plain < 2.0, (took, plain)  # the 1 s probe, and no more


def test_a_stale_service_file_is_skipped(
    cli_for: Callable[[str], Cli], mock: MockResponsesServer
) -> None:
    cli = cli_for("state")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _fake_runtime(cli.state, cli.home, _free_port(), pid=gone.pid)
    _runs_here_with_one_note(cli, mock, "nothing listens on its socket")


def test_another_homes_service_is_not_used(
    tmp_path: Path,
    cli_for: Callable[[str], Cli],
    start_service: Callable[..., Any],
    mock: MockResponsesServer,
) -> None:
    cli = cli_for("state")
    other_home = tmp_path / "other-home"
    write_offline_codex_config(other_home, mock.base_url)
    other = start_service(cli.state, other_home.resolve(), cli.env, cli.codex_bin)
    _runs_here_with_one_note(cli, mock, "serves another Codex home")
    assert [line for line in other.served() if " POST " in line] == []
    # and a gate decision is not sent there either
    gate = cli("gate", "request", "--goal", "g", "--question", "ok?", "--json")
    gate_id = json.loads(gate.stdout)["gate"]["gate_id"]
    resolved = cli("gate", "resolve", gate_id, "--goal", "g", "--decision", "approve", "--json")
    assert resolved.exit_code == 0 and SKIP_NOTE in resolved.stderr
    assert [line for line in other.served() if " POST " in line] == []


def test_direct_forces_the_direct_path_silently(
    cli_for: Callable[[str], Cli], start_service: Callable[..., Any], mock: MockResponsesServer
) -> None:
    cli = cli_for("state")
    service = start_service(cli.state, cli.home, cli.env, cli.codex_bin)
    result = cli("--direct", "chat", "new", "--goal", "g", "--json", "mock:text=here")
    assert result.exit_code == 0, result.output
    assert SKIP_NOTE not in result.stderr
    assert [line for line in service.served() if " POST " in line] == []
    assert os.path.exists(cli.state / RUNTIME_FILE)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "ctrl-c"])
def test_ending_a_delegated_send_interrupts_the_turn_in_the_service(
    served: tuple[Cli, str], signum: int
) -> None:
    from loopx_chat.state.session_store import SessionStore

    cli, sid = served
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(cli.state)),
            *("--codex-bin", cli.codex_bin, "chat", "send", sid, "mock:hang"),
        ],
        env={**cli.env, "LOOPX_CHAT_CODEX_HOME": str(cli.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()  # "[loopx-chat] turn ... running": codex has the turn
    assert b"running" in line, line
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and b"Traceback" not in err
    store = SessionStore(cli.state)
    deadline = time.monotonic() + 30
    while store.load(sid).active_turn_id and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.load(sid).active_turn_id is None
    turns = store.list_turns(sid)
    assert turns[-1].status == "interrupted"
    # and the thread is still the service's to use: the next send runs there
    again = cli("chat", "send", sid, "--json", "mock:text=after")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["turn"]["status"] == "completed"


def test_a_message_over_one_mib_goes_through_the_service(
    tmp_path: Path,
    cli_for: Callable[[str], Cli],
    start_service: Callable[..., Any],
    mock: MockResponsesServer,
) -> None:
    """Issue 34, case 5: every message the CLI takes goes through the running service."""
    from loopx_chat.codex.turn_defaults import MESSAGE_LIMIT_BYTES
    from loopx_chat.service.app import MAX_BODY, TURN_BODY_MAX
    from loopx_chat.service.client import BODY_LIMIT, turn_body

    assert BODY_LIMIT == TURN_BODY_MAX > MAX_BODY
    # The worst message the CLI takes (every byte escaped in JSON), with every option, fits.
    options = {"sandbox": "workspace-write", "approval": "on-request", "plan": False,
               "decision_timeout": 1e9, "idle_timeout": 1e9, "turn_timeout": 1e9,
               "first_output_timeout": 1e9}  # fmt: skip
    assert len(turn_body("\x01" * MESSAGE_LIMIT_BYTES, "x" * 64, options)) <= BODY_LIMIT
    cli = cli_for("state")
    service = start_service(cli.state, cli.home, cli.env, cli.codex_bin)
    big = tmp_path / "big.txt"
    # 1.5 MiB of UTF-8 (codex itself takes at most 2**20 characters of input).
    big.write_text("mock:text=big one\n" + "é" * (3 << 18))
    result = cli("chat", "new", "--goal", "g", "--json", "--file", str(big))
    assert result.exit_code == 0, result.output
    assert SKIP_NOTE not in result.stderr
    assert json.loads(result.stdout)["turn"]["status"] == "completed"
    turns = wait_value(lambda: _turn_posts(service), what="the turn's request in the log")
    assert len(turns) == 1 and " 200 " in turns[0], turns
    # The model got the whole message.
    assert any(json.dumps(r, ensure_ascii=False).count("é") >= 3 << 18 for r in mock.requests)


def _turn_posts(service: Any) -> list[str]:
    """The turn requests the service logged (a streamed one once its stream has ended)."""
    return [line for line in service.served() if " POST " in line and "/turns " in line]


def _work_session(cli: Cli, work: Path) -> str:
    work.mkdir(parents=True, exist_ok=True)
    opened = cli("chat", "new", "--goal", "g", "--cwd", str(work), "--json", "mock:text=ok")
    assert opened.exit_code == 0, opened.output
    assert SKIP_NOTE not in opened.stderr
    return str(json.loads(opened.stdout)["session_id"])


def test_a_turn_with_its_own_sandbox_and_timeouts_goes_through_the_service(
    tmp_path: Path,
    cli_for: Callable[[str], Cli],
    start_service: Callable[..., Any],
    mock: MockResponsesServer,
) -> None:
    """Issue 34, case 5: `--sandbox` and the timeouts go with the turn to the service, which
    runs it with them (and its next turn with its own settings again)."""
    cli = cli_for("state")
    service = start_service(cli.state, cli.home, cli.env, cli.codex_bin)
    work = tmp_path / "work"
    sid = _work_session(cli, work)
    # The service's own sandbox (read-only): the command may not write.
    denied = cli("chat", "send", sid, "--json", f"mock:shell=touch {work}/before")
    assert denied.exit_code == 0, denied.output
    assert not (work / "before").exists()
    wrote = cli("chat", "--sandbox", "workspace-write", "--idle-timeout", "300",
                "--turn-timeout", "600", "send", sid, "--json",
                f"mock:shell=touch {work}/written")  # fmt: skip
    assert wrote.exit_code == 0, wrote.output
    assert SKIP_NOTE not in wrote.stderr and "thread_busy" not in wrote.output
    assert json.loads(wrote.stdout)["turn"]["status"] == "completed"
    assert (work / "written").exists()
    # The next turn without the flag runs read-only again.
    after = cli("chat", "send", sid, "--json", f"mock:shell=touch {work}/after")
    assert after.exit_code == 0, after.output
    assert not (work / "after").exists()
    # A turn timeout given stops the turn in the service.
    stopped = cli("chat", "--turn-timeout", "1", "send", sid, "--json", "mock:hang")
    assert stopped.exit_code == 1, stopped.output
    assert SKIP_NOTE not in stopped.stderr
    doc = json.loads(stopped.stdout)
    assert doc["turn"]["status"] == "interrupted" and doc["error_code"] == "hard_timeout"
    # So does a first-output timeout given (issue 36a's), with the turn's other options.
    silent = cli("chat", "--first-output-timeout", "2", "--idle-timeout", "300", "send", sid,
                 "--json", "mock:hang")  # fmt: skip
    assert silent.exit_code == 1, silent.output
    assert SKIP_NOTE not in silent.stderr
    assert json.loads(silent.stdout)["error_code"] == "first_output_timeout"
    # Every turn, the first one's included, ran in the service.
    wait_value(lambda: len(_turn_posts(service)) == 6, what="six turns in the service's log")


def test_an_approval_asked_in_a_delegated_turn_is_answered_through_the_service(
    tmp_path: Path,
    cli_for: Callable[[str], Cli],
    start_service: Callable[..., Any],
    mock: MockResponsesServer,
) -> None:
    """Issue 34, case 5: `chat send --approval untrusted` while `serve` runs: the turn runs
    in the service (no note, no `thread_busy`), Codex's question is a host gate, and the
    owner's `gate resolve` answers it; the approved command runs and the turn completes."""
    from loopx_chat.goals.gate_store import GateStore

    cli = cli_for("state")
    service = start_service(cli.state, cli.home, cli.env, cli.codex_bin)
    work = tmp_path / "work"
    sid = _work_session(cli, work)
    send = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(cli.state)),
            *("--codex-bin", cli.codex_bin, "chat", "--sandbox", "workspace-write", "send", sid),
            *("--approval", "untrusted", "--json", f"mock:shell=touch {work}/approved"),
        ],
        env={**cli.env, "LOOPX_CHAT_CODEX_HOME": str(cli.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        gate = wait_value(
            lambda: next(
                (
                    g
                    for g in GateStore(cli.state).gates("g")
                    if g.host and g.status == "pending" and g.host.get("state") == "live"
                ),
                None,
            ),
            timeout=120,
            what="the host gate of the approval",
        )
        assert gate.question == "Codex asks to run `touch` (1 argument)"
        assert not (work / "approved").exists()
        done = cli("gate", "resolve", gate.gate_id, "--goal", "g", "--decision", "approve")
        assert done.exit_code == 0, done.output
        out, err = send.communicate(timeout=120)
    finally:
        if send.poll() is None:
            send.kill()
            send.communicate()
    assert send.returncode == 0, err
    assert SKIP_NOTE not in err and "thread_busy" not in out + err
    assert json.loads(out)["turn"]["status"] == "completed"
    assert (work / "approved").exists()
    decided = GateStore(cli.state).gate("g", gate.gate_id)
    assert decided.status == "approved" and decided.host is not None
    assert decided.host["state"] == "answered"
    wait_value(lambda: [t for t in _turn_posts(service) if sid in t], what="the turn in the log")


def test_a_busy_service_lets_the_command_run_here(
    cli_for: Callable[[str], Cli], start_service: Callable[..., Any], mock: MockResponsesServer
) -> None:
    cli = cli_for("state")
    start_service(cli.state, cli.home, cli.env, cli.codex_bin, "--max-warm", "1")
    held = cli("chat", "new", "--goal", "g", "--json", "mock:text=ok")
    held_sid = json.loads(held.stdout)["session_id"]
    hang = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(cli.state)),
            *("--codex-bin", cli.codex_bin, "chat", "send", held_sid, "mock:hang"),
        ],
        env={**cli.env, "LOOPX_CHAT_CODEX_HOME": str(cli.home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert hang.stderr is not None and b"running" in hang.stderr.readline()
        # The service's one app-server is running that turn: a new session cannot get one.
        result = cli("chat", "new", "--goal", "g2", "--json", "mock:text=here")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["turn"]["status"] == "completed"
        notes = [line for line in result.stderr.splitlines() if SKIP_NOTE in line]
        assert len(notes) == 1 and "busy; running here" in notes[0], result.stderr
    finally:
        hang.terminate()
        hang.communicate(timeout=30)


def test_a_service_that_dribbles_its_answer_is_skipped_after_one_second(
    tmp_path: Path, bound_home: Path
) -> None:
    """One byte every 0.2 s never lets a read time out; the probe's second is for it all."""
    from loopx_chat.service.client import Skipped, find_service
    from loopx_chat.state import owner_socket

    state = tmp_path / "state"
    _fake_runtime(state, bound_home, _free_port())
    server = owner_socket.listen(state)
    stop = threading.Event()

    def dribble() -> None:
        conn, _ = server.accept()
        with conn:
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"x" * 200:
                if stop.wait(0.2):
                    return
                conn.sendall(bytes([byte]))

    worker = threading.Thread(target=dribble, daemon=True)
    worker.start()
    started = time.monotonic()
    found = find_service(state, bound_home)
    took = time.monotonic() - started
    stop.set()
    worker.join()
    server.close()
    assert isinstance(found, Skipped) and "did not answer within 1 s" in found.note
    assert 0.95 <= took < 1.5, took

"""`AppServerProcess` on real pipes: how `close` ends a process (stdin first, then SIGTERM,
then SIGKILL), and what it does with what a peer writes.

These are faults the real app-server cannot show on demand (it always exits when its stdin
closes, and it never writes a malformed line), so small programs stand in for it. For `close`,
what each one does on stdin's end and on SIGTERM is written into a file, and the file is the
oracle: no timing is asserted. For the wire, a Python peer echoes every line it reads back as
an `echo` notification, so what we wrote is observable, and it can answer in shapes a test
names. What codex itself says is tested on the scripted host and the real binary.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

import psutil
import pytest

from loopx_chat.codex.app_server import STDERR_LOG_CAP_BYTES, AppServerProcess
from loopx_chat.codex.host_connection import ProcessGone, RpcError, ServerRequestPolicy
from loopx_chat.errors import CodexError


def _program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "server.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _spawn(tmp_path: Path, program: Path, **env: str) -> AppServerProcess:
    return AppServerProcess.spawn(
        executable=program,
        codex_home=tmp_path,
        work_dir=tmp_path,
        environ={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        stderr_log=tmp_path / "stderr.log",
    )


def test_a_server_that_exits_on_end_of_stdin_is_never_signalled(tmp_path: Path) -> None:
    log = tmp_path / "events"
    program = _program(
        tmp_path, f"trap 'echo term >> {log}; exit 3' TERM\ncat > /dev/null\necho eof >> {log}\n"
    )
    proc = _spawn(tmp_path, program)
    assert proc.close(grace=5.0) == 0
    assert log.read_text() == "eof\n"


@pytest.mark.parametrize(
    ("on_term", "closed_with"),
    [
        ("exit 3", 3),  # it honours SIGTERM
        (":", -signal.SIGKILL),  # it ignores SIGTERM too: SIGKILL ends it
    ],
)
def test_a_server_that_ignores_end_of_stdin_gets_sigterm_then_sigkill(
    tmp_path: Path, on_term: str, closed_with: int
) -> None:
    log = tmp_path / "events"
    # `cat` returns at end of stdin; the loop keeps the program running after it.
    program = _program(
        tmp_path,
        f"trap 'echo term >> {log}; {on_term}' TERM\n"
        f"cat > /dev/null\necho eof >> {log}\nwhile :; do sleep 0.05; done\n",
    )
    proc = _spawn(tmp_path, program)
    assert proc.close(grace=0.5) == closed_with
    assert log.read_text() == "eof\nterm\n"


def test_a_wrapper_that_exited_is_not_waited_out_while_its_child_holds_stdout(
    tmp_path: Path,
) -> None:
    """The wrapper exits at end of stdin, but a child it left keeps the stdout pipe open, so
    stdout never ends: the exit must still be seen, and the child ended with the group."""
    log = tmp_path / "events"
    pid_file = tmp_path / "child.pid"
    program = _program(
        tmp_path,
        f'sh -c \'trap "echo child-term >> {log}; exit 0" TERM; echo $$ > {pid_file}; '
        f"while :; do sleep 0.05; done' < /dev/null &\n"
        f"while [ ! -s {pid_file} ]; do sleep 0.01; done\n"
        f"cat > /dev/null\necho eof >> {log}\n",
    )
    proc = _spawn(tmp_path, program)
    child = _read_pid(pid_file)
    assert proc.close(grace=30.0) == 0
    # Exited by itself: no SIGTERM was sent (the child would have written it down), and the
    # final SIGKILL of the group ended the child that still held stdout.
    assert log.read_text() == "eof\n"
    assert _ends(child)


def _read_pid(path: Path) -> int:
    for _ in range(1000):
        text = path.read_text().strip() if path.exists() else ""
        if text.endswith("\n") or text.isdigit():
            return int(text)
        time.sleep(0.01)
    raise AssertionError("the wrapper's child never started")


def _ends(pid: int) -> bool:
    """Gone or a zombie (nobody may reap an orphan in a container), within a few seconds."""
    for _ in range(500):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.01)
    return False


PEER = r"""
import json, os, sys, time
mode = os.environ["PEER_MODE"]
out = sys.stdout
def send(message):
    out.write(json.dumps(message) + "\n"); out.flush()
if mode == "stderr_flood":
    sys.stderr.write("e" * (int(os.environ["PEER_BYTES"]))); sys.stderr.flush()
if mode == "exit":
    sys.exit(3)
if mode == "deaf":
    os.close(0)
    time.sleep(30)
if mode == "server_request":
    send({"id": 41, "method": "item/tool/requestUserInput", "params": {}})
    send({"id": 42, "method": "item/fileChange/requestApproval", "params": {}})
    send({"id": 43, "method": "execCommandApproval", "params": {}})
for line in sys.stdin:
    message = json.loads(line)
    send({"method": "echo", "params": {"got": message}})
    if "method" not in message or "id" not in message or mode == "silent":
        continue
    if mode == "odd_answers":
        send({"id": [message["id"]], "result": {}})  # an id that is not ours: skipped
        send({"result": {}})  # neither an id nor a method: skipped
        send([1, 2])  # JSON, not an object: skipped
        answer = {"error": "plain"} if message["method"] == "fail" else {"result": [1]}
        send({"id": message["id"], **answer})
"""


def _peer(tmp_path: Path, mode: str, **env: str) -> AppServerProcess:
    peer = tmp_path / "peer.py"
    peer.write_text(PEER)
    program = _program(tmp_path, f'exec "{sys.executable}" "{peer}"\n')
    return _spawn(tmp_path, program, PEER_MODE=mode, **env)


def _echoes(proc: AppServerProcess, count: int) -> list[dict[str, object]]:
    got = []
    while len(got) < count:
        note = proc.next_notification(timeout=10)
        assert note is not None, got
        if note.method == "echo":
            got.append(note.params["got"])
    return got


def test_answers_that_are_not_ours_or_not_objects_are_skipped_and_counted(tmp_path: Path) -> None:
    proc = _peer(tmp_path, "odd_answers")
    try:
        assert proc.request("ok", {}, timeout=10) == {}  # a result that is not an object
        with pytest.raises(RpcError) as failed:
            proc.request("fail", {"x": 1}, timeout=10)
        assert (failed.value.method, failed.value.message) == ("fail", "plain")
        sent = _echoes(proc, 2)
        assert [m["method"] for m in sent] == ["ok", "fail"]
        assert sent[1]["params"] == {"x": 1} and sent[0]["id"] != sent[1]["id"]
    finally:
        proc.close(1)
    log = (tmp_path / "stderr.log").read_text()
    assert log.count("[loopx-chat] skipped ") == 6
    assert "whose id is not one of our integer ids" in log
    assert "neither a known id nor a method" in log
    assert "[1, 2]" not in log  # sizes and reasons only, never the line


def test_server_requests_are_answered_by_the_policy_on_the_reader_thread(tmp_path: Path) -> None:
    proc = _peer(tmp_path, "server_request")
    try:
        proc.notify("initialized")
        replies = _echoes(proc, 4)
    finally:
        proc.close(1)
    assert {"method": "initialized"} in replies  # a notification carries no id or params
    answers = {r["id"]: r for r in replies if "id" in r}
    assert answers[41]["error"]["code"] == -32601  # a question nobody can answer here
    assert answers[42]["result"] == {"decision": "decline"}
    assert answers[43]["result"] == {"decision": "denied"}
    assert proc.stats.server_requests == 3


def test_the_policy_answers_each_kind_of_server_request() -> None:
    accept = ServerRequestPolicy(approval_decision="accept")
    assert accept.answer("item/commandExecution/requestApproval") == ({"decision": "accept"}, None)
    assert accept.answer("applyPatchApproval") == ({"decision": "denied"}, None)
    # An MCP server's question nobody holds is declined in the schema's own words.
    result, error = ServerRequestPolicy().answer("mcpServer/elicitation/request")
    assert result == {"action": "decline"} and error is None
    result, error = ServerRequestPolicy().answer("item/tool/requestUserInput")
    assert result is None and error is not None and "does not answer" in error["message"]


def test_a_request_that_is_never_answered_times_out_and_leaves_no_waiter(tmp_path: Path) -> None:
    proc = _peer(tmp_path, "silent")
    try:
        with pytest.raises(TimeoutError):
            proc.request("thread/read", {}, timeout=0.3)
        assert proc._pending == {}
        assert proc.alive
    finally:
        proc.close(1)
    assert not proc.alive


def test_a_routed_process_puts_its_end_in_the_inbox_and_gives_it_back(tmp_path: Path) -> None:
    """A goal run's inbox gets codex's notifications and its end (None) while routed; routed
    back, the connection's own queue has them again, the end still the end, and what the
    run's inbox held of its own stays there."""
    import queue

    proc = _peer(tmp_path, "exit")
    inbox: queue.Queue[object] = queue.Queue()
    inbox.put("the run's own")
    proc.route(inbox)
    assert proc.wait_exit(10) == 3
    proc._reader.join(10)  # the reader put the end marker where the notifications go
    assert list(inbox.queue)[-1] is None
    proc.route(None)
    assert list(inbox.queue) == ["the run's own"]
    with pytest.raises(ProcessGone):
        proc.next_notification(timeout=10)
    proc.close(1)


def test_after_the_process_exits_every_call_says_it_is_gone(tmp_path: Path) -> None:
    proc = _peer(tmp_path, "exit")
    assert proc.wait_exit(10) == 3
    with pytest.raises(ProcessGone):
        proc.next_notification(timeout=10)
    with pytest.raises(ProcessGone):
        proc.next_notification(timeout=0)  # the end stays the end
    with pytest.raises(ProcessGone):
        proc.request("initialize", {}, timeout=1)
    assert not proc.alive
    assert proc.close(1) == 3


def test_a_peer_that_closed_its_stdin_makes_a_notify_fail_as_gone(tmp_path: Path) -> None:
    proc = _peer(tmp_path, "deaf")
    try:
        with pytest.raises(ProcessGone):
            for _ in range(200):  # the first writes may still land in the pipe's buffer
                proc.notify("initialized", {"pad": "x" * 4096})
    finally:
        proc.close(1)


def test_stderr_past_the_cap_is_counted_not_kept(tmp_path: Path) -> None:
    over = 4096
    proc = _peer(tmp_path, "stderr_flood", PEER_BYTES=str(STDERR_LOG_CAP_BYTES + over))
    proc.close(2)
    log = (tmp_path / "stderr.log").read_bytes()
    assert log.startswith(b"e" * 1000)
    assert log.endswith(f"[loopx-chat] {over} bytes over cap dropped\n".encode())
    assert len(log) < STDERR_LOG_CAP_BYTES + 100


def test_an_executable_that_cannot_start_is_a_start_failure_with_a_gate(tmp_path: Path) -> None:
    not_executable = tmp_path / "codex"
    not_executable.write_text(json.dumps({"not": "a program"}))
    with pytest.raises(CodexError) as failed:
        AppServerProcess.spawn(
            executable=not_executable,
            codex_home=tmp_path,
            work_dir=tmp_path,
            environ={},
            stderr_log=tmp_path / "stderr.log",
        )
    assert failed.value.error_code == "app_server_start_failed"
    assert failed.value.remedy is not None and "could not start" in failed.value.remedy.summary

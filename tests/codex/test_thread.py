"""codex/thread.py through the seam: `CodexThread` and `ThreadReader` on the scripted host.

Every message the host sends is one the pinned codex sent in a recording; the faults are
truncations, closures and delays of those recordings (tests/helpers/fakes/scripted_host.py). What
needs a real process (its pipes, signals, exit) is tested on fake_codex.py and the real codex.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from loopx_chat.codex import thread as thread_module
from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.codex.host_connection import ConnectionFactory, HostConnection
from loopx_chat.codex.thread import CodexThread, HostLaunch, ThreadReader, Timeouts
from loopx_chat.errors import CodexError
from loopx_chat.state.session_records import TokenCounts
from tests.helpers.fakes.replay import (
    ALREADY_INITIALIZED,
    Answer,
    load,
    recorded_reply,
    recorded_turn_tokens,
)
from tests.helpers.fakes.scripted_host import (
    CloseAt,
    Script,
    ScriptedCodex,
    ScriptedHost,
    recorded_exit_code,
    scripted_launch,
)

QUICK = Timeouts(startup=2, request=2, idle=0.4, hard=30, close_grace=1, interrupt_settle=1)


def _launch(tmp_path: Path, codex: ConnectionFactory, timeouts: Timeouts = QUICK) -> HostLaunch:
    launch: HostLaunch = scripted_launch(tmp_path, codex, **asdict(timeouts))  # type: ignore[arg-type]
    return launch


def _open(tmp_path: Path, script: Script | None = None, **timeouts: float) -> CodexThread:
    codex = ScriptedCodex(script)
    return CodexThread.open(
        _launch(tmp_path, codex, replace(QUICK, **timeouts)), resume_thread_id=None
    )


@pytest.mark.parametrize("connection", [AppServerProcess, ScriptedHost])
def test_the_real_app_server_and_the_scripted_host_have_the_seams_signatures(
    connection: type,
) -> None:
    for name in ("request", "notify", "reply", "next_notification", "route", "close", "wait_exit"):
        wanted = inspect.signature(getattr(HostConnection, name))
        assert inspect.signature(getattr(connection, name)) == wanted, name
    assert isinstance(connection.alive, property)
    if connection is AppServerProcess:  # the scripted host's pid is a plain attribute
        assert isinstance(connection.pid, property)
    factory = inspect.signature(ConnectionFactory.__call__).parameters
    spawn = inspect.signature(AppServerProcess.spawn).parameters
    assert all(spawn[n].kind == p.kind for n, p in factory.items() if n != "self")
    assert HostLaunch.connect == AppServerProcess.spawn  # the default stays the subprocess


def test_a_turn_streams_the_recorded_reply_and_is_charged_the_recorded_tokens(
    tmp_path: Path,
) -> None:
    codex = ScriptedCodex()
    thread = CodexThread.open(_launch(tmp_path, codex), resume_thread_id=None)
    deltas: list[str] = []
    turn_id, steered = thread.start_turn("hello")
    outcome = thread.wait_turn(turn_id, on_delta=deltas.append)
    assert (outcome.status, outcome.error_code, steered) == ("completed", None, False)
    assert "".join(deltas) == recorded_reply()
    assert outcome.tokens.total_tokens == recorded_turn_tokens()
    assert thread.active_turn_id is None and thread.alive
    (host,) = codex.hosts
    # The handshake: initialize with the experimental API, then `initialized`, then the thread.
    sent = [m.get("method") for m in host.received]
    assert sent == ["initialize", "initialized", "thread/start", "turn/start"]
    assert host.received[0]["params"]["capabilities"] == {"experimentalApi": True}
    start = host.received[2]["params"]
    assert (start["sandbox"], start["approvalPolicy"]) == ("read-only", "never")
    thread.close()
    assert host.closed_by_client and not thread.alive


def test_a_resumed_turn_is_charged_only_the_growth_of_the_thread_total(tmp_path: Path) -> None:
    # resume.json: the resume reports the thread's total (an earlier turn), then one turn.
    codex = ScriptedCodex(Script.replaying("resume", "turn/start"))
    thread = CodexThread.open(_launch(tmp_path, codex), resume_thread_id="0" * 8)
    assert thread.thread_id == "0" * 8
    resume = codex.hosts[0].received[2]
    assert resume["method"] == "thread/resume"
    assert resume["params"]["excludeTurns"] is True and resume["params"]["sandbox"] == "read-only"
    turn_id, _ = thread.start_turn("again")
    outcome = thread.wait_turn(turn_id)
    totals = [
        e["message"]["params"]["tokenUsage"]["total"]["totalTokens"]
        for e in load("resume")
        if e["message"].get("method") == "thread/tokenUsage/updated"
    ]
    assert len(totals) == 2 and outcome.tokens.total_tokens == totals[1] - totals[0] > 0


def test_a_failed_turn_is_failed_with_its_code(tmp_path: Path) -> None:
    thread = _open(tmp_path, Script(answers={"turn/start": Answer("failed_turn", "turn/start")}))
    turn_id, _ = thread.start_turn("mock:fail")
    outcome = thread.wait_turn(turn_id)
    assert (outcome.status, outcome.error_code) == ("failed", "turn_failed")
    assert outcome.tokens == TokenCounts()  # codex reported no usage for it


def test_steering_the_active_turn_returns_the_same_turn(tmp_path: Path) -> None:
    thread = _open(tmp_path, Script(answers={"turn/start": Answer("steer", "turn/start")}))
    first, steered_first = thread.start_turn("mock:hang")
    second, steered = thread.start_turn("and also")
    assert (second, steered, steered_first) == (first, True, False)


@pytest.mark.parametrize(
    ("timeouts", "code"),
    [({"idle": 0.3}, "idle_timeout"), ({"idle": 30, "hard": 0.3}, "hard_timeout")],
)
def test_a_silent_turn_is_interrupted_at_its_timeout(
    tmp_path: Path, timeouts: dict[str, float], code: str
) -> None:
    script = Script(answers={"turn/start": Answer("steer", "turn/start")})
    codex = ScriptedCodex(script)
    thread = CodexThread.open(
        _launch(tmp_path, codex, replace(QUICK, **timeouts)), resume_thread_id=None
    )
    turn_id, _ = thread.start_turn("mock:hang")
    outcome = thread.wait_turn(turn_id)
    assert (outcome.status, outcome.error_code) == ("interrupted", code)
    assert codex.requests("turn/interrupt")[0]["params"] == {
        "threadId": thread.thread_id,
        "turnId": turn_id,
    }


def test_an_interrupt_asked_for_by_the_caller_has_no_error_code(tmp_path: Path) -> None:
    thread = _open(tmp_path, Script(answers={"turn/start": Answer("steer", "turn/start")}))
    turn_id, _ = thread.start_turn("mock:hang")
    outcome = thread.wait_turn(turn_id, should_interrupt=lambda: True)
    assert (outcome.status, outcome.error_code) == ("interrupted", None)


def test_an_interrupt_codex_never_confirms_ends_the_turn_at_the_settle_deadline(
    tmp_path: Path,
) -> None:
    script = Script(
        answers={"turn/start": Answer("steer", "turn/start")}, silent=frozenset({"turn/interrupt"})
    )
    thread = _open(tmp_path, script, idle=0.2, request=0.2, interrupt_settle=0.5)
    turn_id, _ = thread.start_turn("mock:hang")
    began = time.monotonic()
    outcome = thread.wait_turn(turn_id)
    assert (outcome.status, outcome.error_code) == ("interrupted", "idle_timeout")
    assert time.monotonic() - began < 5


def test_a_refused_interrupt_is_asked_again_until_abandoning_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_module, "ABANDON_RETRY_SEC", 0.3)
    codex = ScriptedCodex()
    thread = CodexThread.open(_launch(tmp_path, codex), resume_thread_id=None)
    turn_id, _ = thread.start_turn("hello")
    thread.wait_turn(turn_id)
    thread.active_turn_id = turn_id  # as if codex had started it again
    thread.abandon_turn(turn_id)  # codex answers "no active turn to interrupt" each time
    assert len(codex.requests("turn/interrupt")) > 1
    assert thread.active_turn_id is None


def test_stdout_closing_mid_turn_is_an_interrupted_turn_of_an_exited_app_server(
    tmp_path: Path,
) -> None:
    thread = _open(tmp_path, Script(close_at=CloseAt("turn/start", "item/agentMessage/delta")))
    deltas: list[str] = []
    turn_id, _ = thread.start_turn("hello")
    outcome = thread.wait_turn(turn_id, on_delta=deltas.append)
    assert (outcome.status, outcome.error_code) == ("interrupted", "app_server_exited")
    assert deltas and recorded_reply().startswith("".join(deltas)) and deltas != [recorded_reply()]
    assert thread.active_turn_id is None and not thread.alive


def test_stdout_closing_before_turn_start_is_answered_is_an_exited_app_server(
    tmp_path: Path,
) -> None:
    thread = _open(tmp_path, Script(close_at=CloseAt("turn/start")))
    with pytest.raises(CodexError) as gone:
        thread.start_turn("hello")
    assert gone.value.error_code == "app_server_exited"
    assert not thread.alive


def test_a_host_that_ends_before_answering_initialize_reports_its_exit(tmp_path: Path) -> None:
    script = Script(close_at=CloseAt("initialize"), exit_code=recorded_exit_code())
    codex = ScriptedCodex(script)
    with pytest.raises(CodexError) as gone:
        CodexThread.open(_launch(tmp_path, codex), resume_thread_id=None)
    assert gone.value.error_code == "app_server_exited"
    assert f"code {recorded_exit_code()}" in gone.value.message
    assert str(tmp_path / "stderr.log") in gone.value.message
    assert codex.hosts[0].closed_by_client


@pytest.mark.parametrize(
    ("script", "code"),
    [
        (Script(silent=frozenset({"initialize"})), "startup_timeout"),
        (Script(answers={"initialize": ALREADY_INITIALIZED}), "app_server_rejected"),
        (Script(reported_home="/somewhere/else"), "codex_home_host_mismatch"),
        (Script(silent=frozenset({"thread/start"})), "startup_timeout"),
        (
            Script(answers={"thread/start": Answer("errors", "thread/start", 1)}),
            "app_server_rejected",
        ),
        (Script.replaying("config_invalid", "initialize", "thread/start"), "codex_config_invalid"),
        (Script(close_at=CloseAt("thread/start")), "app_server_exited"),
    ],
)
def test_each_way_opening_fails_closes_the_host(tmp_path: Path, script: Script, code: str) -> None:
    codex = ScriptedCodex(script)
    with pytest.raises(CodexError) as failed:
        CodexThread.open(
            _launch(tmp_path, codex, replace(QUICK, startup=0.3, request=0.3)),
            resume_thread_id=None,
        )
    assert failed.value.error_code == code
    assert failed.value.remedy is not None
    assert [h.closed_by_client for h in codex.hosts] == [True]  # one host, closed; no retry


def test_the_work_done_while_codex_starts_runs_after_initialize_is_sent(tmp_path: Path) -> None:
    codex = ScriptedCodex(Script(delays={"initialize": 0.2}))
    seen: list[list[str]] = []

    def during() -> None:
        seen.append([m["method"] for m in codex.hosts[0].received])

    launch = replace(_launch(tmp_path, codex), while_starting=during)
    CodexThread.open(launch, resume_thread_id=None).close()
    assert seen == [["initialize"]]


def test_what_fails_while_codex_starts_ends_that_host(tmp_path: Path) -> None:
    codex = ScriptedCodex()

    def during() -> None:
        raise OSError("no room")

    launch = replace(_launch(tmp_path, codex), while_starting=during)
    with pytest.raises(OSError):
        CodexThread.open(launch, resume_thread_id=None)
    assert codex.hosts[0].closed_by_client


def test_history_is_rendered_from_the_recorded_thread_read(tmp_path: Path) -> None:
    codex = ScriptedCodex()
    reader = ThreadReader.open(_launch(tmp_path, codex))
    assert reader.thread_id is None
    turns = reader.read_history("0" * 8)
    reader.close()
    assert [m.get("method") for m in codex.hosts[0].received] == [
        "initialize",
        "initialized",
        "thread/read",
    ]
    assert turns and all(set(t) == {"turn_id", "status", "messages"} for t in turns)
    assert turns[-1]["messages"] == [
        {"role": "user", "text": "again"},  # what resume.json's turn was sent
        {"role": "agent", "text": recorded_reply("resume")},
    ]


def test_a_reader_request_names_the_thread_and_classifies_a_refusal(tmp_path: Path) -> None:
    codex = ScriptedCodex()
    reader = ThreadReader.open(_launch(tmp_path, codex))
    with pytest.raises(CodexError) as refused:
        reader.request("0" * 8, "no/such/method", {"x": 1})
    reader.close()
    assert refused.value.error_code == "app_server_rejected"
    assert "unknown variant" not in refused.value.message  # upstream text is not echoed
    assert codex.requests("no/such/method")[0]["params"] == {"threadId": "0" * 8, "x": 1}


def test_a_history_read_that_never_answers_is_a_request_timeout(tmp_path: Path) -> None:
    codex = ScriptedCodex(Script(silent=frozenset({"thread/read"})))
    reader = ThreadReader.open(_launch(tmp_path, codex, replace(QUICK, request=0.2)))
    with pytest.raises(CodexError) as timed_out:
        reader.read_history("0" * 8)
    reader.close()
    assert timed_out.value.error_code == "request_timeout"
    assert "thread/read" in timed_out.value.message


def test_server_requests_are_answered_by_the_policy_and_the_turn_goes_on(tmp_path: Path) -> None:
    codex = ScriptedCodex(Script(answers={"turn/start": Answer("approval", "turn/start")}))
    thread = CodexThread.open(_launch(tmp_path, codex), resume_thread_id=None)
    turn_id, _ = thread.start_turn("mock:shell=touch approval-probe")
    outcome = thread.wait_turn(turn_id)
    assert outcome.status == "completed"
    (decision,) = codex.hosts[0].decisions
    assert decision["result"] == {"decision": "decline"}


def test_a_turn_codex_said_is_over_is_never_interrupted(tmp_path: Path) -> None:
    """codex 0.160.0-0.168.0 never answer a `turn/interrupt` after the turn ended: none is
    sent for a turn whose `turn/completed` was read."""
    codex = ScriptedCodex(Script(silent=frozenset({"turn/interrupt"})))
    thread = CodexThread.open(_launch(tmp_path, codex), resume_thread_id=None)
    turn_id, _ = thread.start_turn("hello")
    assert thread.wait_turn(turn_id).status == "completed"
    thread.abandon_turn(turn_id)
    assert codex.requests("turn/interrupt") == []


def test_an_interrupt_waits_only_briefly_for_its_answer(tmp_path: Path) -> None:
    """An interrupt that races the turn's end may never be answered (before 0.169.0): it waits
    INTERRUPT_ANSWER_SEC, not the request timeout, and the turn's end is read as usual."""
    script = Script(
        answers={"turn/start": Answer("steer", "turn/start")}, silent=frozenset({"turn/interrupt"})
    )
    thread = _open(tmp_path, script, request=30, interrupt_settle=0.3)
    waits: list[tuple[str, float]] = []
    request = thread.proc.request

    def spy(method: str, params: object, timeout: float, **kw: object) -> object:
        waits.append((method, timeout))
        return request(method, params, min(timeout, 0.05), **kw)  # type: ignore[arg-type]

    thread.proc.request = spy  # type: ignore[method-assign]
    turn_id, _ = thread.start_turn("mock:hang")
    outcome = thread.wait_turn(turn_id, should_interrupt=lambda: True)
    assert outcome.status == "interrupted"
    assert ("turn/interrupt", thread_module.INTERRUPT_ANSWER_SEC) in waits
    assert ("turn/start", 30) in waits  # other requests keep the request timeout


def test_turn_start_names_a_setting_only_when_it_differs_from_what_codex_applies(
    tmp_path: Path,
) -> None:
    # Naming the approval policy or the collaboration mode in `turn/start` costs codex 2-3
    # ms before it answers (bench/bench_controller.py): codex keeps them for the thread's
    # later turns, so each goes when it changes, and the mode once after a load.
    codex = ScriptedCodex()
    thread = CodexThread.open(_launch(tmp_path, codex), resume_thread_id=None)
    assert thread.model  # the recorded thread/start reports one: Default mode is named

    def turn() -> dict[str, object]:
        turn_id, _ = thread.start_turn("hello")
        thread.wait_turn(turn_id)
        return codex.hosts[0].received[-1]["params"]

    first, second = turn(), turn()
    assert first["collaborationMode"]["mode"] == "default" and "approvalPolicy" not in first
    assert "collaborationMode" not in second and "approvalPolicy" not in second
    thread.options = replace(thread.options, approval_policy="untrusted", plan=True)
    third, fourth = turn(), turn()
    assert (third["approvalPolicy"], third["collaborationMode"]["mode"]) == ("untrusted", "plan")
    assert "collaborationMode" not in fourth and "approvalPolicy" not in fourth
    thread.options = replace(thread.options, approval_policy="never", plan=False)
    fifth = turn()
    assert (fifth["approvalPolicy"], fifth["collaborationMode"]["mode"]) == ("never", "default")
    assert all("sandboxPolicy" not in p for p in (first, second, third, fourth, fifth))
    thread.close()

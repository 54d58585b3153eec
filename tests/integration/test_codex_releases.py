"""What the codex under test does that differs across the tested range, and how loopx-chat
copes; run on the pinned codex by `make test` and on the oldest by `make test-oldest`.

Each expectation is derived from the version the binary reports (the `codex_version`
fixture), never from a version written in a test: the demo runs, and a `turn/interrupt` that
arrives after an interrupted turn ended is refused by 0.169.0 and later but never answered
before (seen on 0.160.0; after a completed turn every release refuses it at once), so
loopx-chat sends none for a turn it saw end and waits only briefly for any other."""

from __future__ import annotations

from pathlib import Path

from loopx_chat.codex import thread as thread_module
from loopx_chat.codex.compat import version_key
from loopx_chat.codex.thread import CodexThread
from tests.helpers.owner_cli import OwnerCli
from tests.helpers.real_codex import real_launch

# The first release that answers a late `turn/interrupt` (shared/reference/codex-versions.md).
ANSWERS_LATE_INTERRUPT = (0, 169, 0)


def test_the_demo_runs(tmp_path: Path, codex_bin: str, base_env: dict[str, str]) -> None:
    done = OwnerCli(tmp_path, tmp_path / "unused-home", base_env, codex_bin)("demo")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "The binding held" in done.stdout


def test_a_late_interrupt_is_not_sent_and_an_unanswered_one_is_not_waited_out(
    tmp_path: Path,
    codex_bin: str,
    codex_version: str,
    bound_home: Path,
    base_env: dict[str, str],
) -> None:
    launch = real_launch(codex_bin, bound_home, tmp_path, base_env, tmp_path / "stderr.log")
    thread = CodexThread.open(launch, resume_thread_id=None)
    try:
        turn_id, _ = thread.start_turn("mock:hang")
        assert thread.wait_turn(turn_id, should_interrupt=lambda: True).status == "interrupted"
        waits: list[float] = []
        request = thread.proc.request

        def spy(method: str, params: object, timeout: float, **kw: object) -> object:
            if method == "turn/interrupt":
                waits.append(timeout)
            return request(method, params, timeout, **kw)  # type: ignore[arg-type]

        thread.proc.request = spy  # type: ignore[method-assign]
        thread.abandon_turn(turn_id)
        assert waits == []  # codex said the turn is over: nothing is sent
        # Sent anyway (as when it races the turn's end): what this release answers.
        refused = not thread._send_interrupt(turn_id)
        key = version_key(codex_version)
        assert key is not None
        assert refused is (key >= ANSWERS_LATE_INTERRUPT)
        assert waits == [thread_module.INTERRUPT_ANSWER_SEC]
        # The thread is still usable: the next turn runs.
        turn_id, _ = thread.start_turn("again")
        assert thread.wait_turn(turn_id).status == "completed"
    finally:
        thread.close()

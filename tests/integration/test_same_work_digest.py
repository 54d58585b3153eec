"""Duplicate compute avoided, by message text: a busy refusal of the same text while that turn
runs is the same work, whatever its client_turn_id; different text is not. Real codex + mock:
one controller runs a turn that does not end before it is interrupted, another is refused the
thread."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from loopx_chat.controller.chat_controller import TurnResult
from loopx_chat.errors import CodexError
from loopx_chat.goals.metrics import compute_metrics
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.session_store import SessionStore
from tests.helpers.real_codex import make_controller
from tests.helpers.waiting import run_in_thread, wait_for

# A turn that keeps streaming (a word every half second for minutes) until it is interrupted:
# a silent `mock:hang` would be failed by codex's stream idle timeout (20 s) on a machine
# loaded enough that the other controller takes that long to start.
TEXT = "CANARY-same-work-4c2 mock:slow=0.5 mock:text=" + " ".join(["word"] * 600)


def test_same_text_while_it_runs_is_the_same_work(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    store = SessionStore(state)
    with make_controller(state, bound_home, base_env, codex_bin) as runner:
        sid = runner.open_session("g-dup", tmp_path).session_id
        thread, box = run_in_thread(lambda: runner.submit_turn(sid, TEXT, client_turn_id="a1"))
        wait_for(lambda: store.load(sid).active_turn_id is not None)
        running_id = store.load(sid).active_turn_id
        assert running_id is not None
        running = store.load_turn(sid, running_id)
        assert running.text_digest == hashlib.sha256(TEXT.encode()).hexdigest()
        turn_file = next(p for p in (state / "sessions").rglob("*.json") if running_id in p.name)
        assert b"CANARY" not in turn_file.read_bytes()  # the digest, never the text

        with make_controller(state, bound_home, base_env, codex_bin) as other:
            for text, client_id in ((TEXT, "b1"), (TEXT, None), ("something else", None)):
                with pytest.raises(CodexError) as info:
                    other.submit_turn(sid, text, client_turn_id=client_id)
                assert info.value.error_code == "thread_busy"
        runner.interrupt_turn(sid)
        thread.join(timeout=30)
    result = box.get("result")
    assert isinstance(result, TurnResult), box
    assert result.turn.status == "interrupted"
    assert store.load_turn(sid, running_id).text_digest is None  # dropped when the turn ended

    events = list(ControlLog(state).events())
    refusals = [
        (e["same_work"], e.get("same_by")) for e in events if e["kind"] == "thread_busy_refused"
    ]
    assert refusals == [(True, "text_digest"), (True, "text_digest"), (False, None)]
    doc = compute_metrics(events, "g-dup")["duplicate_compute_avoided"]
    assert (doc["thread_busy_refusals"], doc["same_text_refusals"]) == (2, 2)
    assert doc["other_work_refusals"] == 1
    assert (doc["numerator"], doc["denominator"]) == (2, 3)  # 2 refusals + 1 turn that ran
    assert not any(b"CANARY" in p.read_bytes() for p in state.rglob("*") if p.is_file())

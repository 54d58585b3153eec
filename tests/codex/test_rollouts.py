"""Host facts from Codex rollouts: real codex outcomes, no text or paths, incremental precision.

The first test drives the pinned real codex against the loopback mock; the rest write rollout
files by hand in codex's compact layout, so byte counts and edge cases are exact.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import stat
import subprocess
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopx_chat.codex.rollouts.host_facts as host_facts
import loopx_chat.codex.rollouts.index as rollouts_index
import loopx_chat.codex.rollouts.parse as rollouts_parse
import loopx_chat.codex.rollouts.scanner as rollouts_scanner
from loopx_chat.codex.rollouts import RolloutScanner, ScanResult
from loopx_chat.codex.rollouts.index import INDEX_SCHEMA
from loopx_chat.codex.rollouts.records import HostPosition
from loopx_chat.codex.thread import Timeouts
from loopx_chat.controller.chat_controller import ControllerConfig, TurnResult
from loopx_chat.errors import ERROR_CODES, StateError
from loopx_chat.state.session_store import SessionStore
from tests.helpers.real_codex import make_controller
from tests.helpers.row_size import own_bytes
from tests.helpers.waiting import run_in_thread, wait_for

# ---------------------------------------------------------------------------------------------
# Synthetic rollouts in codex's compact layout
# ---------------------------------------------------------------------------------------------

THREAD_A = "01a22654-8805-7283-882f-6664d5224a44"
THREAD_B = "01a22654-9999-7283-882f-6664d5224a44"


class Rollout:
    """Builds rollout lines the way codex 0.171 writes them: compact, timestamp first."""

    def __init__(self, thread_id: str, start: int = 0) -> None:
        self.thread_id = thread_id
        self.ordinal = start
        self.second = start

    def line(self, kind: str, payload: dict[str, Any], *, compact: bool = True) -> bytes:
        self.ordinal += 1
        self.second += 1
        record = {
            "timestamp": f"2026-11-29T08:{self.second // 60 % 60:02d}:{self.second % 60:02d}.000Z",
            "ordinal": self.ordinal,
            "type": kind,
            "payload": payload,
        }
        if compact:
            return json.dumps(record, separators=(",", ":")).encode() + b"\n"
        return json.dumps(record).encode() + b"\n"

    def meta(self, *, cwd: str = "/home/me/project", instructions: str = "be brief") -> bytes:
        return self.line(
            "session_meta",
            {
                "session_id": self.thread_id,
                "id": self.thread_id,
                "cwd": cwd,
                "base_instructions": {"text": instructions},
                "history_mode": "paginated",
            },
        )

    def started(self, turn: str) -> bytes:
        return self.line(
            "event_msg",
            {
                "type": "task_started",
                "turn_attribution": {"turn_id": turn, "root_turn_id": turn},
                "turn_id": turn,
                "started_at": 1795939403,
            },
        )

    def context(self, turn: str, model: str = "gpt-5", cwd: str = "/home/me/project") -> bytes:
        return self.line(
            "turn_context",
            {
                "turn_id": turn,
                "cwd": cwd,
                "model": model,
                "collaboration_mode": {"mode": "default", "settings": {"model": model}},
            },
        )

    def user(self, text: str) -> bytes:
        return self.line(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        )

    def agent(self, turn: str, text: str) -> bytes:
        return self.line(
            "event_msg",
            {
                "type": "item_completed",
                "turn_id": turn,
                "item": {"type": "AgentMessage", "content": [{"type": "Text", "text": text}]},
            },
        )

    def tool_output(self, text: str) -> bytes:
        return self.line(
            "response_item", {"type": "function_call_output", "call_id": "c1", "output": text}
        )

    def tokens(self, total: int) -> bytes:
        usage = {
            "input_tokens": total - 1,
            "cached_input_tokens": 0,
            "output_tokens": 1,
            "reasoning_output_tokens": 0,
            "total_tokens": total,
        }
        return self.line(
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": usage, "last_token_usage": usage},
            },
        )

    def usage_record(self, turn: str, total: int) -> bytes:
        usage = {"input_tokens": total, "output_tokens": 0, "total_tokens": total}
        return self.line(
            "token_usage_record",
            {"thread_id": self.thread_id, "turn_id": turn, "thread_token_usage": usage},
        )

    def complete(
        self, turn: str, *, error: Any = None, message: str | None = "done", at: int = 1795939404
    ) -> bytes:
        payload: dict[str, Any] = {
            "type": "task_complete",
            "root_turn_id": turn,
            "turn_id": turn,
            "last_agent_message": message,
            "started_at": 1795939403,
            "completed_at": at,
        }
        if error is not None:
            payload["error"] = error
        return self.line("event_msg", payload)

    def aborted(self, turn: str, at: int = 1795939405) -> bytes:
        return self.line(
            "event_msg",
            {"type": "turn_aborted", "turn_id": turn, "reason": "interrupted", "completed_at": at},
        )

    def turn(self, turn: str, outcome: str = "completed", total: int = 100) -> bytes:
        """One whole turn: start, context, text records, tokens and its ending."""
        body = self.started(turn) + self.context(turn) + self.user(f"question {turn}")
        body += self.agent(turn, f"answer {turn}") + self.tokens(total)
        if outcome == "completed":
            body += self.complete(turn)
        elif outcome == "failed":
            body += self.complete(
                turn,
                error={"message": "boom", "codex_error_info": "internal_server_error"},
                message=None,
            )
        elif outcome == "interrupted":
            body += self.aborted(turn)
        return body


def _rollout_path(home: Path, thread_id: str, folder: str = "sessions/2026/11/29") -> Path:
    path = home / folder / f"rollout-2026-11-29T08-03-23-{thread_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "codex-home"
    path.mkdir()
    return path


@pytest.fixture
def scanner(home: Path, tmp_path: Path) -> RolloutScanner:
    return RolloutScanner(home, tmp_path / "state" / "rollouts" / "index.json")


# ---------------------------------------------------------------------------------------------
# Real codex against the mock
# ---------------------------------------------------------------------------------------------


def _rollout_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("sessions/**/rollout-*.jsonl"))


def test_real_codex_turn_outcomes_without_text_or_paths(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    reply = f"CANARY-reply-{uuid.uuid4().hex}"
    state = tmp_path / "state"
    index = state / "rollout-index" / "index.json"
    scanner = RolloutScanner(bound_home, index)
    config = ControllerConfig(timeouts=Timeouts(idle=60, hard=120))
    with make_controller(state, bound_home, base_env, codex_bin, config) as c:
        a = c.open_session("g", tmp_path)
        b = c.open_session("g", tmp_path)
        done = c.submit_turn(a.session_id, f"{canary} first mock:text={reply}")
        c.submit_turn(b.session_id, f"{canary} other thread")
        first = scanner.scan()
        failed = c.submit_turn(a.session_id, f"{canary} mock:error=500")
        assert failed.turn.status == "failed"
        before = _rollout_bytes(bound_home)
        second = scanner.scan()

        store = SessionStore(state)
        thread, box = run_in_thread(lambda: c.submit_turn(a.session_id, "mock:hang"))
        wait_for(lambda: store.load(a.session_id).active_turn_id is not None)
        with make_controller(state, bound_home, base_env, codex_bin) as other:
            other.interrupt_turn(a.session_id)
        thread.join(timeout=30)
        interrupted = box.get("result")
        assert isinstance(interrupted, TurnResult), box
        # codex appends the turn's abort record after it answers the interrupt: scan until
        # the rollout has caught up (seen once in a clean-clone CI run: still "unfinished").
        thread_a = store.load(a.session_id).upstream_thread_id
        scans = []

        def caught_up() -> bool:
            scans.append(scanner.scan())
            facts = scans[-1].threads.get(thread_a or "")
            return bool(facts and facts.last_turn and facts.last_turn.outcome != "unfinished")

        wait_for(caught_up, timeout=10)
        third = scans[-1]

        thread, box = run_in_thread(lambda: c.submit_turn(a.session_id, "mock:hang"))
        wait_for(lambda: store.load(a.session_id).active_turn_id is not None)
        killed_turn = store.load(a.session_id).active_turn_id
        time.sleep(0.3)  # let codex record the turn's start before it dies
        os.kill(c.warm_pids()[a.session_id], signal.SIGKILL)
        thread.join(timeout=30)
        crashed = box.get("result")
        assert isinstance(crashed, TurnResult), box
        assert crashed.turn.turn_id == killed_turn
    final = scanner.scan()

    ta = store.load(a.session_id).upstream_thread_id
    tb = store.load(b.session_id).upstream_thread_id
    assert ta and tb and ta != tb

    # After the completed turn, then after the failed one (read incrementally).
    assert first.threads[ta].last_turn is not None
    assert first.threads[ta].last_turn.outcome == "completed"
    assert first.threads[ta].last_turn.turn_id == done.turn.upstream_turn_id
    assert isinstance(first.threads[ta].last_turn.completed_at, int)
    last = second.threads[ta].last_turn
    assert last is not None
    assert (last.turn_id, last.outcome, last.error_code) == (
        failed.turn.upstream_turn_id,
        "failed",
        "internal_server_error",
    )
    assert second.bytes_read == before - first.position.total_offset
    assert second.files_reread == 0
    last = third.threads[ta].last_turn
    assert last is not None
    assert (last.turn_id, last.outcome) == (interrupted.turn.upstream_turn_id, "interrupted")

    facts_a = final.threads[ta]
    assert facts_a.turns.to_dict() == {
        "started": 4,
        "completed": 1,
        "failed": 1,
        "interrupted": 1,
        "unfinished": 1,
    }
    assert facts_a.last_turn is not None
    assert (facts_a.last_turn.turn_id, facts_a.last_turn.outcome) == (
        crashed.turn.upstream_turn_id,
        "unfinished",
    )
    assert facts_a.models == ("mock-model",)
    assert facts_a.history_mode == "paginated"
    assert facts_a.archived is False
    assert facts_a.tokens is not None and facts_a.tokens.total_tokens > 0
    facts_b = final.threads[tb]
    assert facts_b.turns.to_dict() == {
        "started": 1,
        "completed": 1,
        "failed": 0,
        "interrupted": 0,
        "unfinished": 0,
    }
    assert final.position.turns_started == {ta: 4, tb: 1}
    assert {
        t
        for t, n in final.position.turns_started.items()
        if n > first.position.turns_started.get(t, -1)
    } == {ta}
    assert final.corrupt_lines == 0
    assert final.position.total_offset == _rollout_bytes(bound_home)

    # The rollouts do hold the canaries and the paths; nothing we return or store does.
    raw = b"".join(p.read_bytes() for p in bound_home.glob("sessions/**/rollout-*.jsonl"))
    assert canary.encode() in raw and reply.encode() in raw and str(tmp_path).encode() in raw
    for result in (first, second, third, final):
        text = json.dumps(result.to_dict())
        assert canary not in text and reply not in text
        assert str(tmp_path) not in text and str(bound_home) not in text
    index_text = index.read_text()
    assert canary not in index_text and reply not in index_text
    assert str(tmp_path / "state") not in index_text


# ---------------------------------------------------------------------------------------------
# Incremental precision
# ---------------------------------------------------------------------------------------------


def test_appending_one_turn_reads_exactly_the_appended_bytes(
    home: Path, scanner: RolloutScanner
) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1"))
    first = scanner.scan()
    assert first.bytes_read == path.stat().st_size
    assert first.threads[THREAD_A].turns.completed == 1

    appended = r.turn("t2", "failed", total=250)
    _append(path, appended)
    second = scanner.scan()
    assert second.bytes_read == len(appended)
    assert second.files_reread == 0
    facts = second.threads[THREAD_A]
    assert (facts.turns.started, facts.turns.completed, facts.turns.failed) == (2, 1, 1)
    assert facts.last_turn is not None
    assert (facts.last_turn.turn_id, facts.last_turn.outcome) == ("t2", "failed")
    assert facts.last_turn.error_code == "internal_server_error"
    assert facts.tokens is not None and facts.tokens.total_tokens == 250
    assert second.position.total_offset == path.stat().st_size

    # Nothing new: nothing read, and the same facts.
    third = scanner.scan()
    assert third.bytes_read == 0
    assert third.threads == second.threads


def test_a_fresh_scanner_continues_from_the_index(
    home: Path, tmp_path: Path, scanner: RolloutScanner
) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1") + r.started("t2"))
    scanner.scan()
    appended = r.aborted("t2") + r.turn("t3")
    _append(path, appended)
    again = RolloutScanner(home, scanner.index_path).scan()
    assert again.bytes_read == len(appended)
    assert again.threads[THREAD_A].turns.to_dict() == {
        "started": 3,
        "completed": 2,
        "failed": 0,
        "interrupted": 1,
        "unfinished": 0,
    }


def test_partial_trailing_line_waits_until_complete(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    head = r.meta() + r.started("t1") + r.context("t1")
    ending = r.complete("t1", at=1795939999)
    cut = len(ending) // 2
    path.write_bytes(head + ending[:cut])

    first = scanner.scan()
    assert first.position.total_offset == len(head)  # the half line is not consumed
    assert first.threads[THREAD_A].turns.unfinished == 1
    assert first.corrupt_lines == 0
    assert scanner.scan().bytes_read == 0  # unchanged size: the half line is not re-read

    _append(path, ending[cut:])
    second = scanner.scan()
    assert second.bytes_read == len(ending)
    facts = second.threads[THREAD_A]
    assert (facts.turns.completed, facts.turns.unfinished) == (1, 0)
    assert facts.last_turn is not None and facts.last_turn.completed_at == 1795939999
    assert second.position.total_offset == path.stat().st_size


def test_truncated_file_is_read_again_from_the_start(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    kept = r.meta() + r.turn("t1")
    path.write_bytes(kept + r.turn("t2") + r.turn("t3"))
    assert scanner.scan().threads[THREAD_A].turns.started == 3

    with path.open("r+b") as handle:
        handle.truncate(len(kept))
    again = scanner.scan()
    assert again.files_reread == 1
    assert again.bytes_read == len(kept)
    assert again.threads[THREAD_A].turns.started == 1


def test_replaced_file_with_a_new_inode_is_read_again(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1"))
    scanner.scan()
    old_inode = path.stat().st_ino

    other = Rollout(THREAD_A)
    replacement = other.meta() + other.turn("x1", "interrupted") + other.turn("x2")
    tmp = path.with_name("replacement.tmp")
    tmp.write_bytes(replacement)
    os.replace(tmp, path)
    assert path.stat().st_ino != old_inode

    again = scanner.scan()
    assert again.files_reread == 1
    assert again.bytes_read == len(replacement)
    facts = again.threads[THREAD_A]
    assert (facts.turns.started, facts.turns.interrupted) == (2, 1)
    assert facts.last_turn is not None and facts.last_turn.turn_id == "x2"


def test_vanished_files_are_dropped_and_archiving_is_not_a_reread(
    home: Path, scanner: RolloutScanner
) -> None:
    ra, rb = Rollout(THREAD_A), Rollout(THREAD_B)
    path_a = _rollout_path(home, THREAD_A)
    path_b = _rollout_path(home, THREAD_B)
    path_a.write_bytes(ra.meta() + ra.turn("a1"))
    path_b.write_bytes(rb.meta() + rb.turn("b1"))
    assert set(scanner.scan().threads) == {THREAD_A, THREAD_B}

    archived = _rollout_path(home, THREAD_A, "archived_sessions")
    os.rename(path_a, archived)  # what thread/archive does
    path_b.unlink()
    result = scanner.scan()
    assert set(result.threads) == {THREAD_A}
    assert result.threads[THREAD_A].archived is True
    assert (result.files, result.bytes_read, result.files_reread) == (1, 0, 0)
    assert list(_indexed(scanner)) == [f"archived_sessions/{archived.name}"]


def test_thread_id_falls_back_to_the_file_name(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout("ignored")
    path = _rollout_path(home, THREAD_B)
    path.write_bytes(r.turn("t1"))  # no session_meta line at all
    result = scanner.scan()
    assert list(result.threads) == [THREAD_B]
    assert result.threads[THREAD_B].history_mode is None
    assert result.threads[THREAD_B].turns.completed == 1


# ---------------------------------------------------------------------------------------------
# Corrupt input, odd layouts, records inside records
# ---------------------------------------------------------------------------------------------


def test_corrupt_lines_are_counted_never_fatal(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    whole = r.complete("t1")
    # A crash tore a counted record after its type; the next write went on on a new line.
    torn = whole[: whole.index(b'"root_turn_id"') + 5] + b"\n"
    path.write_bytes(r.meta() + r.started("t1") + torn + r.turn("t2"))
    # An exact-mode file (its first line is not codex's compact header): every line is checked.
    other = Rollout(THREAD_B)
    path_b = _rollout_path(home, THREAD_B)
    path_b.write_bytes(
        other.line("session_meta", {"id": THREAD_B}, compact=False)
        + b"not json at all\n"
        + b"[1, 2, 3]\n"
        + b"\n"
        + other.turn("u1")
    )
    result = scanner.scan()
    # The torn record (a candidate the fast reader parses), and in the exact-mode file the text
    # line and the array; a blank line is not a record, not a corrupt one either.
    assert result.corrupt_lines == 3
    a = result.threads[THREAD_A]
    assert (a.turns.started, a.turns.completed, a.turns.unfinished) == (2, 1, 1)
    b = result.threads[THREAD_B]
    assert (b.turns.started, b.turns.completed) == (1, 1)


def test_records_named_inside_other_records_never_count(
    home: Path, scanner: RolloutScanner
) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    lookalike = '"type":"event_msg","payload":{"type":"task_started","turn_id":"fake"}'
    nested = {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "nested"}}
    path.write_bytes(
        r.meta()
        + r.user(f'please log {lookalike} and "type":"turn_context" for me')
        + r.tool_output('{"type":"turn_aborted","turn_id":"t1"}')
        + r.line("response_item", {"type": "custom", "replay": nested})
        + r.line("compacted", {"history": [nested, {"type": "turn_context", "model": "x"}]})
        + r.turn("t1")
    )
    facts = scanner.scan().threads[THREAD_A]
    assert facts.turns.to_dict() == {
        "started": 1,
        "completed": 1,
        "failed": 0,
        "interrupted": 0,
        "unfinished": 0,
    }
    assert facts.models == ("gpt-5",)


def test_a_changed_layout_is_read_line_by_line(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    # A future writer puts a key between "type" and "payload": the needles would miss these.
    shifted = (
        b'{"timestamp":"2026-11-29T09:00:00.000Z","type":"event_msg","metadata":{},'
        b'"payload":{"type":"task_started","turn_id":"m1"}}\n'
        b'{"timestamp":"2026-11-29T09:00:01.000Z","type":"turn_context","metadata":{},'
        b'"payload":{"turn_id":"m1","model":"gpt-9"}}\n'
        b'{"timestamp":"2026-11-29T09:00:02.000Z","type":"event_msg","metadata":{},'
        b'"payload":{"type":"task_complete","turn_id":"m1","error":{"message":"x",'
        b'"codex_error_info":{"http_connection_failed":{"http_status_code":502}}}}}\n'
    )
    path.write_bytes(r.meta() + r.turn("t1") + shifted)
    facts = scanner.scan().threads[THREAD_A]
    assert (facts.turns.started, facts.turns.failed) == (2, 1)
    assert facts.models == ("gpt-5", "gpt-9")
    assert facts.last_turn is not None
    assert facts.last_turn.error_code == "http_connection_failed"
    assert facts.latest_event_at == "2026-11-29T09:00:02.000Z"


def test_records_whose_own_type_comes_late_are_still_counted(
    home: Path, scanner: RolloutScanner
) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    # The first `"type":"` of these lines is nested (payload first) or far from the line
    # start (a long new key first): the fast path must judge such lines whole, not skip them.
    reordered = (
        b'{"payload":{"type":"task_started","turn_id":"r1"},'
        b'"timestamp":"2026-11-29T09:00:00.000Z","type":"event_msg"}\n'
    )
    padded = (
        b'{"timestamp":"2026-11-29T09:00:01.000Z","trace":"' + b"x" * 200 + b'",'
        b'"type":"event_msg","payload":{"type":"turn_aborted","turn_id":"r1"}}\n'
    )
    path.write_bytes(r.meta() + r.turn("t1") + reordered + padded)
    facts = scanner.scan().threads[THREAD_A]
    assert facts.turns.to_dict() == {
        "started": 2,
        "completed": 1,
        "failed": 0,
        "interrupted": 1,
        "unfinished": 0,
    }
    assert facts.last_turn is not None
    assert (facts.last_turn.turn_id, facts.last_turn.outcome) == ("r1", "interrupted")


def test_error_kinds_without_messages(home: Path, scanner: RolloutScanner) -> None:
    secret = f"CANARY-{uuid.uuid4().hex}"
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(
        r.meta()
        + r.started("t1")
        + r.complete(
            "t1",
            error={"message": secret, "codex_error_info": {"usage_limit_exceeded": {"x": 1}}},
        )
        + r.started("t2")
        + r.complete("t2", error={"message": secret, "codex_error_info": f"{secret} text"})
        + r.started("t3")
        + r.complete("t3", error={"message": secret})
    )
    result = scanner.scan()
    facts = result.threads[THREAD_A]
    assert facts.turns.failed == 3
    assert facts.last_turn is not None and facts.last_turn.error_code is None
    assert secret not in json.dumps(result.to_dict())

    # Each kind of failure, as the last turn of a fresh file:
    for error, code in [
        ({"codex_error_info": {"usage_limit_exceeded": {"x": 1}}}, "usage_limit_exceeded"),
        ({"message": secret, "codex_error_info": f"{secret} text"}, "unrecognized"),
        ({"codex_error_info": "context_window_exceeded"}, "context_window_exceeded"),
        ({}, None),
    ]:
        other = Rollout(THREAD_A)
        path.write_bytes(other.meta() + other.started("t9") + other.complete("t9", error=error))
        last = scanner.scan().threads[THREAD_A].last_turn
        assert last is not None
        assert (last.outcome, last.error_code) == ("failed", code)


def test_no_text_and_no_path_reaches_facts_or_index(home: Path, scanner: RolloutScanner) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    secret_dir = f"/Users/{canary}/work"
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(
        r.meta(cwd=secret_dir, instructions=f"instructions {canary}")
        + r.started("t1")
        + r.context("t1", cwd=secret_dir)
        + r.context("t1", model=f"{secret_dir}/model.gguf")
        + r.user(f"prompt {canary}")
        + r.tool_output(f"output {canary}")
        + r.agent("t1", f"reply {canary}")
        + r.complete("t1", message=f"last {canary}")
    )
    result = scanner.scan()
    text = json.dumps(result.to_dict())
    assert canary.encode() in path.read_bytes()
    assert canary not in text and str(home) not in text and "/Users" not in text
    assert result.threads[THREAD_A].models == ("gpt-5", "path-redacted")
    assert canary not in scanner.index_path.read_text()
    # A rescan records its progress in the journal: no text there either.
    _append(path, r.agent("t1", f"again {canary}"))
    scanner.scan()
    assert canary not in scanner.journal_path.read_text()
    assert secret_dir not in scanner.journal_path.read_text()


# ---------------------------------------------------------------------------------------------
# The index file
# ---------------------------------------------------------------------------------------------


def _indexed(scanner: RolloutScanner) -> dict[str, int]:
    """{path: offset} as a new scanner would load it (snapshot plus journal)."""
    entries, notes = RolloutScanner(scanner.codex_home, scanner.index_path)._load()
    assert notes == []
    return {rel: entry.offset for rel, entry in entries.items()}


def test_a_rescan_appends_to_the_journal_and_leaves_the_snapshot(
    home: Path, scanner: RolloutScanner
) -> None:
    r = Rollout(THREAD_A)
    path_a = _rollout_path(home, THREAD_A)
    path_b = _rollout_path(home, THREAD_B)
    path_a.write_bytes(r.meta() + r.turn("t1"))
    path_b.write_bytes(Rollout(THREAD_B).meta())
    scanner.scan()
    snapshot = scanner.index_path.read_bytes()
    assert not scanner.journal_path.exists()

    _append(path_a, r.turn("t2"))
    scanner.scan()
    assert scanner.index_path.read_bytes() == snapshot
    (line,) = scanner.journal_path.read_bytes().splitlines()
    record = json.loads(line)
    assert list(record["files"]) == [str(path_a.relative_to(home))]  # only what changed
    assert stat.S_IMODE(scanner.journal_path.stat().st_mode) == 0o600

    path_b.unlink()
    scanner.scan()
    assert json.loads(scanner.journal_path.read_bytes().splitlines()[-1])["files"] == {
        str(path_b.relative_to(home)): None
    }
    # A new process sees snapshot plus journal, and reads nothing again.
    assert _indexed(scanner) == {str(path_a.relative_to(home)): path_a.stat().st_size}
    again = RolloutScanner(home, scanner.index_path).scan()
    assert again.bytes_read == 0
    assert again.threads[THREAD_A].turns.completed == 2


_SCAN_LOOP = """
import sys
from pathlib import Path
from loopx_chat.codex.rollouts import RolloutScanner
scanner = RolloutScanner(Path(sys.argv[1]), Path(sys.argv[2]))
for _ in range(int(sys.argv[3])):
    scanner.scan()  # a long-lived scanner, as the service holds one
    RolloutScanner(Path(sys.argv[1]), Path(sys.argv[2])).scan()  # and a CLI command's
"""


def test_scanners_racing_on_one_index_never_lose_or_double_a_turn(
    home: Path, scanner: RolloutScanner
) -> None:
    threads = [THREAD_A, THREAD_B, str(uuid.UUID(int=7))]
    rollouts = {t: Rollout(t) for t in threads}
    for thread, r in rollouts.items():
        _rollout_path(home, thread).write_bytes(r.meta())
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _SCAN_LOOP, str(home), str(scanner.index_path), "40"],
            cwd=Path(__file__).resolve().parents[2],
        )
        for _ in range(3)
    ]
    turns = 0
    while any(p.poll() is None for p in racers):
        for thread, r in rollouts.items():
            _append(_rollout_path(home, thread), r.turn(f"t{turns}"))
        turns += 1
        time.sleep(0.01)
    assert [p.wait() for p in racers] == [0, 0, 0]
    assert turns > 3
    # Whatever order the snapshot and journal writes landed in, a new scanner continues from
    # self-consistent entries: every turn counted exactly once.
    result = RolloutScanner(home, scanner.index_path).scan()
    assert result.corrupt_lines == 0
    for thread in threads:
        assert result.threads[thread].turns.completed == turns
        assert result.threads[thread].turns.started == turns


def test_the_journal_is_folded_into_a_new_snapshot_when_it_grows(
    home: Path, scanner: RolloutScanner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rollouts_index, "_JOURNAL_MIN", 2_000)
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta())
    scanner.scan()
    first = json.loads(scanner.index_path.read_text())["generation"]
    folded = False
    for i in range(40):
        _append(path, r.turn(f"t{i}"))
        scanner.scan()
        if not scanner.journal_path.exists():
            folded = True
            break
    assert folded, "the journal never outgrew its bound"
    doc = json.loads(scanner.index_path.read_text())
    assert doc["generation"] != first
    (entry,) = doc["files"].values()
    assert entry[4] == path.stat().st_size  # the row's consumed offset
    assert RolloutScanner(home, scanner.index_path).scan().threads[THREAD_A].turns.completed == (
        i + 1
    )


def test_stale_torn_or_garbled_journal_lines_cost_a_reread_never_a_wrong_fact(
    home: Path, scanner: RolloutScanner
) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1"))
    scanner.scan()
    _append(path, r.turn("t2"))
    scanner.scan()
    good = scanner.journal_path.read_bytes()
    rel = str(path.relative_to(home))
    stale = json.dumps({"files": {rel: None}, "gen": "0123456789abcdef"}) + "\n"
    # Lines of another generation are ignored, a garbled line is skipped, a torn tail too.
    scanner.journal_path.write_bytes(stale.encode() + good + b"{garbled\n" + b'{"files":{"')
    assert _indexed(scanner) == {rel: path.stat().st_size}
    fresh = RolloutScanner(home, scanner.index_path)
    result = fresh.scan()
    assert result.bytes_read == 0
    assert result.threads[THREAD_A].turns.completed == 2
    # The damaged journal is folded away by the next save.
    _append(path, r.turn("t3"))
    result = fresh.scan()
    assert result.threads[THREAD_A].turns.completed == 3
    assert not fresh.journal_path.exists()
    assert _indexed(fresh) == {rel: path.stat().st_size}


def test_index_is_private_and_versioned(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    _rollout_path(home, THREAD_A).write_bytes(r.meta() + r.turn("t1"))
    scanner.scan()
    assert stat.S_IMODE(scanner.index_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(scanner.index_path.parent.stat().st_mode) == 0o700
    doc = json.loads(scanner.index_path.read_text())
    assert doc["schema"] == INDEX_SCHEMA
    (row,) = doc["files"].values()
    st = _rollout_path(home, THREAD_A).stat()
    # [dev, ino, size, mtime, off, ...]: one flat row per file
    assert row[:5] == [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_size]


def test_an_index_of_many_files_is_written_in_pieces_and_reads_back(
    home: Path, scanner: RolloutScanner
) -> None:
    threads = [str(uuid.UUID(int=i + 1)) for i in range(600)]  # over two write batches
    for thread in threads:
        _rollout_path(home, thread).write_bytes(Rollout(thread).meta())
    scanner.scan()
    raw = scanner.index_path.read_bytes()
    doc = json.loads(raw)
    assert len(doc["files"]) == 600
    # A line (and a write) per 256 files: 3 lines of files, then the closing line.
    assert raw.count(b"\n") == 3 + 1
    assert max(len(line) for line in raw.splitlines()) < 256 * 400
    again = RolloutScanner(home, scanner.index_path).scan()
    assert (again.bytes_read, again.notes, sorted(again.threads)) == (0, (), sorted(threads))


def test_unknown_index_schema_is_refused_and_left_alone(
    home: Path, scanner: RolloutScanner
) -> None:
    r = Rollout(THREAD_A)
    _rollout_path(home, THREAD_A).write_bytes(r.meta() + r.turn("t1"))
    scanner.index_path.parent.mkdir(parents=True)
    future = json.dumps({"schema": "loopx_chat_rollout_index_v9", "files": {}}).encode()
    scanner.index_path.write_bytes(future)
    before = scanner.index_path.stat()
    with pytest.raises(StateError) as refused:
        scanner.scan()
    assert refused.value.error_code == "state_schema_unsupported"
    assert refused.value.error_code in ERROR_CODES
    assert scanner.index_path.read_bytes() == future
    assert scanner.index_path.stat().st_mtime_ns == before.st_mtime_ns
    assert not scanner.journal_path.exists()


@pytest.mark.parametrize(
    "garbage",
    [b"{not json", b"[]", json.dumps({"schema": INDEX_SCHEMA, "files": {"x": {"off": -1}}})],
)
def test_unparsable_index_is_rebuilt_and_says_so(
    home: Path, scanner: RolloutScanner, garbage: str | bytes
) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1"))
    scanner.index_path.parent.mkdir(parents=True)
    scanner.index_path.write_bytes(garbage if isinstance(garbage, bytes) else garbage.encode())
    result = scanner.scan()
    assert result.notes in (("index_unparsable",), ("index_home_changed",))
    assert result.bytes_read == path.stat().st_size
    assert json.loads(scanner.index_path.read_text())["schema"] == INDEX_SCHEMA
    assert scanner.scan().notes == ()


def test_an_index_of_the_older_schema_is_rebuilt(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1"))
    scanner.index_path.parent.mkdir(parents=True)
    v1 = {"schema": "loopx_chat_rollout_index_v1", "codex_home": str(home.resolve())}
    scanner.index_path.write_text(json.dumps({**v1, "files": {}}))
    result = scanner.scan()
    assert result.notes == ("index_outdated",)
    assert result.bytes_read == path.stat().st_size
    assert json.loads(scanner.index_path.read_text())["schema"] == INDEX_SCHEMA


# Each field of a row given a value `to_row` never writes: text where an id goes, a negative or
# non-integer count, a bool for a count, a list for a string, an outcome we do not know.
_BAD_FIELDS = [
    (0, -1),
    (1, "1"),
    (2, 1.5),
    (3, None),
    (4, 10**9),  # past the size
    (5, "not hex"),
    (6, 1),
    (7, "turbo"),
    (8, "yes"),
    (9, "CANARY text with spaces"),
    (10, ["paginated"]),
    (11, True),
    (12, -3),
    (15, "t1"),
    (15, ["id with space"]),
    (16, {"id": "t1"}),
    (17, "exploded"),
    (18, "CANARY text"),
    (19, "1795939404"),
    (20, [1, 2, 3]),
    (20, [1, 2, 3, 4, "5"]),
    (21, "gpt-5"),
    (21, ["line\nbreak"]),
    (22, "CANARY 12:00"),
]


@pytest.mark.parametrize(("field", "value"), _BAD_FIELDS)
def test_a_row_we_did_not_write_is_never_trusted(
    home: Path, scanner: RolloutScanner, field: int, value: Any
) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1") + r.started("t2"))
    good = scanner.scan()
    doc = json.loads(scanner.index_path.read_text())
    (rel,) = doc["files"]
    doc["files"][rel][field] = value
    scanner.index_path.write_text(json.dumps(doc))
    for rows in (doc["files"][rel], doc["files"][rel][:-1], doc["files"][rel] + [None]):
        doc["files"][rel] = rows
        scanner.index_path.write_text(json.dumps(doc))
        result = RolloutScanner(home, scanner.index_path).scan()
        assert result.notes == ("index_unparsable",)
        assert result.bytes_read == path.stat().st_size  # read again, not continued
        assert result.threads == good.threads
        assert "CANARY" not in json.dumps(result.to_dict())


def test_a_deeply_nested_index_is_rebuilt_not_a_crash(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    _rollout_path(home, THREAD_A).write_bytes(r.meta() + r.turn("t1"))
    scanner.index_path.parent.mkdir(parents=True)
    scanner.index_path.write_bytes(b'{"files":' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    assert scanner.scan().notes == ("index_unparsable",)


def test_index_of_another_home_is_not_continued(home: Path, tmp_path: Path) -> None:
    index = tmp_path / "state" / "index.json"
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    path.write_bytes(r.meta() + r.turn("t1"))
    other = tmp_path / "other-home"
    elsewhere = Rollout(THREAD_B)
    _rollout_path(other, THREAD_B).write_bytes(elsewhere.meta() + elsewhere.turn("b1"))
    RolloutScanner(other, index).scan()
    assert index.exists()
    result = RolloutScanner(home, index).scan()
    assert result.notes == ("index_home_changed",)
    assert result.bytes_read == path.stat().st_size


def test_position_and_thread_lookup(home: Path, scanner: RolloutScanner) -> None:
    ra, rb = Rollout(THREAD_A), Rollout(THREAD_B, start=100)
    _rollout_path(home, THREAD_A).write_bytes(ra.meta() + ra.turn("a1"))
    _rollout_path(home, THREAD_B).write_bytes(rb.meta() + rb.turn("b1"))
    first = scanner.scan()
    _append(_rollout_path(home, THREAD_A), ra.turn("a2"))
    second = scanner.scan()
    before, after = first.position.turns_started, second.position.turns_started
    assert (after[THREAD_A], after[THREAD_B]) == (before[THREAD_A] + 1, before[THREAD_B])
    restored = HostPosition.from_dict(json.loads(json.dumps(second.position.to_dict())))
    assert restored == second.position
    assert second.position.latest_event_at == second.threads[THREAD_B].latest_event_at
    assert THREAD_B in second.threads and "missing" not in second.threads


# ---------------------------------------------------------------------------------------------
# Streaming: memory, long lines, any split of the bytes
# ---------------------------------------------------------------------------------------------


def test_a_huge_text_line_is_streamed_not_held(home: Path, scanner: RolloutScanner) -> None:
    r = Rollout(THREAD_A)
    path = _rollout_path(home, THREAD_A)
    huge = r.tool_output("x" * (24 << 20))  # one 24 MiB tool output line
    path.write_bytes(r.meta() + r.started("t1") + huge + r.complete("t1"))
    tracemalloc.start()
    try:
        result = scanner.scan()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.threads[THREAD_A].turns.completed == 1
    assert result.bytes_read == path.stat().st_size
    assert peak < 6 << 20, peak


# What a long-lived scanner keeps per rollout file, not counting what rows share (issue 37):
# measured 993 bytes; 1,145 while a finished file kept its accumulator, 2,673 before the rows
# were made compact.
ROLLOUT_ROW_BYTES = 1050


def test_a_kept_row_per_rollout_is_compact(tmp_path: Path, home: Path) -> None:
    # The service keeps one row per rollout file for as long as it runs: the path, the
    # progress and the facts, with one copy of what many rows name (kinds, models, counts).
    for n in range(3):
        thread = f"01a22654-8805-7283-882f-6664d5224a4{n}"
        r = Rollout(thread)
        _append(
            _rollout_path(home, thread),
            r.meta() + r.turn(f"a{n}") + r.turn(f"b{n}", "failed") + r.turn(f"c{n}"),
        )
    index = tmp_path / "state" / "rollout-index.json"
    scanned = RolloutScanner(home, index)
    first = scanned.scan()
    loaded = RolloutScanner(home, index)  # its rows come from the index on disk
    assert loaded.scan().threads == first.threads == scanned.scan().threads
    for scanner in (scanned, loaded):
        assert scanner._cached is not None
        rows = list(scanner._cached[1].items())
        sizes = [own_bytes(row, rows[:i] + rows[i + 1 :]) for i, row in enumerate(rows)]
        assert max(sizes) <= ROLLOUT_ROW_BYTES, sizes


def test_a_finished_rollouts_row_keeps_its_facts_not_its_accumulator(
    tmp_path: Path, home: Path
) -> None:
    # Issue 37: a long-lived scanner keeps a row per rollout file, most of them of threads
    # closed long ago. Once a file's facts are made and none of its turns is open, its
    # accumulator is dropped; the row it stands for and a rescan after an append are the same.
    done_r, open_r = Rollout(THREAD_A), Rollout(THREAD_B)
    done, running = _rollout_path(home, THREAD_A), _rollout_path(home, THREAD_B)
    _append(done, done_r.meta() + done_r.turn("a1") + done_r.turn("a2", "failed"))
    _append(running, open_r.meta() + open_r.turn("b1") + open_r.started("b2"))
    index = tmp_path / "state" / "rollout-index.json"
    scanner = RolloutScanner(home, index)
    scanner.scan()
    assert scanner._cached is not None
    entries = scanner._cached[1]
    kept = {rel: entry._acc is not None for rel, entry in entries.items()}
    assert sorted(kept.values()) == [False, True]  # only the file with an open turn keeps one
    on_disk, _ = RolloutScanner(home, index)._load()  # the rows as written, accumulators whole
    assert {rel: e.to_row() for rel, e in entries.items()} == {
        rel: e.to_row() for rel, e in on_disk.items()
    }
    more_done, more_running = done_r.turn("a3"), open_r.complete("b2")
    _append(done, more_done)
    _append(running, more_running)
    again = scanner.scan()
    assert again.bytes_read == len(more_done + more_running)  # read on from where each was
    fresh = RolloutScanner(home, tmp_path / "fresh" / "rollout-index.json").scan()
    assert again.threads == fresh.threads
    assert again.threads[THREAD_A].turns.completed == 2
    assert all(entry._acc is None for entry in entries.values())


@pytest.mark.parametrize("chunk", [512, 4096, 1 << 20])
def test_files_scanned_together_have_the_facts_each_has_alone(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing one file's read leaves behind (a partial line, a mode, a model seen) may reach
    # the next file's facts: a long file is read first, then a short one ending mid-line.
    monkeypatch.setattr(rollouts_parse, "_CHUNK", chunk)
    monkeypatch.setattr(rollouts_parse, "_LONG_LINE", chunk)
    long_r, short_r = Rollout(THREAD_A), Rollout(THREAD_B)
    long_bytes = long_r.meta() + b"".join(
        long_r.turn(f"a{i}", outcome, total=10 + i)
        for i, outcome in enumerate(["completed", "failed", "interrupted"] * 20)
    )
    # The short file ends mid-turn and mid-line: only the started turn counts.
    short_bytes = short_r.meta() + short_r.started("b1") + short_r.complete("b1")[:40]
    alone = {}
    for name, thread, data in (("long", THREAD_A, long_bytes), ("short", THREAD_B, short_bytes)):
        home = tmp_path / name
        _rollout_path(home, thread).write_bytes(data)
        alone[thread] = RolloutScanner(home, tmp_path / f"{name}.json").scan().threads[thread]
    both = tmp_path / "both"
    first, second = (_rollout_path(both, t, f"sessions/{t}") for t in (THREAD_A, THREAD_B))
    first.touch()
    second.touch()
    if THREAD_A not in rollouts_scanner._walk(both)[0][0]:
        first, second = second, first  # the long file goes where the walk starts
    first.write_bytes(long_bytes)
    second.write_bytes(short_bytes)
    assert rollouts_scanner._walk(both)[0][0] == str(first.relative_to(both))
    result = RolloutScanner(both, tmp_path / "both.json").scan()
    assert result.threads == alone
    assert alone[THREAD_B].turns.unfinished == 1 and alone[THREAD_A].turns.failed == 20


def _reference(turns: list[tuple[str, str, str]]) -> dict[str, Any]:
    """What the facts must say, computed from the generated turn list."""
    counts = {"started": 0, "completed": 0, "failed": 0, "interrupted": 0, "unfinished": 0}
    for _turn_id, outcome, _model in turns:
        counts["started"] += 1
        counts[outcome] += 1
    return {
        "turns": counts,
        "last": (turns[-1][0], turns[-1][1]) if turns else None,
        "models": sorted({model for _t, _o, model in turns}),
    }


# Text that looks like the records we count, with every character JSON must escape.
_TEXT = st.lists(
    st.sampled_from([*'ab {}[]":,\\\n\t', '"type":"event_msg"', '"type":"turn_context"']),
    max_size=12,
).map("".join)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    outcomes=st.lists(
        st.tuples(
            st.sampled_from(["completed", "failed", "interrupted", "unfinished"]),
            st.sampled_from(["gpt-5", "gpt-5-codex", "o3"]),
            _TEXT,
        ),
        max_size=8,
    ),
    chunk=st.sampled_from([64, 97, 256, 1 << 20]),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_any_split_and_any_chunk_size_give_the_same_facts(
    tmp_path_factory: pytest.TempPathFactory,
    outcomes: list[tuple[str, str, str]],
    chunk: int,
    seed: int,
) -> None:
    r = Rollout(THREAD_A)
    data = r.meta()
    turns: list[tuple[str, str, str]] = []
    for i, (outcome, model, text) in enumerate(outcomes):
        turn_id = f"turn-{i}"
        turns.append((turn_id, outcome, model))
        data += r.started(turn_id) + r.context(turn_id, model) + r.user(text)
        data += r.tool_output(text * 20) + r.tokens(10 + i)
        if outcome == "completed":
            data += r.complete(turn_id, message=text)
        elif outcome == "failed":
            data += r.complete(turn_id, error={"message": text, "codex_error_info": "bad"})
        elif outcome == "interrupted":
            data += r.aborted(turn_id)
    expected = _reference(turns)

    base = tmp_path_factory.mktemp("split")
    home = base / "home"
    path = _rollout_path(home, THREAD_A)
    cuts = sorted(random.Random(seed).sample(range(1, len(data)), k=min(4, len(data) - 1)))
    with pytest.MonkeyPatch.context() as patch:
        # Small reads make lines straddle reads and long text lines take the streaming path.
        patch.setattr(rollouts_parse, "_CHUNK", chunk)
        patch.setattr(rollouts_parse, "_LONG_LINE", chunk)
        scanner = RolloutScanner(home, base / "state" / "index.json")
        written = 0
        result: ScanResult | None = None
        for cut in [*cuts, len(data)]:
            _append(path, data[written:cut])
            written = cut
            result = scanner.scan()
            # Whatever was cut off mid-line is never consumed.
            assert result.position.total_offset == data.rfind(b"\n", 0, cut) + 1
        assert result is not None and result.corrupt_lines == 0
        # The same bytes through the line-by-line reader.
        patch.setattr(rollouts_parse, "_FIRST_LINE", re.compile(rb"(?!)"))
        exact = RolloutScanner(home, base / "exact" / "index.json").scan()
    for got in (result, exact):
        facts = got.threads[THREAD_A]
        assert facts.turns.to_dict() == expected["turns"]
        last = (facts.last_turn.turn_id, facts.last_turn.outcome) if facts.last_turn else None
        assert last == expected["last"]
        assert list(facts.models) == expected["models"]
        total = facts.tokens.total_tokens if facts.tokens else None
        assert total == (10 + len(turns) - 1 if turns else None)
    assert exact.threads == result.threads


def test_a_home_never_scanned_with_nothing_to_scan_is_answered_without_a_scan(
    tmp_path: Path, home: Path
) -> None:
    """`status`'s fast path says what the full scan says of such a home, writes no index,
    and gives way to the scan as soon as there is a rollout or an index."""
    state = tmp_path / "state"
    assert host_facts.scan_bound_home(state, home) == host_facts.HostScan({}, 0, None)
    assert not state.exists()
    full, error = host_facts.scan_host(host_facts.scanner_for(tmp_path / "elsewhere", home))
    assert full is not None and (full.threads, full.bytes_read, error) == ({}, 0, None)
    rollout = Rollout(THREAD_A)
    _append(_rollout_path(home, THREAD_A), rollout.turn("t1"))
    seen = host_facts.scan_bound_home(state, home)
    assert seen.threads is not None and set(seen.threads) == {THREAD_A}
    assert seen.bytes_read > 0 and host_facts.index_path(state, home).exists()
    index = host_facts.index_path(state, home)
    remembered = {p: p.read_bytes() for p in index.parent.iterdir()}
    assert THREAD_A in index.read_text()
    (home / "sessions").rename(tmp_path / "moved-away")
    # The index remembers the thread: the scan runs (and records that it is gone).
    assert host_facts.scan_bound_home(state, home) == host_facts.HostScan({}, 0, None)
    assert {p: p.read_bytes() for p in index.parent.iterdir()} != remembered
    assert host_facts.scan_bound_home(state, home).summary() == {
        "threads": 0,
        "bytes_read": 0,
        "error_code": None,
    }


def test_a_scan_of_an_empty_home_never_scanned_writes_no_index(
    home: Path, scanner: RolloutScanner
) -> None:
    """A read of a home with nothing in it leaves owner-local state as it was."""
    result = scanner.scan()
    assert (result.threads, result.files, result.notes) == ({}, 0, ())
    assert not scanner.index_path.parent.exists()
    r = Rollout(THREAD_A)
    _rollout_path(home, THREAD_A).write_bytes(r.meta() + r.turn("t1"))
    assert set(scanner.scan().threads) == {THREAD_A}
    assert scanner.index_path.exists()

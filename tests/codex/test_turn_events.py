"""codex/turn_events.py: the one decoder of codex's turn notifications, over the recordings.

The same recorded turn is decoded as a chat turn (`CodexThread.wait_turn`, which begins the
turn it started) and as a loop turn (`GoalLoopWatch`, which follows the turn from its
`turn/started`), both on the scripted host, and each outcome is held to what the recording
itself says (its `turn/completed` status, the growth of its thread total). The decoder is
also read on the recorded notifications directly, with no host.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.goal_loop import GoalLoopWatch
from loopx_chat.codex.host_connection import Notification
from loopx_chat.codex.thread import CodexThread, HostLaunch, TurnOutcome
from loopx_chat.codex.turn_events import TurnEvent, TurnEvents
from loopx_chat.state.session_records import TokenCounts
from tests.helpers.fakes.replay import Answer, load, recorded_reply
from tests.helpers.fakes.scripted_host import Script, ScriptedCodex, scripted_launch

# Recorded scenarios with one turn of ours, and whether the turn is interrupted by us.
TURNS = {"turn": False, "resume": False, "failed_turn": False, "approval": False, "interrupt": True}
# What codex's `turn/completed` status is for us, written out here (not read from the module).
EXPECTED_STATUS = {
    "completed": ("completed", None),
    "interrupted": ("interrupted", None),
    "failed": ("failed", "turn_failed"),
}


def _notes(scenario: str) -> list[Notification]:
    """The notifications codex sent in a recording, in order (ids stay placeholders)."""
    return [
        Notification(e["message"]["method"], e["message"].get("params") or {})
        for e in load(scenario)
        if e["from"] == "server" and "method" in e["message"] and "id" not in e["message"]
    ]


def _recorded(scenario: str) -> tuple[str, str, int]:
    """(our turn's placeholder id, its recorded status, its tokens as the recording says:
    the thread total at its end minus the one reported before it)."""
    notes = _notes(scenario)
    (done,) = [n for n in notes if n.method == "turn/completed"]
    turn_id, status = done.params["turn"]["id"], done.params["turn"]["status"]
    totals = [
        (n.params.get("turnId"), n.params["tokenUsage"]["total"]["totalTokens"])
        for n in notes
        if n.method == "thread/tokenUsage/updated"
    ]
    ours = [total for tid, total in totals if tid == turn_id]
    before = [total for tid, total in totals if tid != turn_id]
    tokens = ours[-1] - (before[-1] if before else 0) if ours else 0
    return turn_id, status, tokens


def _launch(tmp_path: Path, scenario: str) -> tuple[HostLaunch, str | None]:
    script = Script(answers={"turn/start": Answer(scenario, "turn/start")})
    if scenario == "resume":
        script = Script.replaying("resume", "turn/start")
    launch = scripted_launch(tmp_path, ScriptedCodex(script), idle=5, interrupt_settle=2)
    return launch, ("0" * 8 if scenario == "resume" else None)


def _as_chat_turn(tmp_path: Path, scenario: str) -> TurnOutcome:
    launch, resume = _launch(tmp_path / "chat", scenario)
    thread = CodexThread.open(launch, resume_thread_id=resume)
    turn_id, _ = thread.start_turn("hello")
    outcome = thread.wait_turn(turn_id, should_interrupt=lambda: TURNS[scenario])
    thread.close()
    return outcome


def _as_loop_turn(tmp_path: Path, scenario: str) -> tuple[TurnEvent, list[int | None]]:
    """The loop's `turn_ended`, and the tokens its `usage` events said while it ran."""
    launch, resume = _launch(tmp_path / "loop", scenario)
    thread = CodexThread.open(launch, resume_thread_id=resume)
    watch = GoalLoopWatch(thread)
    thread.start_turn("hello")
    usage: list[int | None] = []
    try:
        for _ in range(200):
            # As a follower reads it: what the connection gives, seen by the watch.
            note = thread.proc.next_notification(timeout=0.5)
            event = None if note is None else watch.see(note)
            if event is None:
                continue
            if event.kind == "turn_started" and TURNS[scenario]:
                watch.interrupt(str(event.turn_id))
            if event.kind == "usage":
                usage.append(event.tokens)
            if event.kind == "turn_ended":
                return event, usage
        raise AssertionError("the loop turn never ended")
    finally:
        thread.close()


@pytest.mark.parametrize("scenario", sorted(TURNS))
def test_a_recorded_turn_ends_the_same_as_a_chat_turn_and_as_a_loop_turn(
    tmp_path: Path, scenario: str
) -> None:
    _, status, tokens = _recorded(scenario)
    chat = _as_chat_turn(tmp_path, scenario)
    loop, usage = _as_loop_turn(tmp_path, scenario)
    assert loop.outcome is not None
    assert (chat.status, chat.error_code) == EXPECTED_STATUS[status]
    assert (loop.outcome.status, loop.outcome.error_code) == EXPECTED_STATUS[status]
    assert chat.tokens.total_tokens == loop.outcome.tokens.total_tokens == tokens
    assert chat.tokens == loop.outcome.tokens
    # What a hard budget reads while the loop turn runs ends on what the turn is charged.
    assert (usage[-1] if usage else 0) == tokens


@dataclass
class _Thread:
    thread_id: str
    usage_total: TokenCounts | None = None


def _decode(scenario: str, begin: bool) -> tuple[TurnEvents, list[TurnEvent]]:
    """The decoder over a recording: as a chat turn (`begin` the id `turn/start` answered
    with) or as a loop turn (from its `turn/started`)."""
    turn_id, _, _ = _recorded(scenario)
    (started,) = [n for n in _notes(scenario) if n.method == "turn/started"]
    events = TurnEvents(_Thread(started.params["threadId"]))
    seen: list[TurnEvent] = []
    for note in _notes(scenario):
        if begin and note.method == "turn/started":
            events.begin(turn_id)  # where the chat turn's `turn/start` is answered
        event = events.see(note)
        if event is not None:
            seen.append(event)
    return events, seen


@pytest.mark.parametrize("scenario", sorted(TURNS))
def test_the_decoder_gives_one_outcome_whoever_started_the_turn(scenario: str) -> None:
    turn_id, status, tokens = _recorded(scenario)
    _, as_chat = _decode(scenario, begin=True)
    _, as_loop = _decode(scenario, begin=False)
    ended = [e for e in as_loop if e.kind == "turn_ended"]
    assert [e for e in as_chat if e.kind == "turn_ended"] == ended
    (end,) = ended
    assert end.outcome is not None and end.outcome.upstream_turn_id == turn_id
    assert (end.outcome.status, end.outcome.error_code) == EXPECTED_STATUS[status]
    assert end.outcome.tokens.total_tokens == tokens
    # The loop sees its turn start; a chat turn began it itself.
    assert [e.kind for e in as_loop].count("turn_started") == 1
    assert [e.kind for e in as_chat].count("turn_started") == 0


def test_a_resume_repeating_an_earlier_total_costs_the_turn_nothing() -> None:
    events, seen = _decode("resume", begin=False)
    usage = [e.tokens for e in seen if e.kind == "usage"]
    (end,) = [e for e in seen if e.kind == "turn_ended"]
    assert end.outcome is not None and usage == [end.outcome.tokens.total_tokens]
    assert 0 < end.outcome.tokens.total_tokens < events.thread.usage_total.total_tokens  # type: ignore[union-attr]


def test_a_turns_answer_is_kept_as_a_digest_and_its_tool_calls_counted() -> None:
    events, seen = _decode("turn", begin=False)
    (end,) = [e for e in seen if e.kind == "turn_ended"]
    assert end.tool_calls == 0 and end.answer is not None and len(end.answer) == 16
    reply = recorded_reply()
    assert reply not in repr(vars(events))  # what the decoder keeps holds no text
    # The reply reached the caller only as deltas.
    assert "".join(e.text or "" for e in seen if e.kind == "delta") == reply
    _, approved = _decode("approval", begin=False)
    (end,) = [e for e in approved if e.kind == "turn_ended"]
    assert end.tool_calls >= 1  # the command it ran (declined) is a tool item


def test_codex_waiting_on_the_owner_is_said_as_it_starts_and_ends() -> None:
    _, seen = _decode("approval", begin=True)
    waits = [e.waiting for e in seen if e.kind == "status"]
    recorded = [
        any(
            f in ("waitingOnApproval", "waitingOnUserInput")
            for f in n.params["status"].get("activeFlags") or ()
        )
        for n in _notes("approval")
        if n.method == "thread/status/changed"
    ]
    assert waits == recorded and True in waits and waits[-1] is False


def test_a_failed_turn_says_nothing_of_codexs_message() -> None:
    _, seen = _decode("failed_turn", begin=True)
    (end,) = [e for e in seen if e.kind == "turn_ended"]
    assert end.outcome is not None and end.outcome.tokens == TokenCounts()
    assert not [e for e in seen if e.kind == "notice"]  # codex will not retry: no notice


def _other_thread(note: Notification) -> Notification:
    params: dict[str, Any] = {**note.params, "threadId": "another-thread"}
    return replace(note, params=params)


def test_what_another_thread_says_is_not_decoded() -> None:
    turn_id, _, _ = _recorded("turn")
    (started,) = [n for n in _notes("turn") if n.method == "turn/started"]
    events = TurnEvents(_Thread(started.params["threadId"]))
    events.begin(turn_id)
    assert [events.see(_other_thread(n)) for n in _notes("turn")] == [None] * len(_notes("turn"))
    assert events.thread.usage_total is None
    assert events.stopped(turn_id, None).tokens == TokenCounts()  # nothing was charged


def test_odd_values_where_codex_puts_strings_are_read_without_a_crash() -> None:
    """A status, item type or flag that is not a string (a JSON object, say) is a failed
    turn, a tool item, no owner wait: never a TypeError out of the turn loop."""
    turn_id, _, _ = _recorded("approval")
    (started,) = [n for n in _notes("approval") if n.method == "turn/started"]
    events = TurnEvents(_Thread(started.params["threadId"]))
    events.begin(turn_id)
    odd: list[TurnEvent] = []
    for note in _notes("approval"):
        params: dict[str, Any] = dict(note.params)
        if note.method == "thread/status/changed":
            params["status"] = {**params["status"], "activeFlags": [{"odd": 1}]}
        elif note.method == "item/completed":
            params["item"] = {**params["item"], "type": {"odd": 1}}
        elif note.method == "turn/completed":
            params["turn"] = {**params["turn"], "status": {"odd": 1}}
        event = events.see(replace(note, params=params))
        if event is not None:
            odd.append(event)
    assert not any(e.waiting for e in odd if e.kind == "status")
    (end,) = [e for e in odd if e.kind == "turn_ended"]
    assert end.outcome is not None and (end.outcome.status, end.outcome.error_code) == (
        "failed",
        "turn_failed",
    )
    assert end.tool_calls == len([n for n in _notes("approval") if n.method == "item/completed"])

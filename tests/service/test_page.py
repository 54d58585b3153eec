"""The first screen's pure rules: who must act first, the words a person reads, and that no
card ends without a next step."""

from __future__ import annotations

from typing import Any

from loopx_chat.goals.words import humanize, quota_words, short_id
from loopx_chat.service.page import (
    GateView,
    GoalActions,
    actor_of,
    next_step,
    ordered,
    render_cards,
)


def row(goal: str, can: str = "no: nothing", latest: str = "no run recorded yet") -> dict[str, Any]:
    return {
        "goal_id": goal,
        "status": "ok",
        "waiting_on": "monitor_signal",
        "answers": {"agent_can_continue": can, "latest_run": latest},
    }


def gate(gid: str, at: str, *, blocking: bool = True, status: str = "pending") -> GateView:
    return GateView(gid, f"question {gid}?", blocking, status, at, updated_at=at)


def test_owner_decisions_come_first_oldest_gate_first_then_blocked_agent_watching() -> None:
    rows = [
        row("w-watch"),
        row("a-agent", can="yes: write tests"),
        row("b-blocked", latest="blocked: turn failed"),
        row("z-newer-gate"),
        row("y-older-gate"),
        row("c-advisory-only"),
    ]
    actions = {
        "z-newer-gate": GoalActions(gates=(gate("gate-2", "2026-11-30T10:00:00Z"),)),
        "y-older-gate": GoalActions(gates=(gate("gate-1", "2026-11-30T09:00:00Z"),)),
        "c-advisory-only": GoalActions(
            gates=(gate("gate-3", "2026-11-30T08:00:00Z", blocking=False),)
        ),
    }
    order = [g["goal_id"] for g in ordered(rows, actions)]
    assert order == [
        "y-older-gate",
        "z-newer-gate",
        "b-blocked",
        "a-agent",
        "c-advisory-only",
        "w-watch",
    ]
    assert actor_of({"goal_id": "p", "status": "problem"}, GoalActions()) == "owner"


def test_badges_name_the_actor_in_words() -> None:
    html = render_cards(
        {"attention_queue": [row("g1", can="yes: go"), row("g2")]},
        {"g2": GoalActions(gates=(gate("gate-aaaaaaaaaaaa", "t"),))},
    )
    assert 'badge-waiting">Waiting on you<' in html and 'badge-ready">Ready to go on<' in html


def test_codes_become_words_and_long_ids_are_shortened_with_the_full_id_on_hover() -> None:
    assert quota_words("eligible", "eligible") == "may take its next automatic turn"
    assert quota_words("operator_gate", "open_blocking_gate") == (
        "waits for a person's decision (an open owner gate blocks it)"
    )
    assert humanize("no: human_decision_pending") == "no: a person's decision is pending"
    assert short_id("gate-0123456789ab") == "gate-01234567"
    turn = "0123456789abcdef0123456789abcdef"
    html = render_cards({"attention_queue": [row("g", latest=f"validated: turn {turn}")]}, {})
    assert f'title="{turn}">01234567<' in html
    assert "human_decision_pending" not in render_cards(
        {"attention_queue": [row("g", can="no: human_decision_pending")]}, {}
    )


def test_every_card_says_what_moves_it() -> None:
    approved = gate("gate-1", "t1", status="approved")
    rejected = gate("gate-1", "t1", status="rejected")
    goal = row("g")
    with_next = GoalActions(gates=(approved,), next_action="ship it")
    assert "the agent may continue with: ship it" in next_step(goal, with_next, "watching")
    nothing_queued = next_step(goal, GoalActions(gates=(approved,)), "watching")
    assert "nothing is queued" in nothing_queued and "handoff record" in nothing_queued
    assert "Rejected" in next_step(goal, GoalActions(gates=(rejected,)), "watching")
    idle = next_step(goal, GoalActions(), "watching")
    assert "gate request" in idle and "Run" in idle
    assert "Your decision" in next_step(goal, GoalActions(gates=(gate("g1", "t"),)), "owner")


def test_the_card_says_when_codex_runs_a_goal_loopx_chat_did_not_start() -> None:
    from loopx_chat.service.page import run_view

    seen = run_view(None, False, host_loop_seen_at="2026-12-01T20:00:00Z")
    assert seen is not None and seen.words.startswith(
        "Codex is running a goal loopx-chat did not start (no budget set here"
    )
    assert run_view(None, False) is None


def test_archived_goals_are_counted_in_the_header_and_never_rendered() -> None:
    from loopx_chat.service.page import PAGE_SCRIPT, PAGE_SHELL, render_cards

    status = {
        "attention_queue": [row("live-goal")],
        "archive": {"count": 2, "goals": [{**row("done-goal"), "archived_because": "accepted"}]},
    }
    cards = render_cards(status, {})
    assert "live-goal" in cards and "done-goal" not in cards
    # The shell carries no data: the script writes the count `GET /api/page` gives.
    assert b"goal(s)" not in PAGE_SHELL and b'id="about"' in PAGE_SHELL
    assert "doc.archived_count" in PAGE_SCRIPT
    assert '" finished goal(s) archived"' in PAGE_SCRIPT

"""The one table of what the page and the CLI say about a goal (`goals/badges.py`)."""

from __future__ import annotations

import re
from typing import Any

from loopx_chat.goals.badges import (
    BADGES,
    RUN_SAYS,
    SAID,
    RunFacts,
    goal_badge,
    row_actor,
    run_is_live,
    run_says,
)
from loopx_chat.service import host_gates, page

CODE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def test_every_run_state_has_a_badge_and_a_sentence_without_codes() -> None:
    facts: list[Any] = [
        RunFacts(state, None if status == "*" else status, who="owner (Pause)", reason="x")
        for state, status in RUN_SAYS
    ]
    facts.append(RunFacts("ended", None, reason="app_server_exited"))
    for fact in facts:
        badge, sentence = run_says(fact)
        assert badge.code in BADGES
        assert not CODE.findall(sentence), sentence
    assert run_says(RunFacts("ended", None, reason="app_server_exited")) == (
        BADGES["failed"],
        "The run stopped: Codex stopped unexpectedly (0 tokens): Run starts it again",
    )


def test_a_run_is_running_done_paused_or_failed_never_watching() -> None:
    running = RunFacts("running", "active", turns=2, tokens=2979, budget=100000)
    assert run_says(running) == (
        BADGES["running"],
        "Codex is working on it (turn 2, 2,979 of 100,000 tokens, 2 %)",
    )
    assert run_says(RunFacts("running", "active", followed=False))[0] == BADGES["running"]
    assert run_says(RunFacts("ended", "complete"))[0] == BADGES["done"]
    paused = run_says(RunFacts("ended", "paused", who="owner (Pause)", tokens=5))
    assert paused == (BADGES["paused"], "Paused by you (Pause) (5 tokens): Run goes on from here")
    assert run_says(RunFacts("ended", "active", reason="app_server_exited"))[0] == BADGES["failed"]
    assert run_says(RunFacts("closed", "complete"))[0] == BADGES["accepted"]
    assert run_says(RunFacts("not_ours", "active"))[0] == BADGES["running"]
    assert run_is_live(running) and not run_is_live(RunFacts("ended", "paused"))
    # An open decision comes first; without a run, who must act decides.
    assert goal_badge("agent", True, running) == BADGES["waiting"]
    assert goal_badge("agent", False, running) == BADGES["running"]
    assert goal_badge("watching", False, None).words == "Nothing to do"
    assert row_actor({"answers": {"agent_can_continue": "yes: go"}}, False) == "agent"
    assert row_actor({"status": "problem"}, False) == "owner"


def test_every_click_on_the_page_has_its_confirmation() -> None:
    """Every `data-run` the page offers and every decision a gate button sends is in SAID."""
    sources = page.PAGE_SCRIPT + page.__loader__.get_source(page.__name__)  # type: ignore[union-attr]
    runs = set(re.findall(r'data-run="([a-z]+)"', sources))
    decisions = set(re.findall(r'data-decision="([a-z]+)"', sources))
    gate_source = host_gates.__loader__.get_source(host_gates.__name__)  # type: ignore[union-attr]
    decisions |= set(re.findall(r'"(approve|decline|cancel|amend|answer|reject)"', gate_source))
    assert runs == {"run", "pause", "gates", "accept", "reopen"}
    assert runs | decisions <= set(SAID), (runs | decisions) - set(SAID)


def test_a_run_past_its_budget_says_the_share_spent_and_the_bar_stops_at_full() -> None:
    """A run may end past its budget by the response in flight: the words say how far (not
    a capped 100 %), and the page's bar is full, its label as true as the words."""
    over = RunFacts("running", "active", turns=3, tokens=5180, budget=5000)
    assert run_says(over)[1] == "Codex is working on it (turn 3, 5,180 of 5,000 tokens, 103 %)"
    view = page.RunView("run-1", "running", "active", True, "", facts=over)
    bar = page._budget_bar(view)
    assert 'value="100"' in bar and 'aria-label="103 % of the token budget spent"' in bar

"""Budgets are hard and counted once, on the real codex against the mock: a run stops within
the one model response in flight when the tokens codex reports reach its budget, even inside
one turn that would otherwise go on calling tools, and the ledger, the progress lines and
codex's own count of the goal agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.goal_runs import goal_loop_turns, run_events
from tests.helpers.owner_cli import OwnerCli

# Far more tool calls than any budget here allows: a turn that never ends by itself.
RUNAWAY_CALLS = 400


@pytest.fixture
def cli(tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str) -> OwnerCli:
    return OwnerCli(tmp_path, bound_home, base_env, codex_bin)


def _goal_with_session(cli: OwnerCli) -> str:
    done = cli("goal", "set", "g", "--objective", "count to three", "--acceptance", "3 said")
    assert done.returncode == 0, done.stderr
    code, doc = cli.json("chat", "new", "--goal", "g", "mock:text=ready")
    assert code == 0, doc
    return str(doc["session_id"])


@pytest.mark.parametrize("budget", [5000, 50000])
def test_a_turn_that_reaches_the_budget_is_interrupted_within_one_response(
    cli: OwnerCli, mock: MockResponsesServer, budget: int
) -> None:
    sid = _goal_with_session(cli)
    first = len(mock.response_tokens)
    mock.script(*["mock:call=no_such_tool {}"] * RUNAWAY_CALLS, default="mock:text=done")
    code, doc = cli.json("goal", "run", "g", "--token-budget", str(budget))
    served = mock.response_tokens[first:]
    assert code == 3, doc  # budget spent
    assert doc["run"]["ended_by"] == "the budget"
    assert doc["host_goal"]["status"] == "budgetLimited"
    spent = doc["ledger_tokens"]
    # Over the budget by less than the one response that reached it; codex's loop did not
    # run the remaining scripted calls.
    assert budget <= spent < budget + max(served)
    assert len(served) < RUNAWAY_CALLS
    # One figure: the ledger, codex's count of the goal and the run's record agree.
    assert doc["host_tokens_used"] == spent and doc["differences"] == []
    turns = goal_loop_turns(cli.state, sid)
    assert sum(t.tokens.total_tokens for t in turns) == spent
    assert turns[-1].status == "interrupted"
    assert run_events(cli.state, "g")[-1]["run_tokens"] == spent


@pytest.mark.parametrize("budget", [5000, 50000])
def test_turns_of_one_response_stop_at_the_first_turn_past_the_budget(
    cli: OwnerCli, mock: MockResponsesServer, budget: int
) -> None:
    sid = _goal_with_session(cli)
    first = len(mock.response_tokens)
    mock.script(default="mock:text=working on it")
    done = cli("goal", "run", "g", "--token-budget", str(budget))
    served = mock.response_tokens[first:]
    assert done.returncode == 3, done.stderr
    spent = sum(t.tokens.total_tokens for t in goal_loop_turns(cli.state, sid))
    assert spent == sum(served)
    assert budget <= spent < budget + served[-1]
    # The progress lines count the same figure as the ledger.
    progress = [line for line in done.stderr.splitlines() if f" of {budget:,} tokens" in line]
    assert progress and f"{spent:,} of {budget:,} tokens" in progress[-1]

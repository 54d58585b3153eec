"""The goal card in real Chromium against a real `loopx-chat serve` with the real codex and the
mock: Run, the card showing Codex at work, Codex saying it is done, and Accept in place."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.goal_runs import owner_page, run_events

BUILD = Path(__file__).resolve().parent.parent / "build"


def test_run_progress_done_and_accept_on_the_card(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
) -> None:
    state = tmp_path / "state"
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "--codex-bin", codex_bin]
    GoalLedger(GateStore(state)).set_goal_state(
        "g", {"objective": "count", "acceptance": ["three said"], "token_budget": 100000}
    )
    made = subprocess.run(
        [*base, "chat", "new", "--goal", "g", "--json", "mock:text=ready"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    mock.script(
        "mock:slow=0.3 mock:text=one two three four five six seven",
        'mock:call=update_goal {"status": "complete"}',
        "mock:text=done",
        default="mock:text=unexpected extra turn",
    )
    with owner_page(base, env, tmp_path, state) as page:
        card = page.locator('section.card[data-goal="g"]')
        card.locator('button[data-run="run"]').click()
        card.locator(".run-words", has_text="Codex is working on it (turn ").wait_for(timeout=10000)
        assert card.locator('button[data-run="pause"]').count() == 1
        # Live progress: the card counts the turns codex took, as they start.
        card.locator(".run-words", has_text="(turn 1, ").wait_for(timeout=15000)
        # Codex says it is done: the card shows it live, with Accept and Reopen.
        card.locator('button[data-run="accept"]').wait_for(timeout=30000)
        assert "Codex says" in card.inner_text() and "three said" in card.inner_text()
        assert card.locator('button[data-run="reopen"]').count() == 1
        assert card.get_attribute("data-actor") == "owner"  # it waits on the owner
        BUILD.mkdir(exist_ok=True)
        page.screenshot(path=str(BUILD / "goal-run-done.png"), full_page=True)
        card.locator('button[data-run="accept"]').click()
        card.locator(".run-words", has_text="You accepted it").wait_for(timeout=10000)
    events = [e["event"] for e in run_events(state, "g")]
    assert events[0] == "run_authorized" and events[-1] == "accepted"
    rewards = (state / "goals" / "g" / "rewards.jsonl").read_text().splitlines()
    assert [json.loads(r)["label"] for r in rewards] == ["good"]
    authorized = run_events(state, "g")[0]
    assert authorized["surface"] == "page" and authorized["actor"] == "owner-device:browser-1"

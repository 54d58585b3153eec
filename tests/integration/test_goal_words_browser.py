"""The page and the CLI say the same thing about a goal, in words a person uses (issue 34,
case 7): in real Chromium against a real `loopx-chat serve`, the real codex and the mock, a
goal goes Running (with its budget bar) → Waiting on you (Hold) → Running (Approve) →
Paused → Done (Accept / Reopen) → Accepted; `loopx-chat status` shows the same badge at
each step; neither ever says "Watching" for it, shows a reason code or an internal word,
and every click is confirmed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from loopx_chat.goals.badges import BADGES, SAID
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.goal_runs import owner_page

BUILD = Path(__file__).resolve().parent.parent / "build"
# What must never reach the owner: codes (snake_case words), the words of issue 34's report.
CODE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
NEVER = (
    "Watching",
    "Host and goal disagree",
    "failed_outcome",
    "records a handoff or promotes a proposal",
    "[action]",
    "[watch]",
    "session_runtime",
)


def _plain(text: str, where: str) -> None:
    for word in NEVER:
        assert word not in text, (where, word, text)
    assert not CODE.findall(text), (where, CODE.findall(text), text)


def test_the_page_and_the_cli_say_the_same_words_and_confirm_every_click(
    tmp_path: Path,
    codex_bin: str,
    bound_home: Path,
    base_env: dict[str, str],
    mock: MockResponsesServer,
) -> None:
    state = tmp_path / "state"
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home), "NO_COLOR": "1"}
    base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "--codex-bin", codex_bin]

    def cli(*args: str) -> str:
        done = subprocess.run(
            [*base, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    GoalLedger(GateStore(state)).set_goal_state(
        "g", {"objective": "count", "acceptance": ["three said"], "token_budget": 100000}
    )
    cli("chat", "new", "--goal", "g", "--json", "mock:text=ready")
    # Codex's loop goes on, slowly, until the owner pauses it.
    mock.script(default="mock:slow=0.3 mock:text=one two three four five")
    seen: list[str] = []
    with owner_page(base, env, tmp_path, state) as page:
        card = page.locator('section.card[data-goal="g"]')

        def badge_is(code: str) -> None:
            card.locator(f".badge.badge-{code}").wait_for(timeout=60000)
            words = card.locator(".badge").inner_text()
            assert words == BADGES[code].words
            _plain(card.inner_text(), f"page, {code}")
            status = cli("status")
            _plain(status, f"cli, {code}")
            assert f"goal g  [{BADGES[code].words}]" in status, status
            seen.append(code)

        def click(selector: str, what: str) -> None:
            card.locator(selector).click()
            page.locator("#said", has_text=SAID[what]).wait_for(timeout=30000)

        click('button[data-run="run"]', "run")
        badge_is("running")
        # The budget bar, and the same sentence on the page and in the terminal.
        assert card.locator("progress.budget").count() == 1
        # (The badge can show before codex's first turn starts: its count follows live.)
        card.locator(".run-words", has_text="Codex is working on it (turn").wait_for(timeout=30000)
        assert "run:                     Codex is working on it (turn" in cli("status")

        card.locator(".runbar .hold").fill("ship on Friday?")
        click('button[data-run="gates"]', "gates")
        badge_is("waiting")
        click("button.approve", "approve")
        badge_is("running")

        click('button[data-run="pause"]', "pause")
        badge_is("paused")
        assert "Paused by you" in card.inner_text()

        mock.clear_script()
        mock.script(
            'mock:call=update_goal {"status": "complete"}',
            "mock:text=done",
            default="mock:text=unexpected extra turn",
        )
        click('button[data-run="run"]', "run")
        badge_is("done")
        assert card.locator('button[data-run="accept"]').count() == 1
        assert card.locator('button[data-run="reopen"]').count() == 1
        BUILD.mkdir(exist_ok=True)
        page.screenshot(path=str(BUILD / "goal-words-done.png"), full_page=True)
        click('button[data-run="accept"]', "accept")
        badge_is("accepted")
    assert seen == ["running", "waiting", "running", "paused", "done", "accepted"]

"""How a goal run of ours ends: `RunEnd`, which makes what it hands back (`RunResult`).

Owns the run's last steps: stopping it now (goal paused, running turn interrupted and given
a moment, one still open recorded interrupted), its `ended` record with the result document
(so `goal follow` in any shell ends as the run's terminal did), and the ledger's tokens
compared with the host goal's and the host's rollouts (`codex facts`), in words.

It never starts a turn, never sets the goal but to `paused`, and records numbers and its
own words only.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from loopx_chat.controller.our_run import RunResult
from loopx_chat.errors import LoopxChatError, StateError
from loopx_chat.goals.goal_runs import GoalRun, exit_code_for

if TYPE_CHECKING:
    from loopx_chat.codex.goal_loop import HostGoalState
    from loopx_chat.controller.chat_controller import ChatController
    from loopx_chat.controller.our_run import OurRun
    from loopx_chat.state.session_records import SessionRecord


class RunEnd:
    """The end of one run of ours: stopped now, or finished as its loop ended."""

    def __init__(self, run: OurRun) -> None:
        self.run = run

    def stop_now(self, by: str, exit_code: int | None, reason: str | None = None) -> RunResult:
        """Pause the goal, interrupt the turn that runs, wait briefly for its outcome."""
        f = self.run.follower
        if not f.state.terminal:
            f.state.move("paused")
        f.set_goal("paused")
        for upstream in list(f.loop.open_turns):
            f.send_interrupt(upstream)
        f.let_turn_end(self.run.runner.controller.config.timeouts.interrupt_settle)
        self.settle_open("controller_stopped")
        return self.finish(by=by, reason=reason, exit_code=exit_code)

    def settle_open(self, code: str | None) -> None:
        f = self.run.follower
        ledger = self.run.runner.controller.turns
        f.finished += f.loop.settle(code)
        # What the records say runs, too: a Ctrl-C that lands between the ledger recording a
        # turn codex started and the run adding it to `open_turns` left it `running` for good.
        with contextlib.suppress(StateError):  # unreadable: left as it was, said elsewhere
            ledger.settle_orphan(f.loop.session_id, code or "controller_stopped")

    def finish(
        self, by: str | None = None, reason: str | None = None, exit_code: int | None = None
    ) -> RunResult:
        f = self.run.follower
        status = f.goal.status if f.goal else None
        if by is None:
            by = "Codex" if status in ("complete", "blocked", "paused") else "the budget"
            if status == "usageLimited":
                by = "the account's usage limit"
        ledger_tokens = f.spent()
        host = self.run.host_run_tokens()
        facts, differences = compare_counts(
            self.run.runner.controller, self.run.plan.session, ledger_tokens, host
        )
        f.state.end_as(status)
        code = exit_code if exit_code is not None else exit_code_for(status)
        result = RunResult(
            run=self.run.record,
            host=f.goal,
            turns=len(f.finished),
            ledger_tokens=ledger_tokens,
            host_tokens=host,
            facts=facts,
            differences=differences,
            exit_code=code,
        )
        run = self.end(f.goal, by=by, reason=reason, result=result.summary())
        return replace(result, run=run)

    def end(
        self,
        goal: HostGoalState | None,
        *,
        by: str,
        reason: str | None,
        failed: bool = False,
        result: dict[str, Any] | None = None,
    ) -> GoalRun:
        """The run's `ended` record."""
        run, f = self.run, self.run.follower
        if (failed or (goal is None and by == "host")) and not f.state.terminal:
            f.state.move("failed")
        resets = f.watch.usage_resets_at if f.watch is not None else None
        return run.runner.runs.note(
            run.goal_id,
            run.record.run_id,
            "ended",
            usage_resets_at=resets if goal is not None and goal.status == "usageLimited" else None,
            host_status=goal.status if goal else None,
            tokens_used=goal.tokens_used if goal else None,
            run_tokens=f.spent(),
            turns=len(f.finished),
            by=by,
            reason=reason,
            **({"failed": True} if failed else {}),
            **({"result": result} if result is not None else {}),
        )


def compare_counts(
    controller: ChatController,
    session: SessionRecord,
    ledger_tokens: int,
    host: int | None,
) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """A run's tokens as the ledger (`ledger_tokens`), the host goal (`host`: what it
    counted since the run set it active) and the host's rollouts count them: the facts, and
    each difference in words. The run's own end and `chat interrupt` of a run whose process
    is gone both end a run with it."""
    differences: list[str] = []
    if host is not None and host != ledger_tokens:
        differences.append(
            f"the ledger counted {ledger_tokens:,} tokens for the run's turns, the host "
            f"goal {host:,} (codex stops counting a goal's tokens when its status changes "
            "mid-turn)"
        )
    thread_id, session_id = session.upstream_thread_id, session.session_id
    facts: dict[str, Any] | None = None
    try:
        from loopx_chat.codex.rollouts.host_facts import scanner_for

        scan = scanner_for(controller.store.root, controller.codex_home).scan()
        thread = scan.threads.get(thread_id or "")
    except (LoopxChatError, OSError):
        thread = None
    if thread is None:
        differences.append("codex facts has no record of this thread yet")
        return None, tuple(differences)
    session_turns = controller.store.list_turns(session_id)
    ledger_total = sum(t.tokens.total_tokens for t in session_turns)
    facts_total = thread.tokens.total_tokens if thread.tokens else 0
    facts = {
        "turns": thread.turns.started,
        "tokens": facts_total,
        "ledger_turns": len(session_turns),
        "ledger_tokens": ledger_total,
    }
    if facts_total != ledger_total:
        differences.append(
            f"codex facts counts {facts_total:,} tokens on the thread, the ledger {ledger_total:,}"
        )
    if thread.turns.started != len(session_turns):
        differences.append(
            f"codex facts counts {thread.turns.started} turns on the thread, the ledger "
            f"{len(session_turns)}"
        )
    return facts, tuple(differences)

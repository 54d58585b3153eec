"""`loopx-chat goal follow G`: follow a goal's run from any shell, as its own terminal shows it.

Owns following a run from what the process that runs it records (the run's events in
`runs.jsonl`, the turns in the ledger) and from Codex's own rollout (the agent's words, on
stdout when stdout is a terminal): each event's line (`goal_runs.run_line`, the words the
run's own process says), one progress line per finished turn, and the end with the document
the run's process recorded, so the output, the `--json` document and the exit code are those
of a foreground `goal run`. It reads files only, so a service restart changes nothing here:
the restarted service picks the run up (`recovered`) and the lines go on. `goal run` through
the service follows with it.

It never writes state, never talks to Codex and never changes the run; Ctrl-C leaves (or,
given `on_interrupt`, asks the run to pause and follows it to its end).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from loopx_chat.cli.context import CliContext, json_option
from loopx_chat.cli.options import known_goal

POLL_SEC = 0.2
EXIT_INTERRUPTED = 130


def _seconds_between(start: str | None, end: str | None) -> float:
    try:
        a = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return max(0.0, (b - a).total_seconds())


def paused_line(run: Any) -> str | None:
    """Why loopx-chat paused the run by itself (a `run_states.PAUSE_REASONS` code), in
    words, said after the run's end line by `goal run` and `goal follow` alike; else None."""
    from loopx_chat.controller.run_states import PAUSE_REASONS

    if run.reason not in PAUSE_REASONS:
        return None
    from loopx_chat.goals.words import WORDS

    return f"paused: {WORDS[run.reason]}; `loopx-chat goal run {run.goal_id}` goes on from here"


class RunFollower:
    """One run of a goal, followed from its records until it ends."""

    def __init__(
        self,
        state_dir: Path,
        codex_home: Path | None,
        goal_id: str,
        *,
        as_json: bool,
        run_id: str | None = None,
        words: bool | None = None,
    ) -> None:
        from loopx_chat.goals.gate_store import GateStore
        from loopx_chat.goals.goal_runs import GoalRuns
        from loopx_chat.state.session_store import SessionStore

        self.goal_id, self.as_json = goal_id, as_json
        self.runs = GoalRuns(GateStore(state_dir))
        self.store = SessionStore(state_dir)
        run = self.runs.run(goal_id, run_id) if run_id else self.runs.latest(goal_id)
        if run is None:
            from loopx_chat.errors import StateError

            raise StateError(f"goal {goal_id} has no run to follow", error_code="run_not_found")
        self.run = run
        self.events_seen = 0
        self.turns_seen = 0
        self.gone_said = False
        show = (not as_json and sys.stdout.isatty()) if words is None else words
        self.words = None
        if show and codex_home is not None and run.thread_id:
            from loopx_chat.codex.rollout_words import RolloutWords

            self.words = RolloutWords(codex_home, run.thread_id)

    def say(self, line: str) -> None:
        if not self.as_json:
            click.echo(f"[loopx-chat] {line}", err=True)

    def follow(
        self, on_interrupt: Callable[[], object] | None = None, banner: str | None = None
    ) -> int:
        """Print the run as it goes, until it ends; its exit code (130 after Ctrl-C)."""
        from loopx_chat.goals.goal_runs import run_line

        if banner is not None:
            self.say(banner)
        interrupted = False
        while True:
            try:
                self.run = self.runs.run(self.goal_id, self.run.run_id)
                lines = [
                    (str(event.get("at") or ""), line)
                    for event in self.run.history[self.events_seen :]
                    if event.get("event") != "ended"
                    and (line := run_line(self.run, event)) is not None
                ]
                self.events_seen = len(self.run.history)
                self._words()
                # One poll may find several turns and events (a restart after turns that
                # ended a moment before codex died): said in the order they happened, as
                # the run's own terminal said them.
                for _, line in sorted([*lines, *self._turns()], key=lambda pair: pair[0]):
                    self.say(line)
                if not self.run.live:
                    break
                self._note_gone()
                time.sleep(POLL_SEC)
            except KeyboardInterrupt:
                if on_interrupt is None or interrupted:
                    interrupted = True
                    break
                interrupted = True
                self.say("pausing: the running turn finishes, then the run ends")
                on_interrupt()
        if interrupted and self.run.live:
            return EXIT_INTERRUPTED  # left while it runs: the run goes on
        code = self._end()
        return EXIT_INTERRUPTED if interrupted else code

    def _words(self) -> None:
        if self.words is None:
            return
        from loopx_chat.visible_text import ControlMode, visible_text

        for text in self.words.new():
            click.echo(visible_text(text, ControlMode.PICTURES))

    def _turns(self) -> list[tuple[str, str]]:
        """The line of each turn finished since the last look, with when it finished."""
        turns = sorted(
            (
                t
                for t in self.store.list_turns(self.run.session_id)
                if t.run_id == self.run.run_id and t.completed_at
            ),
            key=lambda t: str(t.completed_at),
        )
        started = next(
            (e.get("at") for e in self.run.history if e.get("event") == "started"),
            self.run.authorized_at,
        )
        used = 0
        lines: list[tuple[str, str]] = []
        for n, turn in enumerate(turns, 1):
            used += turn.tokens.total_tokens
            if n > self.turns_seen:
                elapsed = _seconds_between(started, turn.completed_at)
                lines.append(
                    (
                        str(turn.completed_at),
                        f"turn {n} {turn.status}  {used:,} of {self.run.token_budget:,} "
                        f"tokens  {elapsed:.1f}s",
                    )
                )
        self.turns_seen = max(self.turns_seen, len(turns))
        return lines

    def _note_gone(self) -> None:
        """Say once when the process that runs it is gone (a service restarting picks it
        up again; a foreground run someone stopped does not)."""
        from loopx_chat.pids import pid_alive

        if self.run.pid is not None and not pid_alive(self.run.pid):
            if not self.gone_said:
                self.gone_said = True
                self.say(
                    f"the process running {self.run.run_id} is gone: waiting for the service "
                    f"to take it up again (`loopx-chat goal run {self.goal_id}` does too)"
                )
        else:
            self.gone_said = False

    def _end(self) -> int:
        from loopx_chat.goals.goal_runs import exit_code_for

        ended: dict[str, Any] = next(
            (e for e in reversed(self.run.history) if e.get("event") == "ended"), {}
        )
        result: dict[str, Any] = dict(ended.get("result") or {})
        code = result.get("exit_code")
        if not isinstance(code, int):
            code = 1 if self.run.failed else exit_code_for(self.run.host_status)
        if self.as_json:
            from loopx_chat.cli.context import emit_json

            emit_json({"ok": code == 0, "run": self.run.to_dict(), **result, "exit_code": code})
            return code
        if "turns" in result:
            status = (result.get("host_goal") or {}).get("status") or "unknown"
            self.say(
                f"run {self.run.run_id} ended: Codex goal {status} after {result['turns']} "
                f"turn(s), {result.get('ledger_tokens', 0):,} tokens (exit {code})"
            )
            for difference in result.get("differences") or []:
                self.say(f"difference: {difference}")
            if (paused := paused_line(self.run)) is not None:
                self.say(paused)
        else:
            why = f": {self.run.reason}" if self.run.reason else ""
            word = "failed" if self.run.failed else f"ended ({self.run.ended_by})"
            self.say(f"run {self.run.run_id} {word}{why} (exit {code})")
        return code


@click.command("follow")
@click.argument("goal_id")
@click.option("--run", "run_id", default=None, help="Which run (default: the goal's latest).")
@json_option
@click.pass_obj
def goal_follow(cli: CliContext, goal_id: str, run_id: str | None, as_json: bool) -> None:
    """Follow GOAL_ID's run from this shell: Codex's words (on a terminal), each gate as it
    opens and closes, one line per turn, and the end, with the exit code and `--json`
    document of a foreground `goal run`. Ctrl-C leaves; the run goes on."""
    gid = known_goal(cli, goal_id)
    follower = RunFollower(cli.state_dir, cli.binding().path, gid, as_json=as_json, run_id=run_id)
    banner = None
    if follower.run.live:
        banner = f"following run {follower.run.run_id} of goal {gid} (Ctrl-C leaves; it goes on)"
    sys.exit(follower.follow(banner=banner))

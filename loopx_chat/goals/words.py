"""Human words for the codes the goal layer uses, in one place for the page and the CLI.

Owns the table from stable codes (quota decisions and reasons, gate states, waiting-on and
recommended-action codes) to the words a person reads, and the shortening of long ids for
display. Pure: text in, text out. It never changes a code in a JSON document: `--json` and
`/status.json` keep the codes, only human output is translated.
"""

from __future__ import annotations

import re

WORDS: dict[str, str] = {
    # quota decisions and reasons (scheduler hints)
    "eligible": "may take its next automatic turn",
    "operator_gate": "waits for a person's decision",
    "open_blocking_gate": "an open owner gate blocks it",
    "throttled": "paused by its budget",
    "consecutive_failed_turns": "several turns failed in a row",
    "token_budget_spent": "its token budget is spent",
    "blocked": "blocked",
    "raw_material_detected": "raw material was found in its records",
    "monitor_quiet_skip": "nothing changed since the last look",
    "no_material_transition": "nothing material changed",
    "waiting": "waits",
    "no_agent_todo": "nothing is queued for the agent",
    "turn_running": "a turn is running",
    "paused": "paused",
    "goal_stopped": "its owner stopped it",
    "codex_home_mismatch": "its session belongs to another Codex home",
    "record_unreadable": "a record of it cannot be read",
    # recommended actions and waiting-on codes
    "human_decision_pending": "a person's decision is pending",
    "user_or_controller": "a person",
    "external_evidence": "evidence from the host",
    "monitor_signal": "a material change",
    "repair_state": "repair the goal's records",
    "continue_agent_work": "the agent continues",
    # gate states
    "open_blocking_gate_pending": "waiting for a decision",
    # why Codex's record and ours disagree (goals/reconcile.py)
    "failed_outcome": "Codex's last turn did not complete",
    "stale_artifact": "Codex has turns loopx-chat has not recorded yet",
    "missing_gate": "Codex finished, but no decision is on record",
    "missing_validation": "Codex finished, but nothing on record checks it",
    # why a run stopped (error codes a run records as its reason)
    "app_server_exited": "Codex stopped unexpectedly",
    "app_server_protocol": "Codex answered something loopx-chat does not understand",
    "thread_busy": "another process holds the thread",
    "stopped before the loop started": "stopped before Codex started",
    "turn_interrupted_outside": "the turn was interrupted outside loopx-chat",
    "turn_interrupted_by_owner": "the owner interrupted its turn (`chat interrupt`)",
    # status codes of the projection (`[severity] status` in older output)
    "session_runtime_advancement_task": "the agent has work",
    "session_runtime_monitor": "nothing to do",
}

_CODE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, WORDS), key=len, reverse=True)) + r")\b")
# Our own ids (gate-…, handoff-…, proposal-…, quota-…) and 32-hex turn/thread ids.
LONG_ID = re.compile(
    r"\b(?:(?:gate|handoff|proposal|quota|outcome)-[0-9a-f]{12}|[0-9a-f]{32}"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"
)


def humanize(text: str) -> str:
    """Every known code in `text` replaced by its words."""
    return _CODE.sub(lambda m: WORDS[m.group(1)], text)


def short_id(value: str) -> str:
    """The first 8 characters that tell ids apart (after a `gate-`-style prefix)."""
    prefix, dash, rest = value.partition("-")
    if dash and prefix.isalpha() and len(rest) >= 12:
        return f"{prefix}-{rest[:8]}"
    return value[:8]


def quota_words(decision: str, reason: str) -> str:
    """`eligible` + `eligible` reads "may take its next automatic turn", not the code twice."""
    said = humanize(decision)
    because = humanize(reason)
    return said if reason in ("", decision) or because == said else f"{said} ({because})"

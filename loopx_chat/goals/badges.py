"""What the page and the CLI say about a goal, in one table: its badge, one sentence about
its run, and the confirmation after each thing the owner does.

Owns `BADGES` (code → the words on the badge, and who must act first), `RUN_SAYS` (a run's
state and Codex's goal status → its badge and sentence), `WHO` (who ended a run, in a
person's words) and `SAID` (the confirmation after each click or command). The page
(`service/page.py`) and `loopx-chat status` both call `run_says` and `goal_badge`, so the
two never tell two stories, and neither shows a code. Pure: facts in, words out; it never
reads state, and `--json` keeps the codes (`badge` is a code too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopx_chat.goals.words import humanize


@dataclass(frozen=True)
class Badge:
    code: str  # stable: `--json`, `data-badge`, the CSS class `badge-<code>`
    words: str  # what a person reads
    order: int  # who must act first: lower first


BADGES: Mapping[str, Badge] = {
    badge.code: badge
    for badge in (
        Badge("waiting", "Waiting on you", 0),
        Badge("done", "Done", 1),
        Badge("failed", "Failed", 2),
        Badge("blocked", "Blocked", 3),
        Badge("running", "Running", 4),
        Badge("ready", "Ready to go on", 5),
        Badge("paused", "Paused", 6),
        Badge("idle", "Nothing to do", 7),
        Badge("accepted", "Accepted", 8),
    )
}

# A goal without a run, by who must act on it (`service.page.actor_of`).
ACTOR_BADGES: Mapping[str, str] = {
    "owner": "waiting",
    "blocked": "blocked",
    "agent": "ready",
    "watching": "idle",
}


@dataclass(frozen=True)
class RunFacts:
    """What the badge and sentence of a goal's run are decided on."""

    # authorized | running | blocked | ended | closed (a run's own), or `not_ours` /
    # `not_ours_paused` (a loop Codex runs that loopx-chat did not start)
    state: str
    host_status: str | None = None  # Codex's goal status, when known
    followed: bool = True  # a process of ours follows the run now (for a live run)
    turns: int = 0
    tokens: int = 0
    budget: int | None = None
    who: str | None = None  # who ended or paused it (`ended_by`, an actor)
    reason: str | None = None


# (run state, Codex's goal status, or "*" for any) → (badge code, the sentence). The
# sentence's fields: {spent} (turns and tokens of the budget), {who}, {reason}.
RUN_SAYS: Mapping[tuple[str, str], tuple[str, str]] = {
    ("authorized", "*"): ("running", "Codex is starting on it ({spent})"),
    ("running", "*"): ("running", "Codex is working on it ({spent})"),
    ("blocked", "*"): ("waiting", "Codex waits for your decision ({spent})"),
    ("elsewhere", "*"): (
        "running",
        "Codex is working on it, followed by another loopx-chat process ({spent})",
    ),
    ("ended", "complete"): ("done", "Codex says it is done: check it, then Accept or Reopen"),
    ("ended", "budgetLimited"): (
        "waiting",
        "Its budget is spent ({spent}): Run again with more, or leave it",
    ),
    ("ended", "paused"): ("paused", "Paused by {who} ({spent}): Run goes on from here"),
    ("ended", "usageLimited"): (
        "paused",
        "Paused at the account's usage limit ({spent}): Run goes on once it resets",
    ),
    ("ended", "blocked"): ("waiting", "Codex says it cannot go on{reason}: answer it, then Run"),
    ("ended", "*"): ("failed", "The run stopped{reason} ({spent}): Run starts it again"),
    ("closed", "*"): ("accepted", "You accepted it: done"),
    ("not_ours", "*"): (
        "running",
        "Codex is running a goal loopx-chat did not start (no budget set here): Pause stops "
        "it, Run adopts it with a budget",
    ),
    ("not_ours_paused", "*"): (
        "paused",
        "Paused by {who}; Codex started it outside loopx-chat: Run adopts it with a budget",
    ),
}

# Who ended or paused a run (`ended_by`, an actor), in a person's words; others as written.
WHO: Mapping[str, str] = {
    "owner": "you",
    "owner (Pause)": "you (Pause)",
    "owner (Ctrl-C)": "you (Ctrl-C)",
    "owner-page": "you, on the page",
    "owner-cli": "you, from the terminal",
    "owner-api": "you",
    "host": "Codex",
    "a run that is no longer running": "its process, which is gone",
}

# The confirmation after each thing the owner does, on the page and in the terminal.
SAID: Mapping[str, str] = {
    "run": "Started: Codex works on the goal within its budget.",
    "pause": "Paused: Codex stops after the current turn.",
    "accept": "Accepted: the goal is done.",
    "reopen": "Reopened: Codex goes on with your note.",
    "gates": "Held: Codex waits for your decision.",
    "approve": "Approved: Codex goes on.",
    "reject": "Rejected: the goal stays stopped.",
    "decline": "Declined: Codex does not run it.",
    "cancel": "Cancelled: Codex is told no.",
    "answer": "Answered: Codex has your answer.",
    "amend": "Approved with your change: Codex goes on.",
}


def spent_words(facts: RunFacts) -> str:
    """`turn 2, 2,979 of 100,000 tokens, 3 %`, or the tokens alone without a budget."""
    turn = f"turn {facts.turns}, " if facts.turns else ""
    if not facts.budget:
        return f"{turn}{facts.tokens:,} tokens"
    return f"{turn}{facts.tokens:,} of {facts.budget:,} tokens, {budget_share(facts)} %"


def budget_share(facts: RunFacts) -> int:
    """How much of the budget is spent, in whole percent (0 without a budget). Not capped:
    a run may end past its budget by the one model response in flight, and the owner is
    told the share that was spent (the page's bar alone stops at full)."""
    if not facts.budget:
        return 0
    return facts.tokens * 100 // facts.budget


def _key(facts: RunFacts) -> tuple[str, str]:
    state = facts.state
    if state in ("authorized", "running") and not facts.followed:
        state = "elsewhere"
    for key in ((state, facts.host_status or ""), (state, "*")):
        if key in RUN_SAYS:
            return key
    return ("ended", "*")


DEVICE_ACTOR = "owner-device:"  # one of the owner's signed-in browsers, by its name


def who_words(actor: str | None) -> str:
    """An actor in a person's words: `WHO`, a device of the owner's as the page it signed
    in (`owner-device:laptop`: you, on the page (laptop)), others as written."""
    if actor and actor.startswith(DEVICE_ACTOR):
        return f"you, on the page ({actor[len(DEVICE_ACTOR) :]})"
    return WHO.get(actor or "", humanize(actor or "") or "someone outside loopx-chat")


def run_says(facts: RunFacts) -> tuple[Badge, str]:
    """The run's badge and its one sentence."""
    code, sentence = RUN_SAYS[_key(facts)]
    who = who_words(facts.who)
    reason = f": {humanize(facts.reason)}" if facts.reason else ""
    return BADGES[code], sentence.format(spent=spent_words(facts), who=who, reason=reason)


def row_actor(goal: Mapping[str, Any], owner_acts: bool) -> str:
    """Who must act on a goal's status row: `owner` (`owner_acts`: an open decision, a
    finished run to answer; or unreadable records, its own or a session's: `problems`),
    `agent` (it can go on now), `blocked` (its last turn was blocked, or it waits for
    evidence), else `watching`."""
    if owner_acts or goal.get("status") == "problem" or goal.get("problems"):
        return "owner"
    answers = goal.get("answers") or {}
    if str(answers.get("agent_can_continue", "")).startswith("yes"):
        return "agent"
    latest = str(answers.get("latest_run", ""))
    if latest.startswith("blocked") or goal.get("waiting_on") == "external_evidence":
        return "blocked"
    return "watching"


def goal_badge(actor: str, deciding: bool, run: RunFacts | None) -> Badge:
    """A goal's badge: a decision open before the owner (or records to repair) first,
    then its run's, else who must act on it (`ACTOR_BADGES`)."""
    if deciding:
        return BADGES["waiting"]
    if run is not None:
        return run_says(run)[0]
    return BADGES[ACTOR_BADGES.get(actor, "idle")]


def run_is_live(facts: RunFacts | None) -> bool:
    """Whether Codex works on the goal now (its host turn in progress is expected then)."""
    return facts is not None and facts.state in ("authorized", "running", "blocked", "not_ours")

"""The first screen: one card per goal, ordered by who must act. Pure: data in, bytes out.

Owns how the owner's page looks and reads: the order (who must act first, by the badge:
`goals/badges.py`, the one table of words the page and the CLI share; the oldest blocking
gate first), the badge and its run's sentence (with a budget bar while it runs), the
confirmation after every click (`badges.SAID`), the four answers in human words, the gates
a person can decide (Approve / Reject, each with its equivalent CLI command), what happens
next after a decision, and the script that keeps the page live through
`/api/status/events` (what the owner is typing into a gate survives a redraw, in the page's
memory only). Every value is HTML-escaped; the page loads only its own script
(`/assets/first-screen.js`) under a CSP that allows nothing else, and without JavaScript it
is a plain page that refreshes itself.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from loopx_chat.goals.badges import (
    BADGES,
    SAID,
    Badge,
    RunFacts,
    budget_share,
    goal_badge,
    row_actor,
    run_is_live,
    run_says,
)
from loopx_chat.goals.gate_store import TYPED_TEXT_LIMIT
from loopx_chat.goals.words import LONG_ID, humanize, quota_words, short_id
from loopx_chat.service.access import SCRIPT_PATH

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
REFRESH_SECONDS = 10  # the no-JavaScript page reloads itself this often


QUESTIONS = (
    ("waiting_on", "Who or what is it waiting on?"),
    ("agent_can_continue", "Can the agent continue now?"),
    ("gate_or_evidence_required", "What gate or evidence is required?"),
    ("latest_run", "What did the latest run validate or block?"),
)


@dataclass(frozen=True)
class GateView:
    gate_id: str
    question: str
    blocking: bool
    status: str
    created_at: str
    decision: str | None = None
    reason: str | None = None
    updated_at: str = ""
    html: str | None = None  # a host gate's own block (service/host_gates.py), escaped there


@dataclass(frozen=True)
class GoalActions:
    """What the owner can see and do for one goal, beside its status row."""

    gates: tuple[GateView, ...] = ()
    next_action: str | None = None  # the newest handoff packet's next action
    proposals: tuple[str, ...] = ()  # titles of advisory dreaming proposals
    blockers: tuple[str, ...] = field(default=())  # ids of the blockers this card shows
    notes: tuple[str, ...] = ()  # service notes, e.g. a notice that could not be sent
    run: RunView | None = None  # the goal's latest run on Codex's own loop


@dataclass(frozen=True)
class RunView:
    """A goal run as the card shows it: Run or Pause, its badge and one sentence."""

    run_id: str
    state: str
    host_status: str | None
    running_here: bool
    words: str
    facts: RunFacts | None = None

    @property
    def badge(self) -> Badge | None:
        return run_says(self.facts)[0] if self.facts is not None else None


def run_view(
    run: Any,
    running_here: bool,
    turns: int = 0,
    tokens: int = 0,
    *,
    host_loop_seen_at: str | None = None,
    host_loop_paused: Mapping[str, Any] | None = None,
) -> RunView | None:
    """The card's view of a `GoalRun` (None: the goal never ran on Codex's loop); `turns`
    and `tokens` are what the ledger recorded of the run so far. A loop loopx-chat saw and
    did not start, newer than the run, is said as such (Pause stops it, Run adopts it with
    a budget), and so is the owner's Pause of it (`host_loop_paused`: who, when)."""
    if host_loop_seen_at is not None and (run is None or host_loop_seen_at > run.authorized_at):
        paused_at = str(host_loop_paused["at"]) if host_loop_paused else ""
        if paused_at >= host_loop_seen_at:
            assert host_loop_paused is not None
            facts = RunFacts("not_ours_paused", "paused", who=str(host_loop_paused["actor"]))
            return RunView("", "not_ours_paused", "paused", False, run_says(facts)[1], facts)
        facts = RunFacts("not_ours", "active")
        return RunView("", "not_ours", "active", False, run_says(facts)[1], facts)
    if run is None:
        return None
    facts = RunFacts(
        run.state,
        run.host_status,
        followed=running_here,
        turns=turns,
        tokens=tokens if running_here else run.tokens_used,
        budget=run.token_budget,
        who=run.ended_by,
        reason=run.reason,
    )
    words = run_says(facts)[1]
    return RunView(run.run_id, run.state, run.host_status, running_here, words, facts)


def _run_waits_on_owner(run: RunView | None) -> bool:
    """A finished run the owner must answer: done (Accept or Reopen), or its budget spent."""
    return (
        run is not None
        and run.state == "ended"
        and run.host_status in ("complete", "budgetLimited")
    )


def actor_of(goal: Mapping[str, Any], actions: GoalActions) -> str:
    """Who must act on the goal (`badges.row_actor`): the owner when a blocking gate is
    open or a finished run waits for an answer."""
    deciding = any(g.blocking and g.status == "pending" for g in actions.gates)
    return row_actor(goal, deciding or _run_waits_on_owner(actions.run))


def _oldest_blocking(actions: GoalActions) -> str:
    pending = [g.created_at for g in actions.gates if g.blocking and g.status == "pending"]
    return min(pending) if pending else "~"


def badge_of(goal: Mapping[str, Any], actions: GoalActions) -> Badge:
    """The card's badge (`goals/badges.py`): an open decision or unreadable records first,
    then the goal's run, else who must act on it."""
    deciding = (
        goal.get("status") == "problem"
        or bool(goal.get("problems"))
        or any(g.blocking and g.status == "pending" for g in actions.gates)
    )
    run = actions.run.facts if actions.run is not None else None
    return goal_badge(actor_of(goal, actions), deciding, run)


def ordered(
    goals: Sequence[Mapping[str, Any]], actions: Mapping[str, GoalActions]
) -> list[Mapping[str, Any]]:
    """Who must act first, by the badge's order (Waiting on you first, the oldest blocking
    gate first among them)."""

    def key(goal: Mapping[str, Any]) -> tuple[int, str, str]:
        acts = actions.get(str(goal.get("goal_id")), GoalActions())
        return (badge_of(goal, acts).order, _oldest_blocking(acts), str(goal.get("goal_id")))

    return sorted(goals, key=key)


def _text(value: object, *, words: bool = True) -> str:
    """Escaped, codes in words, long ids shortened with the full id on hover."""
    escaped = escape(humanize(str(value)) if words else str(value))
    return LONG_ID.sub(
        lambda m: f'<span class="id" title="{m.group(0)}">{short_id(m.group(0))}</span>', escaped
    )


def _cli(*words: str) -> str:
    return escape(" ".join(shlex.quote(w) for w in ("loopx-chat", *words)))


def _resolve_cli(goal_id: str, gate_id: str) -> str:
    return _cli("gate", "resolve", gate_id, "--goal", goal_id, "--decision", "approve")


def _handoff_cli(goal_id: str) -> str:
    return _cli(
        "handoff", "record", "--goal", goal_id, "--next-action", "…", "--stop-condition", "…"
    )


def _gate(goal_id: str, gate: GateView) -> str:
    if gate.html is not None:
        return gate.html
    kind = "blocking" if gate.blocking else "advisory"
    gid = escape(gate.gate_id)
    return (
        f'<div class="gate" data-gate="{gid}"><p class="question">{_text(gate.question)}</p>'
        f'<p class="meta">{kind} gate <span class="id" title="{gid}">'
        f"{escape(short_id(gate.gate_id))}</span> · asked {escape(gate.created_at)}</p>"
        f'<div class="decide"><input class="reason" type="text" '
        f'maxlength="{TYPED_TEXT_LIMIT}" '
        f'placeholder="reason (optional)" aria-label="reason for {gid}">'
        f'<button class="approve" data-decision="approve">Approve</button>'
        f'<button class="reject" data-decision="reject">Reject</button></div>'
        f'<p class="cli">or: <code>{_resolve_cli(goal_id, gate.gate_id)}</code></p></div>'
    )


# What happens next for a goal whose run stopped (by its badge), when no gate is open.
RUN_NEXT: Mapping[str, str] = {
    "paused": "Paused: Run goes on from where it stopped.",
    "failed": "The run stopped before Codex said it was done: Run starts it again.",
    "accepted": "Done and accepted. Run starts a new run if there is more to do.",
    "running": "Codex is working on it in another loopx-chat process.",
}


def next_step(goal: Mapping[str, Any], actions: GoalActions, actor: str) -> str:
    """What happens next, in words: no card ends without a way forward."""
    goal_id = str(goal.get("goal_id", ""))
    pending = [g for g in actions.gates if g.status == "pending" and g.blocking]
    decided = sorted(
        (g for g in actions.gates if g.status != "pending"), key=lambda g: g.updated_at
    )
    if goal.get("status") == "problem":
        return "Its records could not be read: repair or move the file named in the CLI."
    if goal.get("problems"):
        return (
            "A record of this goal cannot be read, so the agent waits: "
            + _text(goal["problems"][0].get("what_to_do", ""), words=False)
            + "; this card then shows the goal as it is."
        )
    if pending:
        return "Your decision above lets the agent go on (or keeps it stopped)."
    if _run_waits_on_owner(actions.run):
        assert actions.run is not None
        if actions.run.host_status == "complete":
            return "Codex says it is done: check it, then Accept, or Reopen with what is missing."
        return "Its budget is spent: Run again with more, or leave it."
    if actions.run is not None and actions.run.running_here:
        return "Codex is working on it on its own loop; Pause stops it after the current turn."
    if actions.run is not None and actions.run.badge is not None:
        code = actions.run.badge.code
        if code in RUN_NEXT:
            return RUN_NEXT[code]
    if decided and decided[-1].status == "rejected":
        return (
            "Rejected: the goal stays stopped until a new gate is approved or a handoff "
            f"records another next step (<code>{_handoff_cli(goal_id)}</code>)."
        )
    if actions.next_action and actor == "agent":
        return f"The agent may continue with: {_text(actions.next_action)}"
    if decided and decided[-1].status == "approved":
        if actions.next_action:
            return f"Approved: the agent may continue with: {_text(actions.next_action)}"
        return (
            "Approved, but nothing is queued for the agent: record the next step "
            f"(<code>{_handoff_cli(goal_id)}</code>)."
        )
    if actor == "blocked":
        return "The last run was blocked: new evidence or a handoff with another approach moves it."
    if actor == "agent":
        return "The agent can take its next step on its own."
    return (
        "Nothing is pending. Run lets Codex work on it; or ask a question first "
        f"(<code>{_cli('gate', 'request', '--goal', goal_id, '--question', '…')}</code>)."
    )


def _card(goal: Mapping[str, Any], actions: GoalActions) -> str:
    goal_id = str(goal.get("goal_id", ""))
    actor = actor_of(goal, actions)
    answers = goal.get("answers", {})
    rows = "".join(
        f'<dt>{escape(question)}</dt><dd data-q="{escape(key)}">'
        + _text(answers.get(key, ""))
        + "</dd>"
        for key, question in QUESTIONS
    )
    state = goal.get("goal_state") or {}
    if state.get("objective"):
        rows = f'<dt>Objective</dt><dd data-q="objective">{_text(state["objective"])}</dd>' + rows
    quota = goal.get("quota") or {}
    if quota.get("decision"):
        words = quota_words(str(quota["decision"]), str(quota.get("reason_code", "")))
        rows += f'<dt>Next automatic turn</dt><dd data-q="quota">{_text(words, words=False)}</dd>'
    host = goal.get("host") or {}
    live = run_is_live(actions.run.facts if actions.run is not None else None)
    if (host.get("stale") or goal.get("reconcile_reason")) and not live:
        # While Codex works on the goal, its turn in progress is expected, not a disagreement.
        ahead = host.get("behind_turns", 0)
        behind = f"Codex is {ahead} turn(s) ahead" if host.get("stale") else ""
        reason = str(goal.get("reconcile_reason") or "")
        rows += (
            "<dt>Codex and these records differ</dt>"
            f'<dd data-q="reconcile">{_text(", ".join(x for x in (behind, reason) if x))}</dd>'
        )
    open_gates = [g for g in actions.gates if g.status == "pending"]
    gates = _problems(goal.get("problems") or ())
    gates += "".join(_gate(goal_id, g) for g in open_gates if g.blocking)
    extra = [f"<li>advisory gate: {_text(g.question)}</li>" for g in open_gates if not g.blocking]
    if actions.next_action:
        extra.append(f"<li>handoff: {_text(actions.next_action)}</li>")
    extra += [f"<li>dreaming proposal (advisory): {_text(t)}</li>" for t in actions.proposals]
    extra += [f'<li class="note">{_text(n, words=False)}</li>' for n in actions.notes]
    aside = f'<ul class="also">{"".join(extra)}</ul>' if extra else ""
    aside += _run_bar(actions.run)
    badge = badge_of(goal, actions)
    return (
        f'<section class="card actor-{actor} card-{badge.code}" data-goal="{escape(goal_id)}" '
        f'data-actor="{actor}" data-badge="{badge.code}" '
        f'data-blockers="{escape(" ".join(actions.blockers))}">'
        f'<h2><span>{escape(goal_id)}</span><span class="badge badge-{badge.code}">'
        f"{escape(badge.words)}</span></h2>{gates}<dl>{rows}</dl>{aside}"
        f'<p class="next" data-q="next">{next_step(goal, actions, actor)}</p></section>'
    )


def _problems(problems: Sequence[Mapping[str, Any]]) -> str:
    """Records that cannot be read, each with what the owner can do about it."""
    return "".join(
        f'<div class="gate problem" data-problem="{escape(str(p.get("error_code", "")))}">'
        f'<p class="question">{_text(p.get("problem", ""), words=False)}</p>'
        f'<p class="meta">What to do: {_text(p.get("what_to_do", ""), words=False)}</p></div>'
        for p in problems
    )


def _run_bar(run: RunView | None) -> str:
    """Run (Codex works on the goal on its own loop, with the goal_state's budget) or Pause
    (the run this service follows); the owner's page token goes with either."""
    if run is not None and run.running_here:
        # Hold: a gate on the running goal; the service blocks Codex's loop before it answers.
        button = (
            '<button class="pause" data-run="pause">Pause</button>'
            f'<input class="hold" maxlength="{TYPED_TEXT_LIMIT}" '
            'placeholder="what must be decided first" aria-label="question to decide">'
            '<button class="reject" data-run="gates">Hold for a decision</button>'
        )
    elif run is not None and run.state == "not_ours":
        # Codex runs a goal nobody here started: the owner may pause it, or adopt it.
        button = (
            '<button class="pause" data-run="pause">Pause</button>'
            '<button class="run" data-run="run">Run</button>'
        )
    elif run is not None and run.state == "ended" and run.host_status == "complete":
        # Codex says it is done: the owner accepts it, or reopens it with a note.
        button = (
            '<button class="approve" data-run="accept">Accept</button>'
            '<input class="note" placeholder="what is still missing" maxlength="280">'
            '<button class="reject" data-run="reopen">Reopen</button>'
        )
    else:
        button = '<button class="run" data-run="run">Run</button>'
    words = f'<span class="run-words">{_text(run.words)}</span>' if run else ""
    return f'<div class="runbar" data-q="run">{button} {words}{_budget_bar(run)}</div>'


def _budget_bar(run: RunView | None) -> str:
    """While Codex works on the goal: how much of its budget is spent, as a bar."""
    facts = run.facts if run is not None else None
    if facts is None or not facts.budget or not run_is_live(facts):
        return ""
    share = budget_share(facts)
    return (
        f'<progress class="budget" max="100" value="{min(share, 100)}" '
        f'aria-label="{share} % of the token budget spent"></progress>'
    )


def render_cards(status: Mapping[str, Any], actions: Mapping[str, GoalActions]) -> str:
    goals = ordered(status.get("attention_queue", []), actions)
    unreadable = status.get("unreadable_records") or ()
    # A record no goal can claim still shows: nothing the owner must act on vanishes.
    orphans = (
        '<section class="card actor-owner card-waiting" data-goal="" data-actor="owner" '
        'data-badge="waiting"><h2><span>Records of no known goal</span>'
        f'<span class="badge badge-waiting">{escape(BADGES["waiting"].words)}</span>'
        f"</h2>{_problems(unreadable)}</section>"
        if unreadable
        else ""
    )
    if not goals:
        return orphans + (
            '<p class="empty">No goals yet. Open a session with <code>loopx-chat chat new'
            "</code> or ask a question with <code>loopx-chat gate request</code>.</p>"
        )
    return orphans + "".join(
        _card(g, actions.get(str(g.get("goal_id")), GoalActions())) for g in goals
    )


_STYLE = """
body{font:15px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",sans-serif;margin:0;
background:#f5f5f7;color:#1d1d1f}
header{padding:16px 28px;background:#fff;border-bottom:1px solid #ddd;display:flex;
justify-content:space-between;align-items:baseline;gap:12px;flex-wrap:wrap}
h1{font-size:20px;margin:0}header p{margin:0;color:#555;font-size:13px}
#live{font-size:13px;color:#555}#live.lost{color:#a40000;font-weight:600}
main{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(360px,100%),1fr));
gap:16px;padding:24px 28px}
.card{background:#fff;border-radius:10px;padding:16px 18px;border:1px solid #ddd;
border-left-width:6px;min-width:0;overflow-wrap:anywhere}.card.focus{outline:3px solid #0a60d0}
.card h2{font-size:16px;margin:0 0 10px;display:flex;justify-content:space-between;gap:8px}
.badge{font-size:12px;padding:2px 10px;border-radius:10px;font-weight:600;white-space:nowrap}
.card-waiting{border-left-color:#c9302c}.badge-waiting{background:#c9302c;color:#fff}
.card-done{border-left-color:#1f6fb2}.badge-done{background:#1f6fb2;color:#fff}
.card-failed{border-left-color:#7a1712}.badge-failed{background:#7a1712;color:#fff}
.card-blocked{border-left-color:#d98a00}.badge-blocked{background:#ffe2a8;color:#5a3b00}
.card-running{border-left-color:#2e7d32}.badge-running{background:#2e7d32;color:#fff}
.card-ready{border-left-color:#2e7d32}.badge-ready{background:#d6f0d8;color:#1b4d1e}
.card-paused{border-left-color:#8a8a8e}.badge-paused{background:#e8e8ed;color:#333}
.card-idle{border-left-color:#c7c7cc}.badge-idle{background:#f2f2f5;color:#555}
.card-accepted{border-left-color:#1b4d1e}.badge-accepted{background:#d6f0d8;color:#1b4d1e}
progress.budget{display:block;width:100%;height:8px;margin-top:6px}
#said{font-size:13px;color:#1b4d1e;font-weight:600}#said.failed{color:#a40000}
.gate{background:#fff6f5;border:1px solid #f1c2bf;border-radius:8px;padding:8px 10px;
margin:0 0 10px}.gate .question{margin:0;font-weight:600}.meta,.cli{font-size:12px;
color:#555;margin:4px 0}.decide{display:flex;gap:6px;margin-top:6px}.reason{flex:1;
font:inherit;padding:3px 6px}button{font:inherit;padding:3px 12px;border-radius:6px;
border:1px solid #999;background:#fff;cursor:pointer}.approve{border-color:#2e7d32}
.reject{border-color:#c9302c}
.runbar{margin:10px 0 0;font-size:13px;color:#444}
.id{font-family:ui-monospace,Menlo,monospace;font-size:12px}
dl{margin:0}dt{font-size:12px;color:#666;margin-top:8px}dd{margin:2px 0 0}
.also{margin:10px 0 0;padding-left:18px;font-size:13px;color:#444}
.next{margin:10px 0 0;padding-top:8px;border-top:1px solid #eee;font-size:14px}
.empty{padding:24px 28px;color:#666}code{font-size:12px}
.live.command{white-space:pre-wrap;word-break:break-all;background:#f3f3f6;padding:6px;
border-radius:6px;font-size:12px}.decide.amend button{font-size:12px}.note{color:#a40000}
button.armed{background:#0a60d0;color:#fff;border-color:#0a60d0}
.decide-only button[data-run=run],.decide-only button[data-run=reopen],.decide-only .runbar .note{
display:none}
#pairing{flex-basis:100%}#pair-panel p{margin:6px 0}#pair-qr svg{display:block}
#pair-url{word-break:break-all}
@media (max-width:600px){
header{padding:10px 14px}h1{font-size:18px}
main{grid-template-columns:minmax(0,1fr);gap:10px;padding:10px}
.card{padding:12px;border-left-width:5px}.card h2{flex-wrap:wrap}
.actor-owner dl,.cli{display:none}
.decide,.runbar{display:flex;flex-wrap:wrap;gap:8px}
.decide button,.runbar button{flex:1 1 40%;min-height:48px;font-size:16px}
.reason,.hold,.runbar .note,.answer{flex:1 1 100%;min-width:0;font-size:16px;padding:8px}
.runbar .run-words,.runbar progress.budget{flex:1 1 100%}
}
"""


# "Pair a phone": shown by the script only on the desk's browser (`/api/page` says
# `may_pair`); the code it asks for (POST /api/auth/pair) lives in this box until it expires
# or is hidden, and nowhere else (never in the cards, never stored).
_PAIRING = (
    '<div id="pairing" hidden><button type="button" id="pair-open">Pair a phone</button>'
    '<div id="pair-panel" hidden><p><input id="pair-name" maxlength="40" autocomplete="off" '
    'placeholder="its name, e.g. phone" aria-label="device name"> <label><input '
    'type="checkbox" id="pair-full"> may also start turns and runs</label> <button '
    'type="button" id="pair-make">Show a pairing code</button> <button type="button" '
    'id="pair-hide">Hide</button></p><div id="pair-qr"></div><p><code id="pair-url"></code>'
    '</p><p id="pair-words" class="meta"></p></div></div>'
)


def render_shell() -> bytes:
    """The page without data (anyone may fetch it): its script signs the browser in or
    loads the cards through signed calls. Without JavaScript it says how to get in."""
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        "<title>loopx-chat: first screen</title>"
        f"<style>{_STYLE}</style></head><body><header><h1>loopx-chat</h1>"
        '<p id="about"></p><p id="said" role="status" aria-live="polite" '
        f'data-said="{escape(json.dumps(SAID))}"></p><p id="live">signing in…</p>'
        f"{_PAIRING}</header>"
        '<main><p class="empty" id="signin">This page belongs to the user who runs loopx-chat. '
        "In their terminal, <code>loopx-chat open</code> signs this browser in with a one-time "
        "code.</p></main>"
        f'<script src="{SCRIPT_PATH}"></script></body></html>'
    )
    return html.encode("utf-8")


PAGE_SHELL = render_shell()


# The page's only script: live cards from the event stream, gate decisions, and telling the
# service which blockers a browser really rendered (the sixth metric).
PAGE_SCRIPT = r"""
"use strict";
(function () {
  // The browser's credential is a WebCrypto HMAC key it cannot read out (extractable:
  // false), kept in IndexedDB of this origin with the device id. Every call is signed; the
  // service first proves it knows the key, so a squatter on this port is sent nothing.
  const live = document.getElementById("live");
  const about = document.getElementById("about");
  // What the owner did, said after every click in the words of `goals/badges.SAID` (fixed
  // words, the same the CLI prints; no data). The one place a decision's outcome is said.
  const said = document.getElementById("said");
  const saidWords = JSON.parse(said.dataset.said);
  function say(what, doc) {
    said.classList.toggle("failed", !doc.ok);
    said.textContent = doc.ok ? (saidWords[what] || "Done.") : "Not done: " + doc.error;
  }
  const main = document.querySelector("main");
  const enc = new TextEncoder();
  let cred = null;
  let offset = 0;  // the service's clock minus ours (a phone's clock may be off)
  let runId = "";  // this run of the service, as its proof names it
  function b64url(bytes) {
    let s = "";
    bytes.forEach(function (b) { s += String.fromCharCode(b); });
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function unb64url(text) {
    const s = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
    return Uint8Array.from(s, function (c) { return c.charCodeAt(0); });
  }
  function db() {
    return new Promise(function (resolve, reject) {
      const req = indexedDB.open("loopx-chat", 1);
      req.onupgradeneeded = function () { req.result.createObjectStore("credential"); };
      req.onsuccess = function () { resolve(req.result); };
      req.onerror = function () { reject(req.error); };
    });
  }
  function stored(value) {
    return db().then(function (d) {
      return new Promise(function (resolve, reject) {
        const tx = d.transaction("credential", value === undefined ? "readonly" : "readwrite");
        const store = tx.objectStore("credential");
        const req = value === undefined ? store.get("device") :
          (value === null ? store.delete("device") : store.put(value, "device"));
        req.onsuccess = function () { resolve(req.result); };
        req.onerror = function () { reject(req.error); };
      });
    });
  }
  function signedOut(why) {
    cred = null;
    document.getElementById("pairing").hidden = true;
    document.getElementById("pair-panel").hidden = true;
    live.classList.add("lost");
    live.textContent = why;
    main.innerHTML = '<p class="empty">This browser is not signed in. In the owner\'s ' +
      "terminal, <code>loopx-chat open</code> signs it in with a one-time code.</p>";
  }
  async function headersFor(method, target, body) {
    const time = String(Date.now() + offset);
    const nonce = b64url(crypto.getRandomValues(new Uint8Array(16)));
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(body)));
    const text = ["loopx-v1", runId, method, target, time, nonce, b64url(digest)].join("\n");
    const sig = new Uint8Array(await crypto.subtle.sign("HMAC", cred.key, enc.encode(text)));
    return {"X-Loopx-Device": cred.id, "X-Loopx-Time": time, "X-Loopx-Nonce": nonce,
            "X-Loopx-Signature": b64url(sig)};
  }
  async function call(method, target, doc) {
    const body = doc === undefined ? "" : JSON.stringify(doc);
    const headers = await headersFor(method, target, body);
    if (body) { headers["Content-Type"] = "application/json"; }
    const response = await fetch(target, {method: method, headers: headers,
      body: body || undefined, cache: "no-store", credentials: "omit"});
    if (response.status === 401) { signedOut("signed out: this browser's sign-in was revoked"); }
    return response;
  }
  async function prove() {
    const challenge = b64url(crypto.getRandomValues(new Uint8Array(24)));
    const response = await fetch("/api/auth/prove", {method: "POST", credentials: "omit",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({device_id: cred.id, challenge: challenge})});
    if (response.status === 401) {
      signedOut("signed out: this browser's sign-in was revoked");
      throw new Error("revoked");
    }
    const doc = await response.json();
    const good = doc.ok && await crypto.subtle.verify("HMAC", cred.key, unb64url(doc.proof),
      enc.encode("loopx-server-v1\n" + challenge + "\n" + doc.run_id));
    if (!good) { throw new Error("unproven"); }
    offset = doc.server_time_ms - Date.now();
    runId = doc.run_id;
  }
  async function signIn(code) {
    history.replaceState(null, "", "/");  // the spent code leaves the address bar
    const response = await fetch("/api/auth/login", {method: "POST", credentials: "omit",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({code: code})});
    const doc = await response.json();
    if (!doc.ok) { signedOut("not signed in: " + doc.error); return false; }
    const key = await crypto.subtle.importKey("raw", unb64url(doc.key),
      {name: "HMAC", hash: "SHA-256"}, false, ["sign", "verify"]);
    cred = {id: doc.device_id, name: doc.name, key: key};
    await stored(cred);
    return true;
  }
  function stamp(text) { live.classList.remove("lost"); live.textContent = "updated " + text; }
  function reportShown() {
    const shown = {};
    main.querySelectorAll("section.card[data-blockers]").forEach(function (card) {
      const refs = card.dataset.blockers.split(" ").filter(Boolean);
      if (refs.length) { shown[card.dataset.goal] = refs; }
    });
    if (Object.keys(shown).length && cred) {
      call("POST", "/api/status/rendered", {shown: shown}).catch(function () {});
    }
  }
  // What the owner is typing into a gate (an answer, a field, a reason) or a card's run bar
  // (a hold question, a reopen note) survives the cards being drawn again (a running goal's
  // card is drawn at each change): kept by gate and question id, or by goal, in this page's
  // memory only.
  const TYPED = "[data-gate] input, [data-gate] select, .runbar input";
  function typedKey(field) {
    const gate = field.closest("[data-gate]");
    if (gate) { return gate.dataset.gate + " " + (field.dataset.qid || field.className); }
    const card = field.closest("section.card");
    return card ? "run " + card.dataset.goal + " " + field.className : null;
  }
  let header = null;  // the words of /api/page; the goal count follows every redraw
  function show(doc) {
    if (header) {
      // Finished goals step aside: counted here, never drawn as cards.
      const shelved = doc.archived_count ?
        " · " + doc.archived_count + " finished goal(s) archived" : "";
      about.textContent = doc.goal_count + " goal(s)" + shelved + " · Codex home from " +
        header.codex_home_source + " · version " + header.version + " · this browser: " +
        header.device;
    }
    const typed = {};
    main.querySelectorAll(TYPED).forEach(function (f) {
      const key = typedKey(f);
      if (key && f.value) { typed[key] = f.value; }
    });
    // The field being typed into keeps the focus: keys pressed after a redraw go on landing
    // in it, not on the page.
    const active = document.activeElement;
    const focusKey = active && main.contains(active) && active.matches(TYPED) ?
      typedKey(active) : null;
    main.innerHTML = doc.cards_html;
    main.querySelectorAll(TYPED).forEach(function (f) {
      const key = typedKey(f);
      if (key && typed[key] !== undefined && !f.value) { f.value = typed[key]; }
      if (focusKey && key === focusKey) { f.focus(); }
    });
    rearm();
    focusLinked();
    stamp(new Date().toLocaleTimeString());
    requestAnimationFrame(reportShown);
  }
  // A notice's link names a gate in the fragment (`#gate=GOAL/GATE`, never sent to the
  // service): its card is brought into view. A link only shows; it never decides.
  let focused = "";
  function focusLinked() {
    const want = new URLSearchParams(location.hash.slice(1));
    const gate = want.get("gate") || "";
    const goal = gate ? gate.split("/")[0] : (want.get("goal") || "");
    if (!goal) { return; }
    const card = Array.from(main.querySelectorAll("section.card"))
      .find(function (c) { return c.dataset.goal === goal; });
    if (!card) { return; }
    // Marked again after every redraw of the cards; scrolled to once per link.
    card.classList.add("focus");
    if (focused === location.hash) { return; }
    focused = location.hash;
    card.scrollIntoView({block: "start"});
  }
  window.addEventListener("hashchange", focusLinked);
  // On a phone each decision takes a second tap on the same button within 5 s (a thumb
  // brushing the screen decides nothing); the armed button survives a redraw of the cards.
  const phone = window.matchMedia("(max-width: 600px)");
  let armed = null;
  function buttonKey(button) {
    const where = button.closest("[data-gate]") || button.closest("section.card");
    return (where ? (where.dataset.gate || where.dataset.goal) : "") + " " +
      (button.dataset.decision || button.dataset.run || "") + " " +
      (button.dataset.forSession || "") + (button.dataset.answer || "");
  }
  function rearm() {
    if (!armed || Date.now() > armed.until) { armed = null; return; }
    main.querySelectorAll("button[data-decision], button[data-run]").forEach(function (b) {
      if (buttonKey(b) === armed.key) { arm(b, armed.until); }
    });
  }
  function arm(button, until) {
    if (!button.dataset.label) { button.dataset.label = button.textContent; }
    button.classList.add("armed");
    button.textContent = "Tap again: " + button.dataset.label;
    armed = {key: buttonKey(button), until: until};
  }
  function confirmed(button) {
    if (!phone.matches) { return true; }
    if (armed && armed.key === buttonKey(button) && Date.now() <= armed.until) {
      armed = null;
      return true;
    }
    main.querySelectorAll("button.armed").forEach(function (b) {
      b.classList.remove("armed");
      b.textContent = b.dataset.label || b.textContent;
    });
    arm(button, Date.now() + 5000);
    setTimeout(function () {
      if (button.classList.contains("armed") && (!armed || Date.now() > armed.until)) {
        button.classList.remove("armed");
        button.textContent = button.dataset.label;
      }
    }, 5100);
    return false;
  }
  // Every click's request: its outcome is said (`say`), then the cards are drawn again or
  // the click's own place says why not.
  function post(target, body, what, onFail) {
    call("POST", target, body).then(function (r) { return r.json(); }).then(function (doc) {
      say(what, doc);
      if (doc.ok) { show(doc); } else { onFail(doc.error); }
    }).catch(function () {
      const doc = {ok: false, error: "the service did not answer"};
      say(what, doc);
      onFail(doc.error);
    });
  }
  main.addEventListener("click", function (event) {
    const run = event.target.closest("button[data-run]");
    if (run) {
      if (!confirmed(run)) { return; }
      const card = run.closest("section.card");
      const note = card.querySelector(".runbar .note");
      const hold = card.querySelector(".runbar .hold");
      let body = run.dataset.run === "reopen" ? {note: note ? note.value.trim() : ""} : {};
      if (run.dataset.run === "gates") {
        body = {question: hold ? hold.value.trim() : "", actor: "owner"};
      }
      // Sent: the text is not kept for the cards drawn next.
      [note, hold].forEach(function (f) { if (f) { f.value = ""; } });
      run.disabled = true;
      post("/api/goals/" + encodeURIComponent(card.dataset.goal) + "/" + run.dataset.run,
        body, run.dataset.run, function (error) {
          run.disabled = false;
          const what = run.dataset.run === "gates" ? "not recorded: " : "not started: ";
          card.querySelector(".runbar").textContent = what + error;
        });
      return;
    }
    const fill = event.target.closest("button[data-fill]");
    if (fill) {
      const field = fill.closest(".q").querySelector(".answer");
      field.value = fill.dataset.fill;
      return;
    }
    const button = event.target.closest("button[data-decision]");
    if (!button) { return; }
    if (!confirmed(button)) { return; }
    const gate = button.closest("[data-gate]");
    const card = button.closest("section.card");
    const reasonField = gate.querySelector(".reason");
    const reason = reasonField ? reasonField.value.trim() : "";
    const body = {decision: button.dataset.decision, reason: reason || null};
    if (button.dataset.forSession) { body.for_session = true; }
    const typed = gate.querySelector(".answer");
    const each = gate.querySelectorAll(".answer[data-qid]");
    if (button.dataset.answer !== undefined) { body.answer = button.dataset.answer; }
    else if (each.length && body.decision === "answer") {
      body.answers = {};
      each.forEach(function (f) { if (f.value) { body.answers[f.dataset.qid] = f.value; } });
    }
    else if (typed && body.decision === "answer") { body.answer = typed.value; }
    button.disabled = true;
    post("/api/goals/" + encodeURIComponent(card.dataset.goal) + "/gates/" +
         encodeURIComponent(gate.dataset.gate) + "/decision", body, body.decision,
      function (error) {
        button.disabled = false;
        gate.querySelector(".meta").textContent = "not recorded: " + error;
      });
  });
  // The cards' event stream, read through fetch so that it can be signed (an EventSource
  // cannot send headers). Lost: prove the service again before anything else is signed.
  async function follow() {
    const response = await call("GET", "/api/status/events");
    if (!response.ok || !response.body) { throw new Error("stream refused"); }
    const reader = response.body.getReader();
    const dec = new TextDecoder();
    let buffer = "";
    for (;;) {
      const part = await reader.read();
      if (part.done) { throw new Error("stream ended"); }
      buffer += dec.decode(part.value, {stream: true});
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split("\n").filter(function (l) { return l.startsWith("data:"); })
          .map(function (l) { return l.slice(5).trim(); }).join("\n");
        if (data) {
          const doc = JSON.parse(data);
          if (doc.type === "cards") { show(doc); }
        }
      }
    }
  }
  // "Pair a phone" (the desk's browser only): a pairing code as `loopx-chat pair` makes it,
  // its QR code drawn by the service; kept in this box until it expires or is hidden.
  const pairing = document.getElementById("pairing");
  const pairPanel = document.getElementById("pair-panel");
  const pairQr = document.getElementById("pair-qr");
  const pairUrl = document.getElementById("pair-url");
  const pairWords = document.getElementById("pair-words");
  let pairTimer = null;
  function pairClear() {
    pairQr.textContent = "";
    pairUrl.textContent = "";
    pairWords.textContent = "";
    if (pairTimer) { clearTimeout(pairTimer); pairTimer = null; }
  }
  document.getElementById("pair-open").addEventListener("click", function () {
    pairPanel.hidden = false;
  });
  document.getElementById("pair-hide").addEventListener("click", function () {
    pairClear();
    pairPanel.hidden = true;
  });
  document.getElementById("pair-make").addEventListener("click", function () {
    pairClear();
    const name = document.getElementById("pair-name").value.trim();
    const full = document.getElementById("pair-full").checked;
    call("POST", "/api/auth/pair", {name: name || null, full: full})
      .then(function (r) { return r.json(); }).then(function (doc) {
        if (!doc.ok) { pairWords.textContent = "No code: " + doc.error; return; }
        const svg = new DOMParser().parseFromString(doc.qr_svg, "image/svg+xml")
          .documentElement;
        pairQr.appendChild(document.importNode(svg, true));
        pairUrl.textContent = doc.url;
        pairWords.textContent = "Scan it with the phone's camera. It works once, for " +
          (doc.name || "a device named by the service") + " (" +
          (doc.full ? "full" : "decide, hold and pause only") + "), until " +
          new Date(Date.now() + doc.expires_in_sec * 1000).toLocaleTimeString() + ".";
        pairTimer = setTimeout(function () {
          pairClear();
          pairWords.textContent = "That code expired.";
        }, doc.expires_in_sec * 1000);
      }).catch(function () { pairWords.textContent = "No code: the service did not answer"; });
  });
  async function start() {
    const code = new URLSearchParams(location.hash.slice(1)).get("code");
    if (code) {
      if (!(await signIn(code))) { return; }
    } else {
      cred = await stored();
      if (!cred) { signedOut("not signed in"); return; }
    }
    for (;;) {
      if (!cred) { return; }
      try {
        await prove();
        const response = await call("GET", "/api/page");
        if (!response.ok) { if (cred) { throw new Error("refused"); } return; }
        const doc = await response.json();
        header = doc;
        document.body.classList.toggle("decide-only", doc.full === false);
        pairing.hidden = doc.may_pair !== true;
        show(doc);
        await follow();
      } catch (e) {
        if (!cred) { return; }
        live.classList.add("lost");
        live.textContent = "connection lost, retrying";
        await new Promise(function (r) { setTimeout(r, 2000); });
      }
    }
  }
  start().catch(function () { signedOut("this browser cannot keep a sign-in here"); });
})();
"""

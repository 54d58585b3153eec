"""The first screen as one server-rendered HTML page. Pure: status document in, bytes out.

One card per goal answering the spec's four questions. Every value is HTML-escaped, and the
page has no external assets, no scripts and a CSP that forbids loading any.
"""

from __future__ import annotations

from html import escape
from typing import Any

from loopx_chat import __version__

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_STYLE = """
body{font:15px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",sans-serif;margin:0;
background:#f5f5f7;color:#1d1d1f}
header{padding:20px 28px;background:#fff;border-bottom:1px solid #ddd}
h1{font-size:20px;margin:0}
header p{margin:4px 0 0;color:#666;font-size:13px}
main{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:16px;
padding:24px 28px}
.card{background:#fff;border-radius:10px;padding:16px 18px;border:1px solid #ddd}
.card h2{font-size:16px;margin:0 0 10px;display:flex;justify-content:space-between;gap:8px}
.sev{font-size:12px;padding:2px 8px;border-radius:10px;background:#eee}
.sev-high{background:#ffd7d5}.sev-action{background:#ffe9c7}.sev-watch{background:#e3f0ff}
dl{margin:0}dt{font-size:12px;color:#666;margin-top:8px}dd{margin:2px 0 0}
.empty{padding:24px 28px;color:#666}
"""

QUESTIONS = (
    ("waiting_on", "Who or what is it waiting on?"),
    ("agent_can_continue", "Can the agent continue now?"),
    ("gate_or_evidence_required", "What gate or evidence is required?"),
    ("latest_run", "What did the latest run validate or block?"),
)


def _card(goal: dict[str, Any]) -> str:
    answers = goal.get("answers", {})
    rows = "".join(
        f'<dt>{escape(question)}</dt><dd data-q="{escape(key)}">'
        + escape(str(answers.get(key, "")))
        + "</dd>"
        for key, question in QUESTIONS
    )
    state = goal.get("goal_state") or {}
    if state.get("objective"):
        rows = (
            f'<dt>Objective</dt><dd data-q="objective">{escape(str(state["objective"]))}</dd>'
            + (
                f'<dt>Boundary</dt><dd data-q="boundary">{escape(str(state["boundary"]))}</dd>'
                if state.get("boundary")
                else ""
            )
            + rows
        )
    quota = goal.get("quota") or {}
    if quota.get("decision"):
        rows += (
            "<dt>Next automatic turn (scheduler hint)</dt>"
            f'<dd data-q="quota">{escape(str(quota["decision"]))}: '
            f"{escape(str(quota.get('reason_code', '')))}</dd>"
        )
    host = goal.get("host") or {}
    if host.get("stale") or goal.get("reconcile_reason"):
        behind = f"{host.get('behind_turns', 0)} host turn(s) behind" if host.get("stale") else ""
        reason = str(goal.get("reconcile_reason") or "")
        rows += (
            "<dt>Host and goal disagree</dt>"
            f'<dd data-q="reconcile">{escape(", ".join(x for x in (behind, reason) if x))}</dd>'
        )
    severity = escape(str(goal.get("severity", "")))
    return (
        f'<section class="card" data-goal="{escape(str(goal.get("goal_id", "")))}">'
        f"<h2><span>{escape(str(goal.get('goal_id', '')))}</span>"
        f'<span class="sev sev-{severity}">{severity}</span></h2><dl>{rows}</dl></section>'
    )


def render_first_screen(status: dict[str, Any], codex_home_source: str) -> bytes:
    goals = status.get("attention_queue", [])
    body = (
        "<main>" + "".join(_card(g) for g in goals) + "</main>"
        if goals
        else '<p class="empty">No goals yet. Open a session with <code>loopx-chat chat new'
        "</code> or request a gate.</p>"
    )
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        "<title>loopx-chat: first screen</title>"
        f"<style>{_STYLE}</style></head><body><header><h1>loopx-chat</h1>"
        f"<p>{len(goals)} goal(s) · Codex home from {escape(codex_home_source)} · "
        f"version {escape(__version__)}</p></header>{body}</body></html>"
    )
    return html.encode("utf-8")

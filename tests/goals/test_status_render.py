"""`status --json`'s text from kept row texts is exactly what `json.dumps` gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.goals.status import collect_status
from loopx_chat.goals.status_index import StatusIndex, index_path
from loopx_chat.goals.status_render import status_text
from loopx_chat.state.session_store import SessionStore

HOME = "/home/owner/.codex"


def stdlib(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, default=str)


def test_row_texts_are_reused_only_while_the_row_holds(tmp_path: Path) -> None:
    store, goals = SessionStore(tmp_path), GateStore(tmp_path)
    assert status_text(collect_status(store, goals, HOME), {}, {})[0] == stdlib(
        collect_status(store, goals, HOME)
    )
    for g in ("a", "b", "c"):
        GoalLedger(goals).set_goal_state(g, {"objective": "Ship <it> \u00e9", "acceptance": ["ok"]})
    goals.request_gate("b", 'Deploy "now"?\\')
    index = StatusIndex(store, goals, HOME, path=index_path(tmp_path))
    doc = collect_status(store, goals, HOME, index=index, host={})
    text, texts = status_text(doc, index.bare_rows(), {})
    assert text == stdlib(doc) and sorted(texts) == ["a", "b", "c"]
    # The same rows again: every text reused, the same bytes.
    again = collect_status(store, goals, HOME, index=index, host={})
    reused = {g: (s, e, "REUSED " + g) for g, (s, e, _) in texts.items()}
    assert status_text(again, index.bare_rows(), reused)[0].count("REUSED") == 3
    assert status_text(again, index.bare_rows(), texts)[0] == stdlib(again)
    # A goal whose files changed, and a row without its host part, are laid out again.
    goals.request_gate("c", "Another?")
    changed = collect_status(store, goals, HOME, index=index)
    out, kept = status_text(changed, index.bare_rows(), reused)
    assert "REUSED" not in out and out == stdlib(changed)
    with_host = collect_status(store, goals, HOME, index=index, host={})
    with_host["attention_queue"][0]["host_goal"] = {"words": "extra"}
    out, _ = status_text(with_host, index.bare_rows(), kept)
    assert out == stdlib(with_host)

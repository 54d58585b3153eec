"""`codex facts --json` is laid out by hand for speed: the standard library's encoder is the oracle.

Every document `render.facts_document` writes must equal, byte for byte, what
`json.dumps({"ok": True, **result.to_dict()}, indent=2, sort_keys=True)` writes for the same
scan: on arbitrary facts (any strings, missing parts, empty lists) and through the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from loopx_chat.cli import main
from loopx_chat.codex.rollouts import ScanResult, ThreadFacts
from loopx_chat.codex.rollouts.records import (
    OUTCOMES,
    HostPosition,
    LastTurn,
    TokenTotals,
    TurnCounts,
)
from loopx_chat.codex.rollouts.render import facts_document


def _stdlib(result: ScanResult) -> str:
    return json.dumps({"ok": True, **result.to_dict()}, indent=2, sort_keys=True, default=str)


_TEXT = st.text(max_size=12)  # any character: quotes, controls, non-ASCII, surrogates
_COUNT = st.integers(min_value=0, max_value=2**63)
_MAYBE_TEXT = st.none() | _TEXT

_FACTS = st.builds(
    ThreadFacts,
    thread_id=_TEXT,
    latest_event_at=_MAYBE_TEXT,
    turns=st.builds(TurnCounts, _COUNT, _COUNT, _COUNT, _COUNT, _COUNT),
    last_turn=st.none()
    | st.builds(LastTurn, _TEXT, st.sampled_from(OUTCOMES), _MAYBE_TEXT, st.none() | _COUNT),
    tokens=st.none() | st.builds(TokenTotals, _COUNT, _COUNT, _COUNT, _COUNT, _COUNT),
    models=st.lists(_TEXT, max_size=3).map(tuple),
    history_mode=_MAYBE_TEXT,
    archived=st.booleans(),
)


@st.composite
def _results(draw: st.DrawFn) -> ScanResult:
    facts = draw(st.lists(_FACTS, max_size=4))
    threads = {f.thread_id: f for f in facts}
    turns = draw(st.dictionaries(_TEXT, _COUNT, max_size=3))
    position = HostPosition(
        files=draw(_COUNT),
        total_offset=draw(_COUNT),
        latest_event_at=draw(_MAYBE_TEXT),
        turns_started=MappingProxyType(turns),
    )
    return ScanResult(
        threads=threads,
        files=draw(_COUNT),
        bytes_read=draw(_COUNT),
        files_reread=draw(_COUNT),
        corrupt_lines=draw(_COUNT),
        position=position,
        notes=tuple(draw(st.lists(_TEXT, max_size=2))),
    )


@settings(max_examples=300, deadline=None)
@given(result=_results())
def test_the_document_is_what_json_dumps_writes(result: ScanResult) -> None:
    assert facts_document(result) == _stdlib(result)


def test_the_command_prints_the_stdlib_layout(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    folder = home / "sessions" / "2026" / "11" / "29"
    folder.mkdir(parents=True)
    thread = "01a22654-8805-7283-882f-6664d5224a44"
    lines = [
        {
            "timestamp": "2026-11-29T08:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": thread},
        },
        {
            "timestamp": "2026-11-29T08:00:01.000Z",
            "type": "event_msg",
            "payload": {"type": "task_started", "turn_id": "t1"},
        },
    ]
    (folder / f"rollout-2026-11-29T08-00-00-{thread}.jsonl").write_text(
        "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    )
    done = CliRunner().invoke(
        main,
        ["--state-dir", str(tmp_path / "state"), "codex", "facts", "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(home)},
    )
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["threads"][thread]["turns"]["unfinished"] == 1
    assert done.stdout == json.dumps(doc, indent=2, sort_keys=True) + "\n"

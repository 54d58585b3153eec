"""The fake cannot drift: the recorded transcripts still match the pinned real codex.

Reruns tools/record-codex-transcripts against the pinned binary and compares with the
fixtures the fake replays. Needs the pinned codex; under CI it fails, never skips, without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopx_chat.codex.errors_map import UPSTREAM_TEXTS
from tests.helpers.fakes.replay import FIXTURES, load, pinned_version

ROOT = Path(__file__).resolve().parents[2]
RECORDER = ROOT / "tools" / "record-codex-transcripts"
# Token counts follow the prompt's size, which includes this machine's temp path length.
_TOKEN_KEYS = frozenset(
    {
        "totalTokens",
        "inputTokens",
        "outputTokens",
        "cachedInputTokens",
        "cacheWriteInputTokens",
        "reasoningOutputTokens",
        "contentTokenCount",
    }
)


def _masked(value: Any, key: str | None = None) -> Any:
    if key in _TOKEN_KEYS and isinstance(value, int):
        return "<tokens>"
    if isinstance(value, dict):
        return {k: _masked(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


# Notices codex sends on its own clock, not in answer to anything: whether one lands before a
# recording ends is a race (CI once recorded `interrupt` without its rate-limit notice), so
# their absence is no drift. What one says, when it comes, still must be what was recorded.
BACKGROUND_NOTICES = frozenset({"account/rateLimits/updated"})


def _shape(path: Path) -> tuple[list[str], set[str], set[str]]:
    """Client messages in order, the distinct server messages (codex's async tasks may
    interleave differently from run to run, and a background notice such as
    `account/rateLimits/updated` may come once or twice; what they say may not change), and
    the distinct background notices apart."""
    entries = json.loads(path.read_text())["transcript"]
    client = [
        json.dumps(_masked(e["message"]), sort_keys=True) for e in entries if e["from"] == "client"
    ]
    server: set[str] = set()
    background: set[str] = set()
    for e in entries:
        if e["from"] != "client":
            shown = json.dumps(_masked(e["message"]), sort_keys=True)
            is_notice = e["message"].get("method") in BACKGROUND_NOTICES
            (background if is_notice else server).add(shown)
    return client, server, background


def _known_notices(fixtures: Path) -> set[str]:
    """Any recorded wording of a background notice is one codex may send in any scenario."""
    return set().union(*(_shape(path)[2] for path in fixtures.glob("*.json")))


def _drift(now: Path, was: Path, known_notices: set[str]) -> list[str]:
    """What a new recording says differently from the fixture; empty when nothing."""
    (now_client, now_server, now_notices), (was_client, was_server, _) = _shape(now), _shape(was)
    changed = sorted(
        (now_server - was_server) | (was_server - now_server) | (now_notices - known_notices)
    )
    if changed or now_client != was_client:
        return [m[:300] for m in changed] or ["(the client side differs)"]
    return []


def test_drift_ignores_a_missing_background_notice_but_not_a_changed_one(tmp_path: Path) -> None:
    fixtures = FIXTURES / pinned_version()
    was = fixtures / "interrupt.json"
    known = _known_notices(fixtures)
    doc = json.loads(was.read_text())
    assert any(e["message"].get("method") in BACKGROUND_NOTICES for e in doc["transcript"])

    def variant(name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Path:
        entries = []
        for entry in json.loads(was.read_text())["transcript"]:
            changed = change(entry["message"])
            if changed is not None:
                entries.append({**entry, "message": changed})
        path = tmp_path / name
        path.write_text(json.dumps({**doc, "transcript": entries}))
        return path

    def without_notice(m: dict[str, Any]) -> dict[str, Any] | None:
        return None if m.get("method") in BACKGROUND_NOTICES else m

    def notice_with(m: dict[str, Any]) -> dict[str, Any]:
        if m.get("method") in BACKGROUND_NOTICES:
            return {**m, "params": {**m["params"], "newField": 1}}
        return m

    def started_with(m: dict[str, Any]) -> dict[str, Any]:
        if m.get("method") == "turn/started":
            return {**m, "params": {**m["params"], "newField": 1}}
        return m

    assert _drift(variant("same.json", lambda m: m), was, known) == []
    assert _drift(variant("absent.json", without_notice), was, known) == []
    assert _drift(variant("notice.json", notice_with), was, known)
    assert _drift(variant("started.json", started_with), was, known)


def test_recorded_transcripts_match_the_pinned_codex(tmp_path: Path, codex_bin: str) -> None:
    fixtures = FIXTURES / pinned_version()
    done = subprocess.run(
        [sys.executable, str(RECORDER), "--codex-bin", codex_bin, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    recorded = sorted(p.name for p in tmp_path.glob("*.json"))
    assert recorded == sorted(p.name for p in fixtures.glob("*.json")), (
        "the scenarios differ; rerun tools/record-codex-transcripts and review the diff"
    )
    drifted: dict[str, list[str]] = {}
    known_notices = _known_notices(fixtures)
    for name in recorded:
        changed = _drift(tmp_path / name, fixtures / name, known_notices)
        if changed:
            drifted[name] = changed
    assert drifted == {}, (
        f"codex {pinned_version()} no longer says what these recordings hold; rerun "
        "tools/record-codex-transcripts, review the diff and fix what depends on it"
    )


def test_every_text_the_controller_branches_on_was_recorded_from_the_pinned_codex() -> None:
    errors = [
        str(e["message"]["error"]["message"]).lower()
        for scenario in ("errors", "busy_thread", "old_catalog", "config_invalid")
        for e in load(scenario)
        if isinstance(e["message"].get("error"), dict)
    ]
    current = [t for t in UPSTREAM_TEXTS if t.observed_on == pinned_version()]
    assert current, "errors_map lists no text observed on the pinned codex"
    unseen = [
        t.example
        for t in current
        if not any(t.matches(t.methods[0] if t.methods else "", e) for e in errors)
    ]
    assert unseen == []


def test_each_table_entry_matches_its_own_example_and_the_older_catalog_text_still_retries() -> (
    None
):
    from loopx_chat.codex.errors_map import is_legacy_catalog_error, upstream_meaning

    for entry in UPSTREAM_TEXTS:
        method = entry.methods[0] if entry.methods else "thread/start"
        assert upstream_meaning(method, entry.example) == entry.meaning, entry.example
    older = [
        t
        for t in UPSTREAM_TEXTS
        if t.meaning == "legacy_catalog" and t.observed_on != pinned_version()
    ]
    assert older and all(is_legacy_catalog_error(t.example) for t in older)
    # Any other configuration error is not a catalog one (no retry).
    assert not is_legacy_catalog_error("failed to load configuration: x.toml:1:1: bad")

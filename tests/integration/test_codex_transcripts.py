"""The fakes cannot drift: the recorded transcripts still match the pinned real codex.

Reruns tools/record-codex-transcripts against the pinned binary and compares with the
fixtures the subprocess fake and the in-process scripted host replay; and checks that every
recorded exchange either of them, or a test, names is one of those fixtures. Needs the pinned
codex; under CI it fails, never skips, without it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.codex.errors_map import UPSTREAM_TEXTS
from loopx_chat.codex.thread import CodexThread, HostLaunch, ThreadOptions, ThreadReader, Timeouts
from loopx_chat.errors import CodexError
from tests.helpers.fakes import replay
from tests.helpers.fakes.replay import FIXTURES, Answer, Replayer, load, pinned_version
from tests.helpers.fakes.scripted_host import Script, ScriptedCodex

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
    from loopx_chat.codex.errors_map import upstream_meaning

    for entry in UPSTREAM_TEXTS:
        method = entry.methods[0] if entry.methods else "thread/start"
        assert upstream_meaning(method, entry.example) == entry.meaning, entry.example
    older = [
        t
        for t in UPSTREAM_TEXTS
        if t.meaning == "legacy_catalog" and t.observed_on != pinned_version()
    ]
    assert older
    assert all(upstream_meaning("thread/start", t.example) == "legacy_catalog" for t in older)
    # Any other configuration error is not a catalog one (no retry).
    bad = "failed to load configuration: x.toml:1:1: bad"
    assert upstream_meaning("thread/start", bad) != "legacy_catalog"


def test_every_exchange_the_fakes_and_the_tests_replay_is_a_recording_this_test_checks() -> None:
    """The scripted host and fake_codex.py read only `FIXTURES/<pinned>` (compared above with
    a fresh recording); each answer they or a test name must be an exchange recorded there."""
    assert FIXTURES == ROOT / "tests" / "fixtures" / "codex-transcripts"
    named = {v for v in vars(replay).values() if isinstance(v, Answer)}
    named |= set(replay.ANSWERS.values())
    literal = re.compile(r"""Answer\(\s*"([^"]+)",\s*"([^"]+)"(?:,\s*(\d+))?\s*\)""")
    replaying = re.compile(r"""Script\.replaying\(\s*"([^"]+)",((?:\s*"[^"]+",?)+)""")
    sources = [*ROOT.joinpath("tests").rglob("*.py")]
    for path in sources:
        text = path.read_text()
        for scenario, kind, nth in literal.findall(text):
            named.add(Answer(scenario, kind, int(nth or 0)))
        for scenario, kinds in replaying.findall(text):
            named |= {Answer(scenario, k) for k in re.findall(r'"([^"]+)"', kinds)}
    assert len(named) > len(replay.ANSWERS)  # the scan found the tests' answers too
    replayer = Replayer()
    unrecorded = []
    for answer in sorted(named, key=repr):
        try:
            replayer.client_index(answer.scenario, answer.kind, answer.nth)
        except (LookupError, OSError):
            unrecorded.append(answer)
    assert unrecorded == []
    recorded = {p.stem for p in (FIXTURES / pinned_version()).glob("*.json")}
    assert {a.scenario for a in named} <= recorded


def _matches(recorded: Any, live: Any) -> bool:
    """Whether `live` is `recorded` with only its placeholders filled (ids, home, cwd, time)."""
    if recorded == "<time>":
        return isinstance(live, int)
    if isinstance(recorded, dict):
        return (
            isinstance(live, dict)
            and recorded.keys() == live.keys()
            and all(_matches(v, live[k]) for k, v in recorded.items())
        )
    if isinstance(recorded, list):
        return (
            isinstance(live, list)
            and len(recorded) == len(live)
            and all(_matches(a, b) for a, b in zip(recorded, live, strict=True))
        )
    if isinstance(recorded, str) and isinstance(live, str):
        parts = re.split(r"(<(?:uuid|msg|call):\d+>|<home>|<cwd>|<user-agent>|<host>)", recorded)
        pattern = "".join(".+?" if i % 2 else re.escape(p) for i, p in enumerate(parts))
        return re.fullmatch(pattern, live, flags=re.S) is not None
    return bool(recorded == live)


def test_the_scripted_host_says_only_what_a_recording_says(tmp_path: Path) -> None:
    """A whole conversation on the scripted host (open, a turn, a steer, an interrupt, an
    approval, a history read, refusals): every message it sent is a recorded one with only
    its placeholders filled."""
    codex = ScriptedCodex()
    home = tmp_path / "home"
    home.mkdir()
    launch = HostLaunch(
        executable=tmp_path / "never-run",
        codex_home=home,
        work_dir=tmp_path,
        environ={},
        log_path=tmp_path / "stderr.log",
        options=ThreadOptions(),
        timeouts=Timeouts(startup=5, request=5, idle=30, hard=60, close_grace=1),
        connect=codex,
    )
    thread = CodexThread.open(launch, resume_thread_id=None)
    turn_id, _ = thread.start_turn("hello")
    thread.wait_turn(turn_id)
    (host,) = codex.hosts
    host.script = Script(answers={"turn/start": Answer("steer", "turn/start")})
    turn_id, _ = thread.start_turn("mock:hang")
    thread.start_turn("and also")
    thread.wait_turn(turn_id, should_interrupt=lambda: True)
    host.script = Script(answers={"turn/start": Answer("approval", "turn/start")})
    turn_id, _ = thread.start_turn("mock:shell=touch approval-probe")
    thread.wait_turn(turn_id)
    thread.read_history()
    thread.close()
    reader = ThreadReader.open(launch)
    with pytest.raises(CodexError):
        reader.request("0" * 8, "no/such/method", {})
    reader.close()
    recorded = [
        e["message"]
        for path in (FIXTURES / pinned_version()).glob("*.json")
        for e in json.loads(path.read_text())["transcript"]
        if e["from"] == "server"
    ]
    sent = [m for host in codex.hosts for m in host.sent]
    assert len(sent) > 50
    invented = [m for m in sent if not any(_matches(r, _without_id(m, r)) for r in recorded)]
    assert invented == []


def _without_id(live: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """A response's id is the live request's, not the recorded one."""
    if "method" not in live and "id" in live and "id" in recorded:
        return {**live, "id": recorded["id"]}
    return live

"""Owner-local store: atomic writes, modes, corrupt/future files, listing, the CLI surface."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.errors import StateError
from loopx_chat.state.session_records import SessionRecord, TokenCounts, TurnRecord
from loopx_chat.state.session_store import SessionStore


def _record(session_id: str, **kw: object) -> SessionRecord:
    return SessionRecord(
        session_id=session_id,
        goal_id="goal-1",
        created_at=f"2026-01-01T00:00:0{len(session_id) % 10}Z",
        updated_at="2026-01-01T00:00:00Z",
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "state")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_round_trip_and_permissions(store: SessionStore) -> None:
    created = store.create(_record("abc", codex_home="/h", upstream_thread_id="t-1"))
    assert store.load("abc") == created
    assert _mode(store.session_path("abc")) == 0o600
    assert _mode(store.session_dir("abc")) == 0o700
    assert _mode(store.sessions_dir) == 0o700
    data = json.loads(store.session_path("abc").read_text())
    assert data["schema_version"] == "loopx_chat_session_state_v1"
    for key in [
        "session_id",
        "goal_id",
        "agent_id",
        "adapter_kind",
        "upstream_thread_id",
        "codex_home",
        "session_mode",
        "status",
        "active_turn_id",
        "last_error_code",
        "created_at",
        "updated_at",
    ]:
        assert key in data


def test_permissions_hold_under_a_permissive_umask(store: SessionStore) -> None:
    import os

    old = os.umask(0)
    try:
        store.create(_record("u"))
    finally:
        os.umask(old)
    assert _mode(store.session_path("u")) == 0o600
    assert _mode(store.session_dir("u")) == 0o700


def test_create_refuses_existing(store: SessionStore) -> None:
    store.create(_record("dup"))
    with pytest.raises(StateError) as info:
        store.create(_record("dup"))
    assert info.value.error_code == "session_exists"


@pytest.mark.parametrize("bad", ["", "..", ".", "a/b", "a b", "x" * 161, "é", "../../etc"])
def test_bad_session_ids_rejected_before_disk(store: SessionStore, bad: str) -> None:
    with pytest.raises(StateError) as info:
        store.load(bad)
    assert info.value.error_code == "invalid_session_id"
    assert not store.root.exists()


def test_update_writes_updated_at_and_keeps_unknown_keys(store: SessionStore) -> None:
    store.create(_record("k"))
    path = store.session_path("k")
    data = json.loads(path.read_text())
    data["future_field"] = {"x": 1}
    path.write_text(json.dumps(data))
    updated = store.update("k", status="busy")
    assert updated.status == "busy"
    assert json.loads(path.read_text())["future_field"] == {"x": 1}


def test_unknown_update_field_rejected(store: SessionStore) -> None:
    store.create(_record("f"))
    with pytest.raises(StateError) as info:
        store.update("f", nonsense=1)
    assert info.value.error_code == "unsupported_session_fields"


CORRUPTIONS = {
    "not_json": (b"{not json", "state_corrupt"),
    "truncated": (b'{"schema_version": "loopx_chat_session_state_v1", "sess', "state_corrupt"),
    "list": (b"[1, 2]", "state_corrupt"),
    "binary": (b"\xff\xfe\x00garbage", "state_corrupt"),
    "future": (
        json.dumps({"schema_version": "loopx_chat_session_state_v9", "session_id": "x"}).encode(),
        "state_schema_unsupported",
    ),
    "missing_fields": (
        json.dumps({"schema_version": "loopx_chat_session_state_v1"}).encode(),
        "state_corrupt",
    ),
    "relative_home": (
        json.dumps(
            {
                "schema_version": "loopx_chat_session_state_v1",
                "session_id": "bad",
                "goal_id": "g",
                "created_at": "t",
                "updated_at": "t",
                "codex_home": "rel",
            }
        ).encode(),
        "state_corrupt",
    ),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corrupt_files_fail_clearly_and_stay_untouched(store: SessionStore, name: str) -> None:
    content, code = CORRUPTIONS[name]
    store.create(_record("good"))
    store.create(_record("bad"))
    path = store.session_path("bad")
    path.write_bytes(content)
    with pytest.raises(StateError) as info:
        store.load("bad")
    assert info.value.error_code == code
    assert str(path) in info.value.message
    with pytest.raises(StateError):
        store.update("bad", status="busy")
    listing = store.list()
    assert [s.session_id for s in listing.sessions] == ["good"]
    assert [(p.session_id, p.error_code) for p in listing.problems] == [("bad", code)]
    assert path.read_bytes() == content


def test_cli_lists_good_sessions_and_reports_the_bad_one(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.create(_record("good", codex_home="/private/home"))
    store.create(_record("bad"))
    store.session_path("bad").write_bytes(b"{oops")
    runner = CliRunner()
    result = runner.invoke(main, ["--state-dir", str(store.root), "sessions", "list", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [s["session_id"] for s in doc["sessions"]] == ["good"]
    assert doc["problems"][0]["error_code"] == "state_corrupt"
    assert "/private/home" not in result.stdout  # the home stays internal identity
    human = runner.invoke(main, ["--state-dir", str(store.root), "sessions", "list"])
    assert human.exit_code == 0
    assert "good" in human.stdout and "UNREADABLE [state_corrupt]" in human.stderr


def test_cli_show_errors_are_structured_without_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--state-dir", str(tmp_path / "state"), "sessions", "show"]
    result = runner.invoke(main, [*base, "missing", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error_code"] == "session_not_found"
    human = runner.invoke(main, [*base, "../x"])
    assert human.exit_code == 1
    assert "invalid_session_id" in human.stderr and "Traceback" not in human.output


def test_cli_show_future_schema(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.create(_record("fut"))
    store.session_path("fut").write_text('{"schema_version": "loopx_chat_session_state_v2"}')
    result = CliRunner().invoke(
        main, ["--state-dir", str(store.root), "sessions", "show", "fut", "--json"]
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error_code"] == "state_schema_unsupported"


def test_cli_home_json(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    result = CliRunner().invoke(
        main,
        ["--state-dir", str(tmp_path / "s"), "home", "--json"],
        env={"LOOPX_CHAT_CODEX_HOME": str(home), "CODEX_HOME": str(tmp_path / "other")},
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["path"], doc["source"], doc["exists"]) == (str(home), "LOOPX_CHAT_CODEX_HOME", True)


def test_turn_records_are_compact(store: SessionStore) -> None:
    store.create(_record("t"))
    turn = TurnRecord(
        turn_id="turn-1",
        session_id="t",
        status="completed",
        created_at="a",
        updated_at="b",
        client_turn_id="c-1",
        tokens=TokenCounts(1, 2, 3),
    )
    with store.lock("t"):
        store.save_turn(turn)
    assert store.load_turn("t", "turn-1") == turn
    assert store.find_turn_by_client_id("t", "c-1") == turn
    assert store.find_turn_by_client_id("t", "nope") is None
    assert _mode(store.turn_path("t", "turn-1")) == 0o600


def _is_interned(text: str) -> bool:
    """Whether a string equal to `text` is in the interpreter's interned-string table (asked
    with a copy, so the question adds nothing to the table that outlives it)."""
    copy = "".join(list(text))
    assert copy is not text
    return sys.intern(copy) is not copy


def test_a_session_id_the_store_was_given_is_not_interned(store: SessionStore) -> None:
    # Issue 37: pathlib interned each id it was handed whole, so a long-running service's
    # interned-string table kept an entry for every session whose id a table of ours held.
    ids = [f"interned-check-{i:04d}-{'x' * 20}" for i in range(3)]
    for sid in ids:
        store.create(_record(sid))
        store.load(sid)
        store.list_turns(sid)
        store.update(sid, status="busy")
        store.session_path(sid)
    assert len(store.list().sessions) == 3
    assert not any(_is_interned(sid) for sid in ids)

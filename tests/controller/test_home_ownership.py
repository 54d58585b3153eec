"""Home ownership with real processes: ordinary open, who uses a home, exclusive operations."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.codex.app_server import AppServerProcess
from loopx_chat.controller.home_ownership import AppServerRegistry, find_home_users, short_command
from loopx_chat.errors import LoopxChatError
from loopx_chat.home import resolve_codex_home
from tests.helpers.fakes import FakeCodex
from tests.helpers.real_codex import make_controller, raw_app_server


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _cli(state: Path, home: Path, *args: str, extra_env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    env = {"LOOPX_CHAT_CODEX_HOME": str(home), **(extra_env or {})}
    return CliRunner().invoke(main, ["--state-dir", str(state), "home", *args], env=env)


def _foreign_app_server(
    codex_bin: str, home: Path, env: dict[str, str], log: Path
) -> AppServerProcess:
    """A real app-server that loopx-chat did not register: somebody else's client."""
    proc = raw_app_server(codex_bin, home, home, env, log)
    proc.request("initialize", {"clientInfo": {"name": "other", "version": "1"}}, 30)
    proc.request("thread/start", {"cwd": str(home)}, 30)  # opens the sqlite state
    return proc


def test_short_command_never_shows_free_text() -> None:
    assert short_command(["/usr/bin/codex", "exec", "secret prompt text"]) == "codex exec"
    assert (
        short_command(["node", "/x/codex.js", "app-server", "--listen"])
        == "node codex.js app-server"
    )
    assert short_command([]) == "?"


def test_foreign_app_server_is_a_user_and_blocks_exclusive(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    proc = _foreign_app_server(codex_bin, bound_home, base_env, tmp_path / "foreign.log")
    try:
        users = _cli(state, bound_home, "users", "--json")
        assert users.exit_code == 0, users.output
        listed = json.loads(users.stdout)["users"]
        assert any(u["pid"] == proc.pid and u["kind"] == "open_files" for u in listed), listed
        refused = _cli(state, bound_home, "exclusive", "--wait", "0.5", "--", "true")
        assert refused.exit_code == 1
        assert "home_in_use" in refused.stderr and f"pid {proc.pid}" in refused.stderr
        assert proc.proc.poll() is None  # never signalled
    finally:
        proc.close()
    ran = _cli(
        state,
        bound_home,
        "exclusive",
        "--wait",
        "5",
        "--",
        sys.executable,
        "-c",
        "import os,sys; sys.exit(7 if os.environ['CODEX_HOME'] else 1)",
    )
    assert ran.exit_code == 7, ran.output


def test_our_idle_app_server_is_listed_then_closed_for_exclusive(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    with make_controller(state, bound_home, base_env, codex_bin) as c:
        record = c.open_session("g", tmp_path)
        pid = c.warm_pids()[record.session_id]
        users = json.loads(_cli(state, bound_home, "users", "--json").stdout)["users"]
        assert {"pid": pid, "kind": "registered"}.items() <= next(
            u for u in users if u["pid"] == pid
        ).items()
        ran = _cli(state, bound_home, "exclusive", "--wait", "10", "--", "true")
        assert ran.exit_code == 0, ran.output
        assert c.warm_pids() == {}  # closed gracefully by our own controller
    assert AppServerRegistry(state).live() == []


def test_foreign_holder_of_the_sqlite_home_is_detected(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sqlite_home = tmp_path / "sqlite"
    home.mkdir()
    sqlite_home.mkdir()
    db = sqlite_home / "state_5.sqlite"
    db.write_bytes(b"")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"f=open({str(db)!r},'rb'); import time; print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
        binding = resolve_codex_home(
            {"LOOPX_CHAT_CODEX_HOME": str(home), "CODEX_SQLITE_HOME": str(sqlite_home)}, tmp_path
        )
        users = find_home_users(binding, AppServerRegistry(tmp_path / "state"))
        assert [(u.pid, u.kind) for u in users if u.pid == holder.pid] == [
            (holder.pid, "open_files")
        ]
    finally:
        holder.kill()
        holder.wait()


def test_exclusive_hold_refuses_new_app_servers(tmp_path: Path, fake_codex: FakeCodex) -> None:
    home = tmp_path / "home"
    home.mkdir()
    state = tmp_path / "state"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loopx_chat",
            "--state-dir",
            str(state),
            "home",
            "exclusive",
            "--wait",
            "5",
            "--",
            sys.executable,
            "-c",
            "import time; print('in', flush=True); time.sleep(30)",
        ],
        env={**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home)},
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"in"
        env = {"PATH": os.environ["PATH"], **fake_codex.env()}
        with make_controller(state, home.resolve(), env, str(fake_codex.bin)) as c:
            with pytest.raises(LoopxChatError) as info:
                c.open_session("g", tmp_path)
        assert info.value.error_code == "home_exclusive_hold"
        assert info.value.remedy is not None and "exclusive" in info.value.remedy.next_action
        assert fake_codex.app_servers() == []
    finally:
        holder.kill()
        holder.wait()


def test_home_check_changes_nothing_while_the_home_is_in_use(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    proc = _foreign_app_server(codex_bin, bound_home, base_env, tmp_path / "foreign.log")
    try:
        time.sleep(0.5)  # let the other client settle
        before = _tree_digest(bound_home)
        mtimes = {p: p.stat().st_mtime_ns for p in bound_home.rglob("*")}
        result = _cli(
            tmp_path / "state",
            bound_home,
            "check",
            "--json",
            extra_env={"LOOPX_CHAT_CODEX_BIN": codex_bin},
        )
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["ok"] is True and doc["config_parses"] is True and doc["home_is_dir"] is True
        assert _tree_digest(bound_home) == before
        assert {p: p.stat().st_mtime_ns for p in bound_home.rglob("*")} == mtimes
    finally:
        proc.close()


def test_home_check_reports_a_broken_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("model = \n")
    before = _tree_digest(home)
    result = _cli(tmp_path / "state", home, "check", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["config_parses"] is False and doc["problems"]
    assert _tree_digest(home) == before
    missing = _cli(tmp_path / "state", tmp_path / "nope", "check", "--json")
    assert missing.exit_code == 1 and json.loads(missing.stdout)["home_exists"] is False
    assert not (tmp_path / "nope").exists()

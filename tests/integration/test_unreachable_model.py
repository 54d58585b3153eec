"""A codex that cannot reach its model does not hang a command.

The home's model provider points at a closed loopback port, with codex's own retries on (as a
user's config has them): the real codex then retries for ever, saying so only in `error`
notifications (`willRetry: true`). What it says reaches the owner as it happens, one line of
ours each, and the turn that has produced nothing within `--first-output-timeout` fails with
`first_output_timeout`."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from loopx_chat.codex.offline_config import write_offline_codex_config
from loopx_chat.codex.turn_notices import retry_notice
from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.owner_cli import OwnerCli
from tests.helpers.serve_process import RunningService

FAIL_FAST = ("request_max_retries", "stream_max_retries", "unbounded_connection_retries")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _home_at_closed_port(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_offline_codex_config(home, f"http://127.0.0.1:{_closed_port()}/v1")
    config = home / "config.toml"
    lines = config.read_text().splitlines()
    config.write_text("\n".join(x for x in lines if not x.startswith(FAIL_FAST)) + "\n")
    return home


def test_a_turn_that_cannot_reach_the_model_says_so_and_fails_in_time(
    tmp_path: Path, codex_bin: str, base_env: dict[str, str]
) -> None:
    cli = OwnerCli(tmp_path, _home_at_closed_port(tmp_path), base_env, codex_bin)
    done = cli("chat", "--first-output-timeout", "8", "new", "--goal", "g", "hi", "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["error_code"] == "first_output_timeout"
    assert doc["turn"]["status"] == "interrupted"
    # codex's first retry comes a few seconds in: it reached the owner before the timeout.
    first = "codex cannot reach its model (responseStreamDisconnected); retrying, attempt 1"
    assert f"[loopx-chat] {first}" in done.stderr
    assert "127.0.0.1" not in done.stderr  # our line, never codex's message with its URL
    # The session is usable afterwards: its turn is settled, not left running.
    code, shown = cli.json("sessions", "show", doc["session_id"])
    assert code == 0 and shown["session"]["status"] != "busy"


def test_the_timeout_comes_from_the_environment_and_the_human_output_says_what_to_do(
    tmp_path: Path, codex_bin: str, base_env: dict[str, str]
) -> None:
    cli = OwnerCli(tmp_path, _home_at_closed_port(tmp_path), base_env, codex_bin)
    cli.env["LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT"] = "2"
    done = cli("chat", "new", "--goal", "g", "hi")
    assert done.returncode == 1
    assert "interrupted [first_output_timeout]" in done.stderr
    assert "--first-output-timeout" in done.stderr and "home check" in done.stderr


def test_the_retry_line_names_only_the_kind() -> None:
    params = {
        "error": {
            "message": "Reconnecting... waiting for network",
            "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}},
            "additionalDetails": "Connection failed: http://10.0.0.1/secret",
        },
        "willRetry": True,
    }
    line = retry_notice(params, 3)
    assert line == "codex cannot reach its model (responseStreamDisconnected); retrying, attempt 3"
    assert retry_notice({**params, "willRetry": False}, 1) is None
    odd = {"error": {"codexErrorInfo": {"a b/c": {}}}, "willRetry": True}
    assert retry_notice(odd, 1) == "codex reports an error; retrying, attempt 1"


def test_a_goal_run_whose_model_cannot_be_reached_says_so_and_pauses_in_time(
    tmp_path: Path, codex_bin: str, base_env: dict[str, str], mock: MockResponsesServer
) -> None:
    home = tmp_path / "home"
    write_offline_codex_config(home, mock.base_url)
    cli = OwnerCli(tmp_path, home, base_env, codex_bin)
    done = cli("goal", "set", "g", "--objective", "count to three", "--acceptance", "3 said")
    assert done.returncode == 0, done.stderr
    code, doc = cli.json("chat", "new", "--goal", "g", "mock:text=ready")
    assert code == 0, doc
    # The model goes away: codex's continuation turn retries for ever.
    unreachable = _home_at_closed_port(tmp_path / "elsewhere")
    (home / "config.toml").write_text((unreachable / "config.toml").read_text())
    cli.env["LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT"] = "8"
    code, run = cli.json("goal", "run", "g", "--token-budget", "5000")
    assert run["run"]["state"] == "ended", run
    assert run["run"]["reason"] == "first_output_timeout", run
    assert run["host_goal"]["status"] == "paused" and code != 0 and run["ok"] is False
    shown = cli("goal", "run", "g", "--token-budget", "5000")
    assert "codex cannot reach its model (responseStreamDisconnected); retrying" in shown.stderr
    assert "first-output timeout" in shown.stderr and "home check" in shown.stderr


def test_the_environment_timeout_must_be_a_positive_number(tmp_path: Path) -> None:
    from loopx_chat.cli.context import CliContext
    from loopx_chat.cli.options import first_output_from_env
    from loopx_chat.errors import UsageError

    def cli(value: str) -> CliContext:
        env = {"LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT": value}
        return CliContext(environ=env, cwd=tmp_path, state_dir=tmp_path, codex_bin=None)

    assert first_output_from_env(cli("2.5")) == 2.5
    assert first_output_from_env(cli("")) is None
    for bad in ("abc", "0", "-3"):
        with pytest.raises(UsageError) as info:
            first_output_from_env(cli(bad))
        assert info.value.error_code == "usage_error"


def test_through_the_service_the_retries_reach_the_terminal_too(
    tmp_path: Path,
    codex_bin: str,
    base_env: dict[str, str],
    start_service: Callable[..., RunningService],
) -> None:
    home = _home_at_closed_port(tmp_path)
    cli = OwnerCli(tmp_path, home, base_env, codex_bin)
    served = {**base_env, "LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT": "8"}  # the service's own setting
    start_service(cli.state, home, served, codex_bin)
    cli.env["LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT"] = "600"  # the terminal's: not the service's
    done = cli("chat", "new", "--goal", "g", "hi", "--json")
    assert "not using the service" not in done.stderr
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["error_code"] == "first_output_timeout"
    first = "codex cannot reach its model (responseStreamDisconnected); retrying, attempt 1"
    assert f"[loopx-chat] {first}" in done.stderr

"""The command line loads a command's module only when that command runs.

`loopx-chat --version` and `--help` must not import the service, the LaunchAgent installer,
the projection core, psutil or the demo's mock server (checked in a fresh interpreter), and
the one-line help the group shows without importing must be each command's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import loopx_chat.cli as cli_package
from loopx_chat.cli import main
from loopx_chat.cli.lazy import COMMANDS

HEAVY = (
    "http.server",
    "loopx_chat.model_mock.responses",
    "loopx_chat.launchagent",
    "loopx_chat.session_runtime",
    "loopx_chat.service",
    "psutil",
)

PROBE = """
import json, sys
sys.argv = ["loopx-chat", *json.loads(sys.argv[1])]
from loopx_chat.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _probe(
    args: list[str], env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run the CLI with `args` in a fresh interpreter: the process, and the modules it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    return done, json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_command_module(args: list[str]) -> None:
    done, loaded = _probe(args)
    heavy = [m for m in loaded if m.startswith(HEAVY)]
    assert heavy == [], heavy
    # The click group (`root`) and its lazy loader, no command module.
    group = ("loopx_chat.cli.lazy", "loopx_chat.cli.root")
    assert not [m for m in loaded if m.startswith("loopx_chat.cli.") and m not in group]
    assert ("loopx-chat, version" in done.stdout) == (args == ["--version"])


def test_a_command_still_loads_what_it_needs() -> None:
    # The probe can see a heavy import at all: `launchagent --help` loads the installer.
    _, loaded = _probe(["launchagent", "--help"])
    assert "loopx_chat.launchagent.installer" in loaded


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_says_what_each_command_says(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None and command.name == name
    assert COMMANDS[name][2] == command.get_short_help_str(limit=1000)


def test_each_top_level_command_has_its_own_module_named_after_it() -> None:
    assert {name: COMMANDS[name][0] for name in COMMANDS} == {n: f"{n}_cmd" for n in COMMANDS}
    modules = {p.stem for p in Path(cli_package.__file__).parent.glob("*_cmd.py")}
    assert modules == {f"{name}_cmd" for name in COMMANDS}


# What a chat turn must not load before it spawns codex: every import before the spawn is
# time the turn waits (the status reader, the rollout scanner and the projection's rules are
# used by other commands; psutil is imported in a thread while codex starts).
CHAT_PATH_FORBIDDEN = (
    "loopx_chat.goals.status",
    "loopx_chat.goals.goal_facts",
    "loopx_chat.goals.quota",
    "loopx_chat.codex.rollouts",
    "loopx_chat.session_runtime.projection",
    "loopx_chat.session_runtime.keys",
    "loopx_chat.service",
    "http.server",
    "psutil",
)


def test_chat_send_up_to_its_session_check_loads_no_status_reader(tmp_path: Path) -> None:
    args = ["--state-dir", str(tmp_path), "chat", "send", "a" * 32, "hi"]
    done, loaded = _probe(args)
    assert "session_not_found" in done.stderr  # it ran the command
    assert "loopx_chat.controller.chat_controller" in loaded  # the probe sees the chat path
    assert [m for m in loaded if m.startswith(CHAT_PATH_FORBIDDEN)] == []


def test_status_of_no_goals_loads_no_projection_core(tmp_path: Path) -> None:
    """The projection, the memory adapter and the writeback contract load with the first
    goal to show; a status with goals loads them (the second half checks that too)."""
    heavy = (
        "loopx_chat.session_runtime.projection",
        "loopx_chat.session_runtime.openviking",
        "loopx_chat.session_runtime.writeback",
        "loopx_chat.session_runtime.keys",
    )

    def loaded_by(args: list[str]) -> list[str]:
        return _probe(args)[1]

    state = ["--state-dir", str(tmp_path / "state")]
    goal_fields = ["--objective", "x", "--acceptance", "it works"]
    assert [m for m in loaded_by([*state, "status", "--json"]) if m.startswith(heavy)] == []
    made = subprocess.run(
        [sys.executable, "-m", "loopx_chat", *state, "goal", "set", "g1", *goal_fields],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    with_goal = loaded_by([*state, "status", "--json"])
    assert "loopx_chat.session_runtime.projection" in with_goal
    # The status index's digest of each goal's files is BLAKE2b without hashlib's OpenSSL
    # bindings (issue 37): a status with its index kept loads no hashlib.
    assert "hashlib" not in loaded_by([*state, "status", "--json"])


def test_a_first_status_loads_no_scanner_no_logging_and_no_openssl(tmp_path: Path) -> None:
    """A new user's first `status` (no state, a home with no rollouts yet): the rollout
    scanner, `logging` and `hashlib` (OpenSSL) are each a few ms of every start (issue 18).
    Once the home has rollouts, the scanner loads and reads them."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "LOOPX_CHAT_CODEX_HOME": str(home)}
    args = ["--state-dir", str(tmp_path / "state"), "status", "--json"]
    done, loaded = _probe(args, env)
    never = ("loopx_chat.codex.rollouts.scanner", "logging", "hashlib", "filelock")
    assert [m for m in loaded if m in never] == []
    assert json.loads(done.stdout)["host_scan"] == {
        "threads": 0,
        "bytes_read": 0,
        "error_code": None,
    }
    rollout = home / "sessions" / "2026" / "11" / "30"
    rollout.mkdir(parents=True)
    thread = "01a22654-8805-7283-882f-6664d5224a44"
    line = {"timestamp": "2026-11-30T08:00:00.000Z", "type": "session_meta", "payload": {}}
    (rollout / f"rollout-2026-11-30T08-00-00-{thread}.jsonl").write_text(json.dumps(line) + "\n")
    done, loaded = _probe(args, env)
    assert "loopx_chat.codex.rollouts.scanner" in loaded
    assert json.loads(done.stdout)["host_scan"]["bytes_read"] > 0


def test_goal_run_up_to_its_checks_loads_no_memory_adapter_status_reader_or_http(
    tmp_path: Path,
) -> None:
    """`goal run` pays for its own path: the OpenViking memory adapter loads for `goal
    memory` only, the status reader for a status, `http.client` when a service runs it."""
    state = ["--state-dir", str(tmp_path / "state")]
    fields = ["--objective", "x", "--acceptance", "it works"]
    made = subprocess.run(
        [sys.executable, "-m", "loopx_chat", *state, "goal", "set", "g", *fields],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    done, loaded = _probe([*state, "goal", "run", "g", "--token-budget", "5"])
    assert "no_session" in done.stderr  # it ran the run's checks
    assert "loopx_chat.controller.goal_run_checks" in loaded
    forbidden = (
        "loopx_chat.goals.memory_input",
        "loopx_chat.session_runtime.openviking",
        "loopx_chat.goals.status",
        "http.client",
    )
    assert [m for m in loaded if m.startswith(forbidden)] == []

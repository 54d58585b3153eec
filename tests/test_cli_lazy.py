"""The command line loads a command's module only when that command runs.

`loopx-chat --version` and `--help` must not import the service, the LaunchAgent installer,
the projection core, psutil or the demo's mock server (checked in a fresh interpreter), and
the one-line help the group shows without importing must be each command's own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from loopx_chat.cli import main
from loopx_chat.cli.lazy import COMMANDS

HEAVY = (
    "http.server",
    "loopx_chat.codex.mock_responses",
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


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_command_module(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    heavy = [m for m in loaded if m.startswith(HEAVY)]
    assert heavy == [], heavy
    assert not [m for m in loaded if m.startswith("loopx_chat.cli.") and m != "loopx_chat.cli.lazy"]
    assert ("loopx-chat, version" in done.stdout) == (args == ["--version"])


def test_a_command_still_loads_what_it_needs() -> None:
    # The probe can see a heavy import at all: `launchagent --help` loads the installer.
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["launchagent", "--help"])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "loopx_chat.launchagent.installer" in json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_says_what_each_command_says(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None and command.name == name
    assert COMMANDS[name][2] == command.get_short_help_str(limit=1000)

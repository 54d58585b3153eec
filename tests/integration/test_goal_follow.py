"""`goal follow G` from another shell, on the real codex against the mock (issue 34 case 3):
Codex's words on a terminal, each gate as it opens and closes, a line per turn and the end,
with the same `--json` document and exit code as the foreground `goal run` it follows."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.model_mock.responses import MockResponsesServer
from tests.helpers.goal_runs import run_events
from tests.helpers.owner_cli import OwnerCli
from tests.helpers.waiting import wait_for


@pytest.fixture
def cli(tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str) -> OwnerCli:
    return OwnerCli(tmp_path, bound_home, base_env, codex_bin)


def _read_all(fd: int) -> bytes:
    shown = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return shown
        if not chunk:
            return shown
        shown += chunk


def test_goal_follow_shows_the_run_of_another_shell_and_ends_with_its_document(
    cli: OwnerCli, mock: MockResponsesServer, tmp_path: Path
) -> None:
    done = cli("goal", "set", "g", "--objective", "make the file", "--acceptance", "it exists")
    assert done.returncode == 0, done.stderr
    GoalLedger(GateStore(cli.state)).set_goal_state("g", {"approval_policy": "untrusted"})
    work = tmp_path / "work"
    work.mkdir()
    code, doc = cli.json("chat", "new", "--goal", "g", "--cwd", str(work), "mock:text=ready")
    assert code == 0, doc
    target = work / "f"
    mock.script(f"mock:shell=touch {target}", default="mock:slow=0.05 mock:text=said on the way")
    run = cli.start(
        "goal", "run", "g", "--token-budget", "12000", "--sandbox", "workspace-write", "--json"
    )
    store = GateStore(cli.state)
    wait_for(lambda: bool(run_events(cli.state, "g")))
    # Two shells follow it: one a terminal (the words and the lines), one a script (--json).
    leader, follower_tty = pty.openpty()
    watcher = subprocess.Popen(
        [*cli.base, "goal", "follow", "g"],
        env=cli.env, cwd=cli.tmp, stdout=follower_tty, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(follower_tty)
    as_json = cli.start("goal", "follow", "g", "--json")
    wait_for(lambda: any(g.host for g in store.gates("g")))
    [gate] = store.gates("g")
    resolved = cli("gate", "resolve", gate.gate_id, "--goal", "g", "--decision", "approve")
    assert resolved.returncode == 0, resolved.stderr
    out, err = run.communicate(timeout=120)
    assert run.returncode == 3, err
    followed_out, _ = as_json.communicate(timeout=60)
    assert as_json.returncode == 3
    assert json.loads(followed_out) == json.loads(out)  # the same document, from the record
    _, lines = watcher.communicate(timeout=60)
    words = _read_all(leader).decode()
    os.close(leader)
    assert watcher.returncode == 3, lines
    assert "said on the way" in words and "mock saw tool output" in words  # Codex's words
    assert f"owner gate {gate.gate_id} is open: Codex waits for you" in lines
    assert "the gate was approved: Codex continues" in lines
    turns = json.loads(out)["turns"]
    assert sum(" of 12,000 tokens  " in line for line in lines.splitlines()) == turns
    end = [line for line in lines.splitlines() if " ended: Codex goal budgetLimited" in line]
    assert end and end[0].endswith("(exit 3)")


def test_goal_follow_of_a_goal_with_no_run_is_refused(cli: OwnerCli) -> None:
    done = cli("goal", "set", "g", "--objective", "o", "--acceptance", "a")
    assert done.returncode == 0, done.stderr
    code, doc = cli.json("goal", "follow", "g")
    assert code != 0 and doc["error_code"] == "run_not_found"

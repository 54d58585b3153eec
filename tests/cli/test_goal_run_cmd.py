"""`goal run|accept|reopen` refuse an actor that is not a person before anything happens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import main


@pytest.mark.parametrize(
    "args",
    [
        ["goal", "run", "g"],
        ["goal", "accept", "g"],
        ["goal", "reopen", "g", "--note", "more"],
    ],
)
@pytest.mark.parametrize("actor", ["agent", "controller"])
def test_only_a_person_authorizes_or_answers_a_run(
    tmp_path: Path, args: list[str], actor: str
) -> None:
    state = tmp_path / "state"
    base = ["--state-dir", str(state), "--codex-bin", str(tmp_path / "no-codex")]
    env = {"LOOPX_CHAT_CODEX_HOME": str(tmp_path)}
    made = CliRunner().invoke(
        main, [*base, "goal", "set", "g", "--objective", "x", "--acceptance", "y"], env=env
    )
    assert made.exit_code == 0, made.output
    before = sorted((p, p.read_bytes()) for p in state.rglob("*") if p.is_file())
    result = CliRunner().invoke(main, [*base, *args, "--actor", actor, "--json"], env=env)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error_code"] == "usage_error"
    assert sorted((p, p.read_bytes()) for p in state.rglob("*") if p.is_file()) == before

"""`loopx-chat mock serve --script FILE --codex-home DIR` on the real pinned codex: a chat
turn answered by the script's next request, a goal run whose continuation turns its goal
lane answers (to done), and the refusals that leave a person's own home and a bad script
as they were."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def _loopx(*args: str) -> list[str]:
    return [sys.executable, "-m", "loopx_chat", *args]


@pytest.fixture
def served(tmp_path: Path, base_env: dict[str, str]) -> Iterator[tuple[Path, str]]:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "requests": ["mock:text=scripted first reply"],
                "goals": [
                    {
                        "objective": "Say hello",
                        "requests": [
                            'mock:call=update_goal {"status": "complete"}',
                            "mock:text=hello, done",
                        ],
                    }
                ],
            }
        )
    )
    home = tmp_path / "mock-home"
    proc = subprocess.Popen(
        _loopx("mock", "serve", "--script", str(script), "--codex-home", str(home)),
        env=base_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), proc.stderr
        yield home, url
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err


def test_a_scripted_mock_answers_a_chat_turn_and_runs_a_goal_to_done(
    served: tuple[Path, str], tmp_path: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    home, url = served
    assert url in (home / "config.toml").read_text()
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(home)}
    base = ["--state-dir", str(tmp_path / "state"), "--codex-bin", codex_bin]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            _loopx(*base, *args), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )

    chat = run("chat", "new", "--goal", "g", "hi, whatever you like")
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.strip() == "scripted first reply"  # the script's next request
    done = run("goal", "set", "g", "--objective", "Say hello", "--acceptance", "hello said")
    assert done.returncode == 0, done.stderr
    ran = run("goal", "run", "g", "--token-budget", "50000", "--json")
    doc = json.loads(ran.stdout)
    assert ran.returncode == 0, doc  # the goal lane had codex say it is complete
    assert doc["host_goal"]["status"] == "complete" and doc["turns"] == 1


def _refused(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _loopx("mock", "serve", *args), env=env, capture_output=True, text=True, timeout=60
    )


def test_a_persons_own_home_and_a_bad_script_are_refused(
    tmp_path: Path, base_env: dict[str, str]
) -> None:
    own = tmp_path / "own-home"
    own.mkdir()
    (own / "config.toml").write_text('model = "gpt-5"\n')
    refused = _refused(base_env, "--codex-home", str(own))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error [usage_error]: --codex-home names a Codex home")
    assert (own / "config.toml").read_text() == 'model = "gpt-5"\n'
    assert sorted(p.name for p in own.iterdir()) == ["config.toml"]

    bad = tmp_path / "bad.json"
    bad.write_text('{"goals": [{"objective": "x", "when": 1}]}')
    done = _refused(base_env, "--script", str(bad))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error [input_invalid]: --script ")
    assert "goals[0] has unknown key 'when'" in done.stderr

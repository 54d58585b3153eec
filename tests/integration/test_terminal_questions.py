"""A foreground `chat new --plan` on a terminal asks each of Codex's questions in turn, for
real: the pinned codex against the loopback mock, the CLI on a pseudo-terminal, and the
model sees each answer on its own question id."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from loopx_chat.model_mock.responses import MockResponsesServer


def _read_until(fd: int, marker: bytes, seen: bytearray, start: int = 0) -> int:
    """Read the terminal until `marker` shows after `start`; where it ends."""
    deadline = time.monotonic() + 60
    while marker not in seen[start:]:
        assert time.monotonic() < deadline, f"no {marker!r} in {bytes(seen)[-800:]!r}"
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen.extend(os.read(fd, 4096))
            except OSError:
                raise AssertionError(f"no {marker!r}: {bytes(seen)[-800:]!r}") from None
    return seen.index(marker, start) + len(marker)


def test_each_question_is_asked_in_turn_and_answered_on_its_own_id(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    questions = [
        {
            "id": "db",
            "header": "Database",
            "question": "Which database?",
            "options": [
                {"label": "SQLite", "description": "s"},
                {"label": "Postgres", "description": "p"},
            ],
        },
        # codex 0.171.0 refuses a question without options; typed text is still taken.
        {
            "id": "name",
            "header": "Name",
            "question": "Its name?",
            "options": [{"label": "main", "description": "m"}],
        },
    ]
    message = "mock:call=request_user_input " + json.dumps({"questions": questions})
    work = tmp_path / "work"
    work.mkdir()
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(tmp_path / "state")),
            *("--codex-bin", codex_bin, "--direct", "chat", "new", "--goal", "g"),
            *("--cwd", str(work), "--plan", message),
        ],
        env={**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)},
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    seen = bytearray()
    try:
        at = _read_until(main, b"Which database?", seen)
        at = _read_until(main, b"your answer", seen, at)
        os.write(main, b"2\n")  # the second option
        at = _read_until(main, b"Its name?", seen, at)
        _read_until(main, b"your answer", seen, at)
        os.write(main, b"main-db\n")
        assert proc.wait(60) == 0, bytes(seen)[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    output = json.loads(mock.requests[-1]["tool_outputs"][-1])
    assert output == {
        "answers": {"db": {"answers": ["Postgres"]}, "name": {"answers": ["main-db"]}}
    }

"""A secret answer never goes on a command line (issue 33, finding 6): the real pinned codex
asks a question marked `isSecret` (Plan mode, against the loopback mock) in a real `serve`,
and `gate resolve` takes its answer from a prompt that does not echo (a real pseudo-terminal
that is the command's controlling terminal), from `--answer-stdin` or from
`--answer-file`; `--answer` for it is refused (`secret_answer_on_argv`) with nothing sent.
The model gets each answer; no process's `/proc/<pid>/cmdline` ever holds one, and the
terminal never shows it."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopx_chat.goals.gate_store import Gate, GateStore
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.service_runtime import read_secret
from tests.helpers.terminal import read_to_end, read_until
from tests.helpers.waiting import wait_value


def _asking(secret_header: str, with_plain: bool) -> str:
    questions: list[dict[str, Any]] = []
    if with_plain:
        questions.append(
            {
                "id": "db",
                "header": "Database",
                "question": "Which database should I use?",
                "options": [{"label": "SQLite", "description": "small"}],
            }
        )
    questions.append(
        {
            "id": "token",
            "header": secret_header,
            "question": "Which deploy token should I use?",
            "isSecret": True,
            "options": [{"label": "the old one", "description": "kept"}],
        }
    )
    return "mock:call=request_user_input " + json.dumps({"questions": questions})


class Owner:
    """The owner's side: a bearer client of the service, and `gate resolve` processes."""

    def __init__(self, state: Path, port: int, env: dict[str, str]) -> None:
        self.state, self.port, self.env = state, port, env
        self.goals = GateStore(state)
        self.seen: set[str] = set()
        self.session = ""

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request(
            method,
            path,
            body=None if body is None else json.dumps(body),
            headers={
                "Host": f"127.0.0.1:{self.port}",
                "Authorization": f"Bearer {read_secret(self.state)}",
                "Content-Type": "application/json",
            },
        )
        response = conn.getresponse()
        doc = json.loads(response.read())
        conn.close()
        assert response.status in (200, 201, 202), doc
        return dict(doc)

    def ask(self, work: Path, text: str) -> Gate:
        """A turn whose model asks `text`'s questions; the host gate it opened."""
        if not self.session:
            opened = self.call(
                "POST",
                "/api/chat/sessions",
                {"goal_id": "g", "work_dir": str(work), "create_goal": True},
            )
            self.session = str(opened["session"]["session_id"])
        else:  # the last turn, answered, must have ended before the next one starts
            wait_value(
                lambda: (
                    self.call("GET", f"/api/chat/sessions/{self.session}")["session"]["status"]
                    != "busy"
                ),
                what="the previous turn to end",
            )
        self.call("POST", f"/api/chat/sessions/{self.session}/turns", {"text": text})

        def new_gate() -> Gate | None:
            found = [
                g
                for g in self.goals.gates("g")
                if g.host and g.status == "pending" and g.gate_id not in self.seen
            ]
            return found[0] if found else None

        gate = wait_value(new_gate, what="the host gate")
        self.seen.add(gate.gate_id)
        return gate

    def argv(self, gate: Gate, *extra: str) -> list[str]:
        return [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(self.state)),
            *("gate", "resolve", gate.gate_id, "--goal", "g", "--decision", "approve", *extra),
        ]

    def resolve(self, gate: Gate, *extra: str, stdin: str | None = None) -> Any:
        return subprocess.run(
            self.argv(gate, *extra),
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )


def _cmdlines() -> list[bytes]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out.append(Path(f"/proc/{entry}/cmdline").read_bytes())
            except OSError:
                continue
    return out


def _answered(mock: MockResponsesServer, secret: str) -> dict[str, Any]:
    wait_value(
        lambda: any(secret in o for r in mock.requests for o in r["tool_outputs"]),
        what="the model to get the answer",
    )
    output = next(o for r in mock.requests for o in r["tool_outputs"] if secret in o)
    return dict(json.loads(output)["answers"])


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty on stdin, as a
    login shell's command has (getpass turns echo off on /dev/tty)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_a_secret_answer_comes_from_a_silent_prompt_stdin_or_a_file_never_argv(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
    start_service: Callable[..., Any],
) -> None:
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    service = start_service(state, bound_home, env, codex_bin, "--plan")
    owner = Owner(state, service.port, env)

    # 1. --answer for the secret question is refused before anything is sent.
    gate = owner.ask(work, _asking("Token", with_plain=True))
    log = (state / "goals" / "g" / "gates.jsonl").read_bytes()
    refused = owner.resolve(gate, "--answer", "db=SQLite", "--answer", "token=decoy", "--json")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    doc = json.loads(refused.stdout)
    assert doc["error_code"] == "secret_answer_on_argv", doc
    assert "--answer-stdin" in doc["error"] and "decoy" not in doc["error"]
    assert (state / "goals" / "g" / "gates.jsonl").read_bytes() == log
    assert owner.goals.gate("g", gate.gate_id).status == "pending"

    # 2. On a terminal, the secret one is asked for without echo; the other from argv.
    typed = "CANARY-typed-7d1e"
    main, child = pty.openpty()
    proc = subprocess.Popen(
        owner.argv(gate, "--answer", "db=SQLite"),
        env=env,
        stdin=child,
        stdout=child,
        stderr=child,
        preexec_fn=_controlling_terminal,
    )
    os.close(child)
    seen = bytearray()
    try:
        read_until(main, b"Token (secret, not shown)", seen)
        assert typed.encode() not in b"".join(_cmdlines())
        os.write(main, typed.encode() + b"\n")
        read_to_end(main, seen, proc)
        assert proc.wait(60) == 0, bytes(seen)[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    assert typed.encode() not in seen  # never echoed, never printed
    assert _answered(mock, typed) == {
        "db": {"answers": ["SQLite"]},
        "token": {"answers": [typed]},
    }
    assert typed.encode() not in b"".join(_cmdlines())  # serve, codex: none has it

    # 3. From stdin.
    piped = "CANARY-stdin-31c9"
    gate = owner.ask(work, _asking("Key", with_plain=False))
    done = owner.resolve(gate, "--answer-stdin", "--json", stdin=piped + "\n")
    assert done.returncode == 0, done.stderr
    assert _answered(mock, piped) == {"token": {"answers": [piped]}}

    # 4. From a file (0600); a file others may read is used, with a note saying so.
    filed = "CANARY-file-5a80"
    answer_file = tmp_path / "answer"
    answer_file.write_text(f"token={filed}\n")
    answer_file.chmod(0o644)
    gate = owner.ask(work, _asking("Pass", with_plain=False))
    done = owner.resolve(gate, "--answer-file", str(answer_file), "--json")
    assert done.returncode == 0, done.stderr
    assert "keep answer files 0600" in done.stderr and filed not in done.stderr
    assert _answered(mock, filed) == {"token": {"answers": [filed]}}

    # 5. Text that is not UTF-8 on stdin is refused, nothing sent.
    gate = owner.ask(work, _asking("Again", with_plain=False))
    bad = subprocess.run(
        owner.argv(gate, "--answer-stdin", "--json"),
        env=env,
        input=b"\xff\xfe\n",
        capture_output=True,
        timeout=60,
    )
    assert bad.returncode != 0
    assert json.loads(bad.stdout)["error_code"] == "invalid_text"
    assert owner.goals.gate("g", gate.gate_id).status == "pending"

    service.stop()
    for canary in (typed, piped, filed):
        assert canary.encode() not in service.log.read_bytes()
        for path in state.rglob("*"):
            if path.is_file():
                assert canary.encode() not in path.read_bytes(), path

"""Text that is not valid Unicode, at every entry (issue 33, finding 7): the command line (a
raw `\\xff` byte in a gate question, `\\xfe` in an objective), an API body (`"\\ud800"`, raw
bytes that are not UTF-8) and records written before with such text, read back by a real
`serve` whose first screen (GET / with the owner's bearer secret) must answer 200 showing
U+FFFD, never 500."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.goals.goal_ledger import GoalLedger
from loopx_chat.state.service_runtime import read_secret
from tests.helpers.serve_process import start_service


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _cli(state: Path, env: dict[str, str], *words: str | bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "--direct", *words],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_command_line_refuses_bytes_that_are_not_utf8_and_writes_nothing(
    tmp_path: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    GateStore(state).request_gate("g", "Ship it?", actor="operator", blocking=True)
    before = _tree(state)
    for words, option in (
        ((b"gate", b"request", b"--goal", b"g", b"--question", b"ok \xff there"), "--question"),
        ((b"goal", b"set", b"g", b"--objective", b"x\xfey", b"--json"), "--objective"),
        ((b"gate", b"request", b"--goal", b"g\xff", b"--question", b"fine"), "--goal"),
    ):
        done = _cli(state, base_env, *words)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        said = done.stdout if b"--json" in words else done.stderr
        assert "invalid_text" in said and option in said, said
        assert "not UTF-8" in said and "iconv" in said
        assert _tree(state) == before
    # A message from stdin (or --file) is the same kind of entry.
    piped = subprocess.run(
        [
            *(sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "--direct"),
            *("--codex-bin", "/nonexistent", "chat", "new", "--goal", "g", "--json", "-"),
        ],
        env=base_env,
        input=b"ok \xff there",
        capture_output=True,
        timeout=60,
    )
    assert piped.returncode != 0 and json.loads(piped.stdout)["error_code"] == "invalid_text"
    assert _tree(state) == before


def _request(
    port: int, secret: str, method: str, path: str, raw: bytes | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {secret}"}
    if raw is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=raw, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


def test_the_api_refuses_invalid_text_and_stored_invalid_text_never_breaks_the_page(
    tmp_path: Path, bound_home: Path, base_env: dict[str, str], codex_bin: str
) -> None:
    state = tmp_path / "state"
    goals = GateStore(state)
    gate = goals.request_gate("old", "Ship the PLACEHOLDER build?", actor="operator", blocking=True)
    GoalLedger(goals).set_goal_state(
        "older", {"objective": "Make OBJECTIVE pass", "acceptance": ["tests pass"]}
    )
    # What an older version (or another process) wrote: a JSON surrogate escape in a gate's
    # question, and a raw byte that is not UTF-8 in an objective.
    gates = state / "goals" / "old" / "gates.jsonl"
    gates.write_bytes(gates.read_bytes().replace(b"PLACEHOLDER", b"\\ud800 \\udcff"))
    ledger = state / "goals" / "older" / "goal_state.jsonl"
    ledger.write_bytes(ledger.read_bytes().replace(b"OBJECTIVE", b"\xfe"))
    service = start_service(state, bound_home, base_env, codex_bin, tmp_path / "serve.log")
    try:
        secret = read_secret(state) or ""
        status, page = _request(service.port, secret, "GET", "/api/page")
        assert status == 200, page[-2000:]
        text = json.loads(page)["cards_html"]
        assert "\ufffd" in text and gate.gate_id in text
        status, doc = _request(service.port, secret, "GET", "/status.json")
        assert status == 200 and "\\ufffd" in doc.decode(), doc[-500:]
        listed = _cli(state, base_env, "gate", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert "Ship the \ufffd \ufffd build?" in {
            g["question"] for g in json.loads(listed.stdout)["gates"]
        }

        before = _tree(state / "goals")
        for raw in (
            json.dumps({"question": "Deploy \ud800 now?"}).encode(),
            b'{"question": "Deploy \xfe now?"}',
            json.dumps({"question": "Deploy?", "actor": "\udcff"}).encode(),
        ):
            status, body = _request(service.port, secret, "POST", "/api/goals/new/gates", raw)
            assert status == 400, body
            refusal = json.loads(body)
            assert refusal["error_code"] == "invalid_text", refusal
            assert "not valid text" in refusal["error"] or "not UTF-8" in refusal["error"]
        status, body = _request(
            service.port,
            secret,
            "POST",
            "/api/chat/sessions",
            json.dumps({"goal_id": "g", "work_dir": str(tmp_path) + "/\ud800"}).encode(),
        )
        assert status == 400 and json.loads(body)["error_code"] == "invalid_text", body
        assert _tree(state / "goals") == before
        status, page = _request(service.port, secret, "GET", "/api/page")
        assert status == 200
    finally:
        service.stop()
    assert "Traceback" not in (tmp_path / "serve.log").read_text(errors="replace")
    assert os.stat(state).st_uid == os.getuid()

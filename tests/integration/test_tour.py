"""`loopx-chat demo --tour` end to end on the real pinned codex: the tour starts its mock and
throwaway folder, prints exports and steps, and the very commands it prints
(`tour.TOUR_STEPS`) are run here as a person would type them, with the printed exports:
a chat turn, a goal run to its budget, a gate that stops a run until it is decided, a run to
done and accepted, an approval decided from another terminal, and the page."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest

from loopx_chat.cli.tour import APPROVED_FILE, GATE_ID, PORT, TOUR_STEPS, TourCommand, command_line
from loopx_chat.cli.tour_run import READY
from tests.helpers.waiting import wait_for


def _start_tour(codex_bin: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    tour = subprocess.Popen(
        [sys.executable, "-m", "loopx_chat", "--codex-bin", codex_bin, "demo", "--tour"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert tour.stdout is not None
    lines: list[str] = []
    while True:
        line = tour.stdout.readline()
        if not line:
            tour.wait(timeout=30)
            pytest.fail(f"the tour ended before it was ready: {''.join(lines)}")
        lines.append(line.rstrip("\n"))
        if line.strip() == READY:
            return tour, lines


def _exports(lines: list[str]) -> tuple[dict[str, str], Path]:
    env: dict[str, str] = {}
    work: Path | None = None
    for line in lines:
        printed = line.startswith(("    export ", "    cd "))
        words = shlex.split(line.strip()) if printed else []
        if words[:1] == ["export"] and not words[1].startswith("PATH="):
            key, _, value = words[1].partition("=")
            env[key] = value
        elif words[:1] == ["cd"]:
            work = Path(words[1])
    assert set(env) == {"LOOPX_CHAT_CODEX_HOME", "LOOPX_CHAT_STATE_DIR", "LOOPX_CHAT_CODEX_BIN"}
    assert work is not None and work.is_dir()
    return env, work


class Terminal:
    """The person's terminals: the printed exports, the tour's work folder."""

    def __init__(self, env: dict[str, str], work: Path) -> None:
        self.env, self.work = env, work
        self.background: list[subprocess.Popen[str]] = []

    def _argv(self, argv: tuple[str, ...] | list[str]) -> list[str]:
        return [sys.executable, "-m", "loopx_chat", *argv]

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._argv(argv),
            env=self.env,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=180,
        )

    def start(self, argv: list[str]) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            self._argv(argv),
            env=self.env,
            cwd=self.work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.background.append(proc)
        return proc

    def pending_gate(self, goal: str) -> str | None:
        done = self.run("gate", "list", "--goal", goal, "--json")
        if done.returncode != 0:
            return None
        pending = [g for g in json.loads(done.stdout)["gates"] if g["status"] == "pending"]
        return str(pending[-1]["gate_id"]) if pending else None


def _typed(command: TourCommand, term: Terminal, port: int) -> list[str]:
    """What the person types, with the id they read off the screen put in for GATE_ID."""
    argv = [str(port) if a == PORT else a for a in command.argv]
    if GATE_ID in argv:
        goal = argv[argv.index("--goal") + 1]
        wait_for(lambda: term.pending_gate(goal) is not None, timeout=120)
        argv[argv.index(GATE_ID)] = str(term.pending_gate(goal))
    if argv == ["open"]:
        argv.append("--print")  # no browser here: the URL it would open
    return argv


def _page(url: str) -> str:
    """The first screen through the login URL, as a browser gets it (cookie, redirect)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    with opener.open(url, timeout=30) as response:
        assert response.status == 200
        return str(response.read().decode())


def test_the_tours_printed_commands_work_on_the_real_codex(
    codex_bin: str, base_env: dict[str, str]
) -> None:
    tour, lines = _start_tour(codex_bin, base_env)
    term: Terminal | None = None
    try:
        env, work = _exports(lines)
        term = Terminal({**base_env, **env}, work)
        serve_lines = [line for line in lines if "$ loopx-chat serve --port " in line]
        port = int(serve_lines[0].rsplit(" ", 1)[1])
        commands = [c for step in TOUR_STEPS for c in step.commands]
        ran: list[subprocess.CompletedProcess[str] | None] = []
        beside: list[tuple[TourCommand, subprocess.Popen[str]]] = []
        for index, command in enumerate(commands):
            typed = f"$ {command_line(command, port)}"
            assert any(line.endswith(typed) for line in lines)  # printed as run here
            argv = _typed(command, term, port)
            next_beside = index + 1 < len(commands) and commands[index + 1].alongside
            if command.argv[0] == "serve":  # runs until Ctrl-C
                term.start(argv)
                wait_for(lambda: term.run("open", "--print").returncode == 0, timeout=60)
                ran.append(None)
                continue
            if next_beside and not command.alongside:  # decided from another terminal
                beside.append((command, term.start(argv)))
                ran.append(None)
                continue
            done = term.run(*argv)
            assert done.returncode == command.exit_code, (argv, done.stdout, done.stderr)
            ran.append(done)
            if command.alongside and not next_beside:
                for waited, proc in beside:
                    out, err = proc.communicate(timeout=180)
                    assert proc.returncode == waited.exit_code, (waited.argv, out, err)
                beside.clear()

        first_chat = ran[0]
        assert first_chat is not None
        assert "Goal tour has no objective yet" in first_chat.stderr
        assert "next: Set one: `loopx-chat goal set tour --objective" in first_chat.stderr
        exits = [c.exit_code for c in commands if c.argv[:3] == ("goal", "run", "tour")]
        assert exits == [3, 1, 3]  # to its budget; refused at the open gate; again once decided
        gate_refusal = ran[commands.index(next(c for c in commands if c.exit_code == 1))]
        assert gate_refusal is not None and "error [gate_open]" in gate_refusal.stderr
        assert "loopx-chat gate resolve" in gate_refusal.stderr
        assert (work / APPROVED_FILE).exists()  # the approved command ran
        code, listed = _json(term, "gate", "list", "--goal", "tour-approve", "--json")
        asked = [g for g in listed["gates"] if g["gate_id"].startswith("host-")]
        assert [g["status"] for g in asked] == ["approved"]  # Codex asked once; it was approved
        again = term.run("goal", "run", "tour-done", "--token-budget", "50000")
        assert again.returncode == 0, again.stderr  # tried twice, it still ends: done
        code, doc = _json(term, "status", "--json")
        assert code == 0
        goals = {row["goal_id"]: row for row in doc["attention_queue"]}
        assert {"tour", "tour-done", "tour-approve"} <= set(goals)
        url = term.run("open", "--print").stdout.strip()
        html = _page(url)
        for goal in ("tour", "tour-done", "tour-approve"):
            assert goal in html
    finally:
        for proc in term.background if term else []:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=60)
        tour.send_signal(signal.SIGINT)
        _, err = tour.communicate(timeout=60)
    assert tour.returncode == 0, err
    assert "throwaway folder is removed" in err
    assert not work.exists()


def _json(term: Terminal, *argv: str) -> tuple[int, dict[str, Any]]:
    done = term.run(*argv)
    return done.returncode, json.loads(done.stdout)

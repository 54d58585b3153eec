"""The offline tour's content, as data: what the mock model answers and the steps a newcomer
types (`loopx-chat demo --tour`).

Owns `TOUR_SCRIPT` (the mock's script: one lane per tour goal, chosen by the words of its
objective), `TOUR_STEPS` (each step's words and its exact commands, with the exit code each
one ends with: the tour prints them, and the end-to-end test runs these very commands on the
real codex) and `render_steps` (PURE: the steps as lines for a terminal).

What it must never do: run anything, read the environment, or name a path (the one folder the
tour uses is printed by `demo_cmd`, which makes it).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from loopx_chat.model_mock.script import GoalLane, MockScript

# Placeholders a command carries until it is printed (PORT) or typed (GATE_ID: from the
# output of the command before it).
GATE_ID = "GATE_ID"
PORT = "PORT"

# The goals' objectives, as `goal set` gives them and as the mock recognises them.
BUDGET_OBJECTIVE = "Count to three"
DONE_OBJECTIVE = "Say hello"
APPROVE_OBJECTIVE = "Make a file"
APPROVED_FILE = "tour-file.txt"

COMPLETE = 'mock:call=update_goal {"status": "complete"}'

# Once a lane's requests are spent (a goal run again), its default has Codex say "done" at
# once, so a second try ends too, without asking again.
TOUR_SCRIPT = MockScript(
    goals=(
        GoalLane(BUDGET_OBJECTIVE, default="mock:text=one, two, still counting"),
        GoalLane(DONE_OBJECTIVE, requests=(COMPLETE, "mock:text=hello: done"), default=COMPLETE),
        GoalLane(
            APPROVE_OBJECTIVE,
            requests=(f"mock:shell=touch {APPROVED_FILE}", COMPLETE, "mock:text=the file is made"),
            default=COMPLETE,
        ),
    )
)


@dataclass(frozen=True)
class TourCommand:
    argv: tuple[str, ...]  # what follows `loopx-chat`
    exit_code: int = 0
    says: str = ""  # what to look for in its output
    # Typed in another terminal (with the same exports) while the command before it runs.
    alongside: bool = False


@dataclass(frozen=True)
class TourStep:
    title: str
    text: str
    commands: tuple[TourCommand, ...]


def _c(line: str, *, exit_code: int = 0, says: str = "", alongside: bool = False) -> TourCommand:
    """A command as the person types it after `loopx-chat` (shell words)."""
    return TourCommand(tuple(shlex.split(line)), exit_code, says, alongside)


TOUR_STEPS: tuple[TourStep, ...] = (
    TourStep(
        "Chat with the mock model",
        "A session is a real Codex thread; the mock answers each message with a canned reply "
        "(a message with `mock:text=WORDS` makes it answer WORDS).",
        (
            _c(
                'chat new --goal tour "Hello, mock"',
                says="the reply, then: goal tour has no objective yet, and the command that "
                "sets one",
            ),
        ),
    ),
    TourStep(
        "Let Codex work on a goal until its budget is spent",
        "`goal run` sets the thread's goal with a token budget; Codex then starts each next "
        "turn itself. The mock keeps counting, so the budget ends it.",
        (
            _c(f'goal set tour --objective "{BUDGET_OBJECTIVE}" --acceptance "three said"'),
            _c(
                "goal run tour --token-budget 8000",
                exit_code=3,
                says="one line per turn, then `budgetLimited`: the budget is spent",
            ),
            _c("status --goal tour", says="the four answers for the goal"),
        ),
    ),
    TourStep(
        "A gate: Codex waits for your decision",
        "A blocking gate stops the goal's runs until a person decides it.",
        (
            _c(
                'gate request --goal tour --question "Go on counting?"',
                says=f"the gate's id ({GATE_ID} below)",
            ),
            _c(
                "goal run tour --token-budget 8000",
                exit_code=1,
                says="error [gate_open], and the command that decides it",
            ),
            _c(f"gate resolve {GATE_ID} --goal tour --decision approve"),
            _c("goal run tour --token-budget 8000", exit_code=3, says="it runs again"),
        ),
    ),
    TourStep(
        "A run to done",
        "Here the mock has Codex say the goal is complete after one turn; you accept it.",
        (
            _c(f'goal set tour-done --objective "{DONE_OBJECTIVE}" --acceptance "hello said"'),
            _c('chat new --goal tour-done "Get ready"'),
            _c(
                "goal run tour-done --token-budget 50000",
                says="`complete` (exit 0: Codex says it is done)",
            ),
            _c("goal accept tour-done", says="the run is closed and rewarded"),
        ),
    ),
    TourStep(
        "An approval: Codex asks before it runs a command",
        "With `--approval untrusted` Codex asks before each command; the run waits, blocked, "
        f"until you decide. Here it asks to run `touch {APPROVED_FILE}` in this folder.",
        (
            _c(
                f'goal set tour-approve --objective "{APPROVE_OBJECTIVE}" '
                f'--acceptance "{APPROVED_FILE} exists" --approval untrusted'
            ),
            _c('chat new --goal tour-approve "Get ready"'),
            _c(
                "goal run tour-approve --token-budget 50000 --sandbox workspace-write",
                says="Codex asks to run `touch`: answer y right there (or decide it from "
                f"another terminal, next); then `complete`, and {APPROVED_FILE} is here",
            ),
            _c("gate list --goal tour-approve", alongside=True, says="the pending gate"),
            _c(f"gate resolve {GATE_ID} --goal tour-approve --decision approve", alongside=True),
        ),
    ),
    TourStep(
        "The page",
        "The local service serves the first screen: one card per goal, ordered by who must act.",
        (
            _c(f"serve --port {PORT}", alongside=True, says="it runs until Ctrl-C"),
            _c("open", says="the page in your browser, logged in (`open --print`: the URL)"),
        ),
    ),
)


def command_line(command: TourCommand, port: int) -> str:
    """What the person types for `command`, with the tour's port filled in."""
    argv = [str(port) if arg == PORT else arg for arg in command.argv]
    return shlex.join(["loopx-chat", *argv])


def render_steps(port: int) -> list[str]:
    """The steps as terminal lines (PURE)."""
    lines: list[str] = []
    for number, step in enumerate(TOUR_STEPS, start=1):
        lines += ["", f"== {number}. {step.title}", step.text]
        for command in step.commands:
            where = "  (another terminal) " if command.alongside else "  "
            lines.append(f"{where}$ {command_line(command, port)}")
            ends = f"exit {command.exit_code}" if command.exit_code else ""
            said = "; ".join(x for x in (command.says, ends) if x)
            if said:
                lines.append(f"      → {said}")
    return lines

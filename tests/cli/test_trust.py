"""The CLI as a real user meets it: typos are named, reads write nothing, every command and
option explains itself, and the same option means the same thing everywhere."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from loopx_chat.cli import main
from loopx_chat.state.session_records import SessionRecord, TurnRecord
from loopx_chat.state.session_store import SessionStore, utc_now

GOAL = "release-1"
SESSION = "sess-known"


def run(state: Path, *args: str) -> click.testing.Result:
    return CliRunner().invoke(
        main,
        ["--state-dir", str(state), *args],
        env={"LOOPX_CHAT_CODEX_HOME": str(state.parent / "codex-home"), "NO_COLOR": None},
    )


def ok(state: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = run(state, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def tree(root: Path) -> dict[str, str]:
    """Every folder and file under root, each file by its bytes' digest."""
    if not root.exists():
        return {}
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_socket():  # the service's owner socket: a name, no bytes
            out[rel] = "socket"
            continue
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def populated(tmp_path: Path) -> Path:
    """A state dir with a session, a pending gate, a handoff, a goal_state, a reward and a
    proposal, and a status already shown once (so its first-shown records exist)."""
    state = tmp_path / "state"
    SessionStore(state).create(
        SessionRecord(
            session_id=SESSION, goal_id="chat-only-goal", created_at=utc_now(), updated_at=utc_now()
        )
    )
    # a session of GOAL with one turn, so a reward has a turn to judge
    store = SessionStore(state)
    store.create(
        SessionRecord(
            session_id=f"{SESSION}-g", goal_id=GOAL, created_at=utc_now(), updated_at=utc_now()
        )
    )
    store.save_turn(
        TurnRecord(
            turn_id="t1",
            session_id=f"{SESSION}-g",
            status="completed",
            created_at=utc_now(),
            updated_at=utc_now(),
        )
    )
    gate = ok(state, "gate", "request", "--goal", GOAL, "--question", "ship it?")
    ok(state, "handoff", "record", "--goal", GOAL, "--next-action", "tag", "--stop-condition", "x")
    ok(
        state,
        "goal",
        "set",
        GOAL,
        "--objective",
        "Ship release 1",
        "--acceptance",
        "release 1 is tagged",
    )
    ok(
        state,
        "reward",
        "record",
        "--goal",
        GOAL,
        "--turn",
        "t1",
        "--label",
        "good",
        "--reason",
        "r",
    )
    ok(
        state,
        "dream",
        "record",
        "--goal",
        GOAL,
        "--title",
        "t",
        "--rationale",
        "r",
        "--next-action",
        "n",
    )
    ok(state, "status")
    assert gate["gate"]["status"] == "pending"
    return state


# Every command that only reads, with a known and a mistyped goal where it takes one.
READS: list[tuple[str, ...]] = [
    ("status",),
    ("status", "--goal", GOAL),
    ("status", "--goal", "chat-only-goal"),
    ("status", "--goal", "relase-1"),
    ("gate", "list"),
    ("gate", "list", "--goal", GOAL),
    ("gate", "list", "--goal", "relase-1"),
    ("handoff", "list", "--goal", GOAL),
    ("handoff", "list", "--goal", "relase-1"),
    ("goal", "show", GOAL),
    ("goal", "show", "relase-1"),
    ("goal", "list"),
    ("reward", "list", "--goal", GOAL),
    ("reward", "list", "--goal", "relase-1"),
    ("dream", "list", "--goal", GOAL),
    ("dream", "list", "--goal", "relase-1"),
    ("metrics",),
    ("metrics", "--goal", GOAL),
    ("metrics", "--goal", "relase-1"),
    ("sessions", "list"),
    ("sessions", "show", SESSION),
    ("sessions", "show", "sess-typo"),
    ("writeback", "list", "--goal", GOAL),
    ("writeback", "list", "--goal", "relase-1"),
    ("home",),
    ("home", "check"),
    ("codex", "facts"),
]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_leaves_the_state_dir_byte_for_byte(tmp_path: Path, args: tuple[str, ...]) -> None:
    state = populated(tmp_path)
    before = tree(state)
    for as_json in (False, True):
        result = run(state, *args, *(["--json"] if as_json else []))
        assert "Traceback" not in result.output
        assert tree(state) == before, f"{' '.join(args)} changed the state dir"
    assert "goals/relase-1" not in before


@pytest.mark.parametrize("args", [a for a in READS if "relase-1" not in a], ids=" ".join)
def test_a_read_on_a_fresh_install_makes_no_goal_or_session_folder(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    state = tmp_path / "state"
    run(state, *args)
    made = {p.split("/")[0] for p in tree(state)}
    # The only thing a read may leave is the documented rollout-index cache (`host/`).
    assert made <= {"host"}, made


@pytest.mark.parametrize(
    "args",
    [
        ("status", "--goal", "relase-1"),
        ("gate", "list", "--goal", "relase-1"),
        ("handoff", "list", "--goal", "relase-1"),
        ("metrics", "--goal", "relase-1"),
        ("quota", "--goal", "relase-1"),
        ("reward", "list", "--goal", "relase-1"),
        ("dream", "list", "--goal", "relase-1"),
        ("writeback", "list", "--goal", "relase-1"),
        ("gate", "resolve", "gate-0123456789ab", "--goal", "relase-1", "--decision", "approve"),
    ],
    ids=" ".join,
)
def test_a_mistyped_goal_is_goal_not_found_and_leaves_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    state = populated(tmp_path)
    before = tree(state)
    result = run(state, *args, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["error_code"] == "goal_not_found"
    assert GOAL in doc["error"]  # it names the goals that do exist
    assert "loopx-chat status" in doc["gate"]["next_action"]
    assert tree(state) == before
    human = run(state, *args)
    assert human.exit_code == 1
    assert human.stderr.startswith("error [goal_not_found]: no goal relase-1")


def test_a_goal_known_only_from_a_session_is_found(tmp_path: Path) -> None:
    state = populated(tmp_path)
    doc = ok(state, "status", "--goal", "chat-only-goal")
    assert [g["goal_id"] for g in doc["attention_queue"]] == ["chat-only-goal"]


def _settled(state: Path) -> dict[str, str]:
    """The state tree once it has stopped changing (a service's start-up writes are done)."""
    last, since = tree(state), time.monotonic()
    while time.monotonic() - since < 1.0:
        time.sleep(0.1)
        now = tree(state)
        if now != last:
            last, since = now, time.monotonic()
    return last


@pytest.mark.parametrize("mode", ["direct", "served"])
def test_a_failed_gate_resolve_leaves_nothing_and_the_typo_never_becomes_a_goal(
    tmp_path: Path, mode: str, start_service: Any
) -> None:
    state = populated(tmp_path)
    if mode == "served":  # the same refusals through the running service, as its owner's CLI
        service = start_service(state, state.parent / "codex-home", dict(os.environ), "codex")
    before = _settled(state)
    typo = run(state, "gate", "resolve", "gate-nope", "--goal", "relase-1", "--decision", "reject")
    wrong_gate = run(state, "gate", "resolve", "gate-nope", "--goal", GOAL, "--decision", "reject")
    assert (typo.exit_code, wrong_gate.exit_code) == (1, 1)
    assert typo.stderr.startswith("error [goal_not_found]: no goal relase-1 (goals: ")
    assert "[gate_not_found]" in wrong_gate.stderr
    assert "not using the service" not in typo.stderr + wrong_gate.stderr
    if mode == "served":  # each went there (the log line follows the answer: wait for it)
        posts: list[str] = []
        for _ in range(50):
            posts = [line for line in service.served() if " POST " in line]
            if len(posts) >= 2:
                break
            time.sleep(0.05)
        assert [line.split()[4] for line in posts] == ["404", "404"], posts
    assert tree(state) == before
    assert not (state / "goals" / "relase-1").exists()
    listed = ok(state, "status")
    assert "relase-1" not in {g["goal_id"] for g in listed["attention_queue"]}


def test_the_store_itself_leaves_no_folder_for_an_unknown_gate(tmp_path: Path) -> None:
    """The HTTP API and the page call the store directly: the same guarantee there."""
    from loopx_chat.errors import StateError
    from loopx_chat.goals.gate_store import GateStore

    store = GateStore(tmp_path / "state")
    with pytest.raises(StateError) as info:
        store.resolve_gate("typo", "gate-0123456789ab", "approve", None)
    assert info.value.error_code == "gate_not_found"
    assert tree(tmp_path / "state") == {}


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (("gate", "list"), "no gates"),
        (("gate", "list", "--goal", "empty-goal"), "no gates for goal empty-goal"),
        (("handoff", "list", "--goal", "empty-goal"), "no handoffs for goal empty-goal"),
        (("reward", "list", "--goal", "empty-goal"), "no rewards for goal empty-goal"),
        (("dream", "list", "--goal", "empty-goal"), "no proposals for goal empty-goal"),
        (("writeback", "list", "--goal", "empty-goal"), "no writebacks for goal empty-goal"),
        (("goal", "list"), "no goals with a goal_state"),
        (("sessions", "list"), "no sessions"),
        (("status",), "no goals"),
    ],
)
def test_an_empty_list_says_so_one_way(
    tmp_path: Path, args: tuple[str, ...], sentence: str
) -> None:
    state = tmp_path / "state"
    # A goal that exists (a session names it) but has no records of any kind.
    SessionStore(state).create(
        SessionRecord(
            session_id="s1", goal_id="empty-goal", created_at=utc_now(), updated_at=utc_now()
        )
    )
    if args in (("sessions", "list"), ("status",)):
        state = tmp_path / "other-state"  # no session and no goal at all
    result = run(state, *args)
    assert result.exit_code == 0, result.output
    assert result.stdout == sentence + "\n"


def _walk(
    command: click.Command, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        # list/get_command, not `.commands`: the top-level group loads its commands on use
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            found += _walk(sub, (*path, name))
    return found


COMMANDS = _walk(main)


def test_the_tree_is_walked() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"chat new", "dream record", "reward list", "launchagent status", "status"} <= names
    assert len(COMMANDS) > 40


@pytest.mark.parametrize(
    ("path", "command"), COMMANDS, ids=[" ".join(p) or "main" for p, _ in COMMANDS]
)
def test_every_command_and_option_explains_itself_with_its_default(
    path: tuple[str, ...], command: click.Command
) -> None:
    assert (command.help or "").strip(), f"`{' '.join(path)}` has no help"
    # The context the real CLI gives: `show_default` is inherited from the top-level group.
    ctx = click.Context(main, info_name="loopx-chat", **main.context_settings)
    for name in path:
        ctx = click.Context(ctx.command.commands[name], parent=ctx, info_name=name)  # type: ignore[attr-defined]
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        record = param.get_help_record(ctx)
        assert record is not None
        text = record[1]
        assert param.help and param.help.strip(), f"`{' '.join(path)} {record[0]}` has no help"
        has_default = not (param.required or param.multiple or param.is_flag)
        if has_default and param.get_default(ctx, call=False) is not None:
            assert "default:" in text, f"`{' '.join(path)} {record[0]}` hides its default"


def test_help_shows_the_chat_defaults() -> None:
    result = CliRunner().invoke(main, ["chat", "--help"], terminal_width=200, max_content_width=200)
    assert result.exit_code == 0
    for option, default in (
        ("--sandbox", "read-only"),
        ("--idle-timeout", "180"),
        ("--turn-timeout", "900"),
    ):
        # Its own entry: from the option to the next option.
        entry = " ".join(result.stdout.split(option, 1)[1].split("\n  -", 1)[0].split())
        assert f"[default: {default}" in entry, entry


def test_actor_takes_the_same_values_everywhere() -> None:
    choices = {}
    for path, command in COMMANDS:
        for param in command.params:
            if param.name == "actor":
                assert isinstance(param.type, click.Choice)
                choices[" ".join(path)] = tuple(param.type.choices)
    assert len(choices) >= 6, choices
    assert len(set(choices.values())) == 1, choices


@pytest.mark.parametrize(
    "args",
    [
        ("chat", "--idle-timeout", "-1", "history", "s"),
        ("chat", "--turn-timeout", "-5", "history", "s"),
        ("chat", "--idle-timeout", "0", "history", "s"),
        ("home", "exclusive", "--wait", "-1", "--", "true"),
    ],
    ids=" ".join,
)
def test_a_negative_timeout_is_refused_before_anything_runs(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    state = tmp_path / "state"
    result = run(state, *args)
    assert result.exit_code == 2, result.output
    assert "Invalid value" in result.stderr and "Traceback" not in result.output
    assert not state.exists()


def test_an_agent_cannot_decide_a_gate_and_is_told_why(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = run(state, "gate", "request", "--goal", GOAL, "--question", "q?", "--actor", "agent")
    assert result.exit_code == 1
    assert "a gate waits on a person" in result.stderr
    assert not (state / "goals").exists()


def test_the_chat_defaults_are_the_controllers_and_its_options_become_its_config(
    tmp_path: Path,
) -> None:
    from loopx_chat.cli.chat_cmd import chat
    from loopx_chat.cli.context import CliContext
    from loopx_chat.controller.chat_controller import DEFAULT_CONFIG

    defaults = {p.name: p.default for p in chat.params}
    assert defaults == {
        "sandbox": DEFAULT_CONFIG.options.sandbox,
        "idle_timeout": DEFAULT_CONFIG.timeouts.idle,
        "turn_timeout": DEFAULT_CONFIG.timeouts.hard,
        "first_output_timeout": DEFAULT_CONFIG.timeouts.first_output,
    }
    cli = CliContext(environ={}, cwd=tmp_path, state_dir=tmp_path, codex_bin=None)
    ctx = click.Context(chat, obj=cli)
    with ctx:
        ctx.invoke(
            chat.callback,
            sandbox="workspace-write",
            idle_timeout=5.0,
            turn_timeout=7.0,
            first_output_timeout=3.0,
        )
    config = ctx.obj.controller_config
    assert (config.timeouts.idle, config.timeouts.hard) == (5.0, 7.0)
    assert config.timeouts.first_output == 3.0
    assert config.options.sandbox == "workspace-write"
    assert config.timeouts.startup == DEFAULT_CONFIG.timeouts.startup  # the rest stays
    assert cli.controller_config is None  # the top-level context is untouched


def test_the_one_error_boundary_answers_in_the_form_the_command_parsed(tmp_path: Path) -> None:
    """`--json` as a flag gets one JSON document; the same word as an option's value does not."""
    base = ["--state-dir", str(tmp_path / "state"), "gate", "request", "--goal", "bad/id"]
    as_value = CliRunner().invoke(main, [*base, "--question", "--json"])
    assert as_value.exit_code == 1 and as_value.stdout == ""
    assert as_value.stderr.startswith("error [invalid_goal_id]")
    as_flag = CliRunner().invoke(main, [*base, "--question", "Ship it?", "--json"])
    assert as_flag.exit_code == 1
    assert json.loads(as_flag.stdout)["error_code"] == "invalid_goal_id"
    assert "Traceback" not in as_value.output + as_flag.output

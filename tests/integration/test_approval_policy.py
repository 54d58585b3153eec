"""`--approval` and `--plan` reach the real codex: on thread start, resume and turn start."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopx_chat.codex.thread import ThreadOptions
from loopx_chat.controller.chat_controller import ChatController, ControllerConfig
from loopx_chat.controller.turn_settings import TurnSettings
from loopx_chat.model_mock.responses import MockResponsesServer
from loopx_chat.state.session_store import SessionStore


def _controller(
    tmp_path: Path, home: Path, env: dict[str, str], codex_bin: str, **options: object
) -> ChatController:
    return ChatController(
        store=SessionStore(tmp_path / "state"),
        environ={**env, "LOOPX_CHAT_CODEX_HOME": str(home)},
        cwd=tmp_path,
        codex_bin=codex_bin,
        # Nobody decides in these tests: the window passes at once and codex gets `decline`.
        config=ControllerConfig(
            options=ThreadOptions(sandbox="workspace-write", **options),  # type: ignore[arg-type]
            decision_timeout=0.5,
        ),
    )


@pytest.mark.parametrize(("policy", "asked"), [("never", 0), ("untrusted", 1)])
def test_the_policy_decides_whether_codex_asks_before_a_command(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
    policy: str,
    asked: int,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with _controller(tmp_path, bound_home, base_env, codex_bin, approval_policy=policy) as c:
        record = c.open_session("g", work)
        result = c.submit_turn(record.session_id, f"mock:shell=touch {work}/f")
        warm = c._warm.get(record.session_id)
        assert warm is not None
        assert warm.thread.proc.stats.server_requests == asked
    assert result.turn.status == "completed"
    # Asked and, with nobody deciding in the window, declined: the file is absent; never
    # asked: it ran.
    assert (work / "f").exists() is (asked == 0)


def test_a_resumed_thread_takes_the_policy_of_the_command_that_resumes_it(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with _controller(tmp_path, bound_home, base_env, codex_bin) as c:
        session_id = c.open_session("g", work).session_id
        c.submit_turn(session_id, "mock:text=hello")  # a thread codex has written down
    with _controller(tmp_path, bound_home, base_env, codex_bin, approval_policy="untrusted") as c:
        c.submit_turn(session_id, f"mock:shell=touch {work}/f")
        warm = c._warm.get(session_id)
        assert warm is not None and warm.thread.proc.stats.server_requests == 1
    assert not (work / "f").exists()


def test_codex_keeps_a_turns_policy_for_later_turns_that_do_not_name_it(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    """`turn/start` names the policy only when it differs from the one codex applies (naming
    it costs codex 2-3 ms a turn): the real codex asking, or not, is the oracle that the
    policy of the turn before still holds when a turn does not name it."""
    work = tmp_path / "work"
    work.mkdir()
    untrusted = TurnSettings(approval_policy="untrusted")
    with _controller(tmp_path, bound_home, base_env, codex_bin) as c:
        session_id = c.open_session("g", work).session_id
        c.submit_turn(session_id, "mock:text=hello")
        warm = c._warm.get(session_id)
        assert warm is not None
        named: list[object] = []
        request = warm.thread.proc.request

        def recording(
            method: str, params: dict[str, object], *args: object, **options: object
        ) -> object:
            if method == "turn/start":
                named.append(params.get("approvalPolicy"))
            return request(method, params, *args, **options)

        warm.thread.proc.request = recording  # type: ignore[method-assign]
        asked: list[int] = []
        for n, settings in enumerate((untrusted, untrusted, None, None, untrusted)):
            before = warm.thread.proc.stats.server_requests
            c.submit_turn(session_id, f"mock:shell=touch {work}/f{n}", settings=settings)
            asked.append(warm.thread.proc.stats.server_requests - before)
    assert named == ["untrusted", None, "never", None, "untrusted"]
    assert asked == [1, 1, 0, 0, 1]
    # Asked and declined (nobody decides): absent; never asked: it ran.
    assert [(work / f"f{n}").exists() for n in range(5)] == [False, False, True, True, False]


QUESTION = (
    'mock:call=request_user_input {"questions": [{"id": "db", "header": "Database", '
    '"question": "Which one?", "options": [{"label": "SQLite", "description": "small"}, '
    '{"label": "Postgres", "description": "big"}]}]}'
)


@pytest.mark.parametrize(("plan", "asked"), [(False, 0), (True, 1)])
def test_only_plan_mode_lets_the_model_ask_a_question(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
    plan: bool,
    asked: int,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with _controller(tmp_path, bound_home, base_env, codex_bin, plan=plan) as c:
        record = c.open_session("g", work)
        result = c.submit_turn(record.session_id, QUESTION)
        warm = c._warm.get(record.session_id)
        assert warm is not None and warm.thread.proc.stats.server_requests == asked
    assert result.turn.status == "completed"
    # The model got the tool's answer back either way (unavailable, or an empty answer).
    assert mock.requests[-1]["tool_outputs"]


def test_the_cli_passes_approval_and_refuses_an_unknown_one(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
) -> None:
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(tmp_path / "s")]
    base += ["--codex-bin", codex_bin, "chat", "--sandbox", "workspace-write", "new"]
    base += ["--goal", "g", "--cwd", str(work)]
    bad = subprocess.run([*base, "--approval", "always", "hi"], env=env, capture_output=True)
    assert bad.returncode == 2 and b"always" in bad.stderr and b"Traceback" not in bad.stderr
    assert not (tmp_path / "s").exists()
    done = subprocess.run(
        [
            *base,
            "--approval",
            "untrusted",
            "--decision-timeout",
            "0.5",
            f"mock:shell=touch {work}/f",
        ],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not (work / "f").exists()  # asked, and nobody approved in the window


@pytest.mark.parametrize(
    ("goal_policy", "flag", "asked"),
    [
        ("untrusted", None, 1),
        ("untrusted", "never", 0),
        (None, None, 0),
        ("never", "untrusted", 1),
        ("never", "default:untrusted", 0),
        (None, "default:untrusted", 1),
    ],
    ids=[
        "goal-asks",
        "flag-wins-never",
        "no-goal-policy",
        "flag-wins-untrusted",
        "goal-wins-over-the-service-default",
        "the-service-default-without-a-goal-policy",
    ],
)
def test_the_goals_policy_applies_unless_the_command_gives_its_own(
    tmp_path: Path,
    bound_home: Path,
    base_env: dict[str, str],
    codex_bin: str,
    mock: MockResponsesServer,
    goal_policy: str | None,
    flag: str | None,
    asked: int,
) -> None:
    from dataclasses import replace

    from tests.helpers.goals import goal_with_policy

    work = goal_with_policy(tmp_path / "state", "g", goal_policy)
    # "default:P": the controller's default only, as `serve --approval P` sets it.
    policy = (flag or "never").removeprefix("default:")
    c = _controller(tmp_path, bound_home, base_env, codex_bin, approval_policy=policy)
    if flag is not None and not flag.startswith("default:"):  # `chat send --approval FLAG`
        c.config = replace(c.config, policy_given=frozenset({"approval_policy"}))
    with c:
        record = c.open_session("g", work)
        c.submit_turn(record.session_id, f"mock:shell=touch {work}/f")
        warm = c._warm.get(record.session_id)
        assert warm is not None
        assert warm.thread.proc.stats.server_requests == asked
    assert (work / "f").exists() is (asked == 0)


def test_goal_set_refuses_an_unknown_policy_and_writes_nothing(tmp_path: Path) -> None:
    import subprocess
    import sys

    state = tmp_path / "s"
    base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "goal", "set", "g"]
    fields = ["--objective", "x", "--acceptance", "y"]
    first = subprocess.run([*base, "--approval", "always", *fields], capture_output=True, text=True)
    assert first.returncode == 1 and "error [approval_policy_unknown]" in first.stderr
    assert not state.exists()
    made = subprocess.run(
        [*base, *fields, "--approval", "untrusted", "--plan", "--json"],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    assert '"approval_policy": "untrusted"' in made.stdout and '"plan": true' in made.stdout
    before = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    bad = subprocess.run(
        [*base, "--approval", "sometimes", "--json"], capture_output=True, text=True
    )
    assert bad.returncode == 1 and '"error_code": "approval_policy_unknown"' in bad.stdout
    assert "Traceback" not in bad.stderr
    assert {p: p.read_bytes() for p in state.rglob("*") if p.is_file()} == before
    status = subprocess.run(
        [sys.executable, "-m", "loopx_chat", "--state-dir", str(state), "status", "--json"],
        capture_output=True,
        text=True,
    )
    assert '"approval_policy": "untrusted"' in status.stdout, status.stdout[:2000]

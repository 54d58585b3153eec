"""What a terminal sees: no escape codes under NO_COLOR or when stdout is not a terminal, and
shell completion that the shells can load."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.conditions import unavailable

ROOT = Path(__file__).resolve().parents[2]
ESC = b"\x1b"
SCRIPT = Path(sys.executable).parent / "loopx-chat"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return {**env, "TERM": "xterm-256color", **extra}


def _on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, bytes]:
    """Run with stdout and stderr on a real pseudo-terminal; everything it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    out = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return proc.wait(timeout=120), bytes(out)


def test_demo_styles_only_a_terminal_that_wants_colour(codex_bin: str) -> None:
    args = [sys.executable, "-m", "loopx_chat", "--codex-bin", codex_bin, "demo"]
    # The control: on a terminal, without NO_COLOR, the headings are bold.
    code, styled = _on_a_terminal(args, _env())
    assert code == 0, styled.decode(errors="replace")
    assert b"\x1b[1m" in styled and b"== 1. Pin a Codex home" in styled
    code, plain = _on_a_terminal(args, _env(NO_COLOR="1"))
    assert code == 0 and b"== 1. Pin a Codex home" in plain
    assert ESC not in plain
    piped = subprocess.run(args, env=_env(), capture_output=True, timeout=120, check=False)
    assert piped.returncode == 0 and b"== Done" in piped.stdout
    assert ESC not in piped.stdout + piped.stderr


def test_an_empty_no_color_keeps_colour(codex_bin: str) -> None:
    """no-color.org: only a non-empty value counts."""
    args = [sys.executable, "-m", "loopx_chat", "--codex-bin", codex_bin, "demo"]
    code, out = _on_a_terminal(args, _env(NO_COLOR=""))
    assert code == 0 and b"\x1b[1m" in out


def _complete(mode: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The installed console script asked for completion the way a shell asks."""
    return subprocess.run(
        [str(SCRIPT)],
        env=_env(_LOOPX_CHAT_COMPLETE=mode, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("zsh", "compdef _loopx_chat_completion loopx-chat"),
        ("bash", "complete -o nosort -F _loopx_chat_completion loopx-chat"),
        ("fish", "complete --no-files --command loopx-chat"),
    ],
)
def test_every_documented_shell_gets_a_completion_script(shell: str, marker: str) -> None:
    done = _complete(f"{shell}_source")
    assert done.returncode == 0 and marker in done.stdout, done.stdout + done.stderr
    assert f"_LOOPX_CHAT_COMPLETE={shell}_source" in (ROOT / "docs" / "reference.md").read_text()


def test_completion_answers_with_real_commands() -> None:
    answer = _complete("bash_complete", COMP_WORDS="loopx-chat launchagent st", COMP_CWORD="2")
    assert answer.stdout.split() == ["plain,start", "plain,status", "plain,stop"], answer.stdout


def test_zsh_loads_the_completion_as_the_readme_says() -> None:
    zsh = shutil.which("zsh")
    if zsh is None:
        unavailable("zsh is not installed (tools/ensure-system-tools.sh installs it)")
        return
    line = '"$(_LOOPX_CHAT_COMPLETE=zsh_source loopx-chat)"'
    readme = (ROOT / "README.md").read_text()
    assert f"eval {line}" in readme
    script = (
        f"autoload -Uz compinit && compinit -u && eval {line} && print -r -- $_comps[loopx-chat]"
    )
    done = subprocess.run(
        [zsh, "-f", "-c", script],
        env=_env(PATH=f"{SCRIPT.parent}:{os.environ['PATH']}", HOME=str(ROOT / "build")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "_loopx_chat_completion", done.stdout + done.stderr


# -- agent text never drives the terminal ---------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from loopx_chat.visible_text import ControlMode, visible_text  # noqa: E402


def _is_control(ch: str) -> bool:
    # Unicode's own list of control characters (category Cc), not our table.
    import unicodedata

    return unicodedata.category(ch) == "Cc" and ch not in "\t\n"


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_printable_replaces_every_control_and_nothing_else(text: str) -> None:
    shown = visible_text(text, ControlMode.PICTURES)
    assert len(shown) == len(text)
    assert not any(_is_control(ch) for ch in shown)
    for before, after in zip(text, shown, strict=True):
        assert (before == after) != _is_control(before)


def test_printable_shows_escape_sequences_as_pictures() -> None:
    assert (
        visible_text("\x1b]0;title\x07ok\r\n\tdone\x7f\x9b", ControlMode.PICTURES)
        == "␛]0;title␇ok␍\n\tdone␡\ufffd"
    )


def test_an_agent_reply_with_escape_codes_reaches_the_terminal_inert(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    """The real codex streams the model's reply; the terminal must see no escape byte."""
    hostile = "\x1b]52;c;Y2FuYXJ5\x07\x1b[2Jsafe-canary\x9b1m"
    env = {**base_env, "LOOPX_CHAT_CODEX_HOME": str(bound_home)}
    base = [sys.executable, "-m", "loopx_chat", "--state-dir", str(tmp_path / "s")]
    new = subprocess.run(
        [*base, "--codex-bin", codex_bin, "chat", "new", "--goal", "g", f"mock:text={hostile}"],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert new.returncode == 0, new.stderr
    assert b"safe-canary" in new.stdout  # the reply was printed...
    assert ESC not in new.stdout and b"\x07" not in new.stdout  # ...with nothing to obey
    assert "␛]52;c;Y2FuYXJ5␇␛[2Jsafe-canary\ufffd1m".encode() in new.stdout
    session = next((tmp_path / "s" / "sessions").iterdir()).name
    history = subprocess.run(
        [*base, "--codex-bin", codex_bin, "chat", "history", session],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert history.returncode == 0, history.stderr
    assert b"safe-canary" in history.stdout
    assert ESC not in history.stdout and b"\x07" not in history.stdout

"""The legacy-plist decoder, rule by rule: what each allowlisted construct gives the service,
and which rule (`detail`) refuses everything else. Pure and fast: the mutation pass over
`launchagent/legacy.py` runs these (`tests/integration/test_launchagent_shells.py` holds the
same decoder to the real shells)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from loopx_chat.launchagent.binding import (
    expand_user_home,
    startup_files_to_read,
)
from loopx_chat.launchagent.legacy import Ambiguous
from loopx_chat.launchagent.plist import LaunchAgentError, ParsedPlist
from tests.helpers.launchd import HOME, USER, resolve_binding, service_plist


def _decide(script: str, shell: str = "/bin/sh") -> str:
    return resolve_binding(existing=service_plist(args=[shell, "-c", script])).path


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("export CODEX_HOME=/a/b; exec loopx chat", "/a/b"),
        ("export CODEX_HOME='/with space/h'; exec loopx chat", "/with space/h"),
        ('export CODEX_HOME="$HOME/h q"; exec loopx chat', f"{HOME}/h q"),
        ("export CODEX_HOME=${HOME}/h; exec loopx chat", f"{HOME}/h"),
        ("export CODEX_HOME=~/h;exec loopx chat", f"{HOME}/h"),
        ("CODEX_HOME=/p exec loopx chat", "/p"),
        ("export CODEX_HOME=/c; export LOOPX_CHAT_CODEX_HOME=/l; exec loopx chat", "/l"),
        ("export PATH=/x:$PATH; exec loopx chat", f"{HOME}/.codex"),
        ("export CODEX_HOME=/a; export CODEX_HOME=/b; exec loopx chat", "/b"),
        ("export CODEX_HOME=/a#b; exec loopx chat # a comment", "/a#b"),
        ("export CODEX_HOME=/x\\$HOME; exec loopx chat", "/x$HOME"),
        ("exec >>/tmp/log 2>&1; export CODEX_HOME=/r; exec loopx chat", "/r"),
        ("export CODEX_HOME=/e; exec env -u CODEX_HOME loopx chat", f"{HOME}/.codex"),
        ("exec env CODEX_HOME=/w nohup nice -n 5 loopx chat", "/w"),
        ("A=/x; B=$A/y; export CODEX_HOME=$B; exec loopx chat", "/x/y"),
        ("export HOME=/h2; exec loopx chat", "/h2/.codex"),
        ("export CODEX_HOME=${NOPE:-/d}/x; exec loopx chat", "/d/x"),
        ("A=; export CODEX_HOME=${A-/d}/x; exec loopx chat", "/x"),
        ("A=/a; export CODEX_HOME=${A:-/d}; exec loopx chat", "/a"),
    ],
)
def test_legacy_scripts_decode(script: str, expected: str) -> None:
    assert _decide(script) == expected


@pytest.mark.parametrize(
    ("script", "detail"),
    [
        ("export CODEX_HOME=$(cat /etc/home); exec loopx chat", "command_substitution"),
        ("export CODEX_HOME=`cat f`; exec loopx chat", "command_substitution"),
        ("export CODEX_HOME=${X:=/a}; exec loopx chat", "parameter_operator"),
        ("export CODEX_HOME=$1; exec loopx chat", "special_parameter"),
        ("export CODEX_HOME=$'/a'; exec loopx chat", "dollar_quote"),
        ("export CODEX_HOME=$PWD/h; exec loopx chat", "shell_variable"),
        ("export CODEX_HOME=$TMPDIR/h; exec loopx chat", "unknown_variable"),
        ("export CODEX_HOME='/unbalanced; exec loopx chat", "unbalanced_quote"),
        ("touch /x; export CODEX_HOME=/a; exec loopx chat", "trailing_statements"),
        ("exec loopx chat; export CODEX_HOME=/a", "trailing_statements"),
        ("export CODEX_HOME=/x&&exec loopx chat", "control_flow"),
        ("export CODEX_HOME=/x | exec loopx chat", "control_flow"),
        ("cat <<EOF\nx\nEOF\nexec loopx chat", "heredoc"),
        ("export CODEX_HOME=/a*; exec loopx chat", "unquoted_special"),
        ("export CODEX_HOME=~root/h; exec loopx chat", "tilde_user"),
        ("exec env CODEX_HOME=~/h loopx chat", "tilde_in_argument"),
        ('X="a b"; exec env CODEX_HOME=$X loopx chat', "word_splitting"),
        ("CODEX_HOME=/a export CODEX_HOME; exec loopx chat", "prefix_before_builtin"),
        ("A=/a B=$A exec loopx chat", "prefix_order"),
        ("exec -c loopx chat", "exec_option"),
        ("export -n CODEX_HOME; exec loopx chat", "export_option"),
        ("unset -f CODEX_HOME; exec loopx chat", "unset_option"),
        ("export CODEX_HOME=/a; exec /Users/me/start.sh", "unknown_command"),
        ("exec env -S 'x' loopx chat", "env_option"),
        ("exec nice --foo loopx chat", "nice_option"),
        ("path=/x; exec loopx chat", "shell_variable"),
        ("export CODEX_HOME=/a", "no_program"),
        ("export CODEX_HOME=/a; exec 3<>/tmp/x; exec loopx chat", "redirection"),
    ],
)
def test_each_refusal_names_its_rule(script: str, detail: str) -> None:
    with pytest.raises(Ambiguous) as info:
        _decide(script)
    assert info.value.error_code == "legacy_binding_ambiguous"
    assert info.value.detail == detail
    assert "--codex-home" in info.value.message


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["/bin/bash", "-lc", "export CODEX_HOME=/w; exec loopx chat"], {}, "/w"),
        (["/bin/zsh", "-l", "-c", "export CODEX_HOME=/w; exec loopx"], {}, "/w"),
        (["/bin/sh", "-c", "CODEX_HOME=/w; export CODEX_HOME; exec loopx"], {}, "/w"),
        (["/bin/sh", "-c", "export A=1 CODEX_HOME=/w; exec loopx", "argv0"], {}, "/w"),
        (["/usr/bin/env", "bash", "-c", "export CODEX_HOME=/w; exec loopx"], {}, "/w"),
        (["/usr/bin/env", "CODEX_HOME=/e", "/usr/local/bin/loopx-chat", "serve"], {}, "/e"),
        (["/bin/sh", "-c", "export CODEX_HOME=/w; exec loopx >>/tmp/log 2>&1"], {}, "/w"),
        # The script's export is what the service saw, not EnvironmentVariables.
        (["/bin/sh", "-c", "export CODEX_HOME=/w; exec loopx"], {"CODEX_HOME": "/old"}, "/w"),
        # An inherited variable stays exported when the script reassigns it.
        (["/bin/sh", "-c", "CODEX_HOME=/w; exec loopx"], {"CODEX_HOME": "/old"}, "/w"),
        # A plain assignment that is never exported never reached the service.
        (["/bin/sh", "-c", "CODEX_HOME=/w\nexec loopx"], {}, f"{HOME}/.codex"),
        (
            ["/bin/sh", "-c", "unset CODEX_HOME; exec loopx"],
            {"CODEX_HOME": "/old"},
            f"{HOME}/.codex",
        ),
        (["/bin/zsh", "-f", "-c", "exec loopx"], {}, f"{HOME}/.codex"),
        # The public LoopX form: zsh reads ~/.zshenv, which does not exist here.
        (["/bin/zsh", "-c", "export CODEX_HOME=/w; exec loopx chat"], {}, "/w"),
        # $HOME and ~ use the HOME the plist gives the job, not the installer's.
        (["/bin/sh", "-c", "export CODEX_HOME=~/w; exec loopx"], {"HOME": "/h2"}, "/h2/w"),
        # env as the program passes its assignments literally: `~` is expanded by
        # loopx-chat itself, with the service's HOME.
        (["/usr/bin/env", "CODEX_HOME=~/e", "/usr/local/bin/loopx"], {}, f"{HOME}/e"),
    ],
)
def test_legacy_programs_decode_to_what_the_service_saw(
    args: list[str], env: dict[str, str], expected: str
) -> None:
    assert resolve_binding(existing=service_plist(env, args), ambient="/amb").path == expected


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        (["/bin/sh", "-c", "[ -d /x ] && export CODEX_HOME=/x; exec loopx"], "unquoted_special"),
        (
            ["/bin/sh", "-c", "if true; then export CODEX_HOME=/x; fi; exec loopx"],
            "trailing_statements",
        ),
        (["/bin/sh", "-c", ". ~/.profile; exec loopx chat"], "trailing_statements"),
        (["/bin/sh", "-c", "set -a; CODEX_HOME=/x; exec loopx"], "trailing_statements"),
        (["/bin/bash", "/Users/me/start-loopx.sh"], "script_file"),
        (["/bin/sh", "-c", "/Users/me/start-loopx.sh"], "unknown_command"),
        (["/bin/bash", "-c", "exec loopx"], "bash_env"),
        (["/bin/sh", "-a", "-c", "CODEX_HOME=/x; exec loopx"], "shell_option"),
        (["/bin/bash", "--rcfile", "/x", "-c", "exec loopx"], "shell_option"),
        (["/bin/sh", "-o", "allexport", "-c", "exec loopx"], "shell_option"),
        (["/bin/ksh", "-c", "export CODEX_HOME=/x; exec loopx"], "unknown_program"),
        (["/usr/local/bin/tool", "--env=CODEX_HOME=/x"], "unknown_program"),
        (["/usr/bin/python3", "/Users/me/wrapper.py"], "unknown_program"),
        (["/usr/bin/env"], "no_program"),
        ([], "no_program"),
    ],
)
def test_undecidable_legacy_programs_are_refused(args: list[str], detail: str) -> None:
    env = {"BASH_ENV": "/x"} if detail == "bash_env" else {}
    with pytest.raises(Ambiguous) as info:
        resolve_binding(existing=service_plist(env, args))
    assert (info.value.error_code, info.value.detail) == ("legacy_binding_ambiguous", detail)


@pytest.mark.parametrize(
    ("explicit", "existing", "ambient", "expected"),
    [
        ("/e", service_plist({"LOOPX_CHAT_CODEX_HOME": "/p"}), "/a", "/e"),
        (None, service_plist({"LOOPX_CHAT_CODEX_HOME": "/p", "CODEX_HOME": "/c"}), "/a", "/p"),
        (None, service_plist({"CODEX_HOME": "/c"}), "/a", "/c"),
        (
            None,
            service_plist(args=["/bin/zsh", "-c", "export CODEX_HOME=/l; exec loopx"]),
            "/a",
            "/l",
        ),
        (
            None,
            service_plist(args=["/usr/bin/python3", "-m", "loopx_chat"]),
            "/a",
            f"{HOME}/.codex",
        ),
        (None, service_plist({"CODEX_HOME": "~/.codex-x"}), "/a", f"{HOME}/.codex-x"),
        (None, service_plist({"HOME": "/other"}), "/a", "/other/.codex"),
        (None, service_plist({"LOOPX_CHAT_CODEX_HOME": ""}), "/a", f"{HOME}/.codex"),
        (None, None, "/a", "/a"),
        (None, None, None, f"{HOME}/.codex"),
        ("~/x", None, None, f"{HOME}/x"),
    ],
)
def test_binding_precedence(
    explicit: str | None, existing: ParsedPlist | None, ambient: str | None, expected: str
) -> None:
    assert resolve_binding(explicit=explicit, existing=existing, ambient=ambient).path == expected


@pytest.mark.parametrize("value", ["relative/home", "./x"])
def test_relative_binding_refused(value: str) -> None:
    with pytest.raises(LaunchAgentError) as info:
        resolve_binding(explicit=value)
    assert info.value.error_code == "codex_home_not_absolute"


def test_expand_user_home_is_prefix_only() -> None:
    assert expand_user_home("/a/~/b", HOME) == "/a/~/b"
    assert expand_user_home("~", HOME) == HOME
    assert expand_user_home("~x/b", HOME) == "~x/b"


# ---- wrappers and startup files, rule by rule -------------------------------------------


def _service_env(args: Sequence[str], env: dict[str, str] | None = None) -> dict[str, str]:
    from loopx_chat.launchagent.legacy import decode_service, launchd_environment

    base, origin = launchd_environment(env or {}, user_home=HOME, user="me", shell="/bin/zsh")
    return dict(decode_service(args, base, origin, {}).environment)


@pytest.mark.parametrize(
    ("args", "present", "absent"),
    [
        (["/usr/bin/env", "-i", "A=1", "/x/loopx"], {"A": "1"}, ("HOME", "PATH")),
        (["/usr/bin/env", "-", "A=1", "/x/loopx"], {"A": "1"}, ("HOME",)),
        (["/usr/bin/env", "--ignore-environment", "/x/loopx"], {}, ("HOME",)),
        (["/usr/bin/env", "-u", "USER", "/x/loopx"], {"HOME": HOME}, ("USER",)),
        (["/usr/bin/env", "--unset", "USER", "/x/loopx"], {"HOME": HOME}, ("USER",)),
        (["/usr/bin/env", "--unset=USER", "/x/loopx"], {"HOME": HOME}, ("USER",)),
        (["/usr/bin/env", "--", "B=2", "/x/loopx"], {"B": "2"}, ()),
        (["/usr/bin/nohup", "--", "/x/loopx"], {"HOME": HOME}, ()),
        (["/usr/bin/nice", "-n", "5", "/x/loopx"], {"HOME": HOME}, ()),
        (["/usr/bin/nice", "-5", "/x/loopx"], {"HOME": HOME}, ()),
        (["/usr/bin/nice", "--adjustment=3", "/x/loopx"], {"HOME": HOME}, ()),
    ],
)
def test_each_wrapper_changes_the_environment_as_it_does(
    args: list[str], present: dict[str, str], absent: tuple[str, ...]
) -> None:
    env = _service_env(args)
    assert {k: env.get(k) for k in present} == present
    assert [k for k in absent if k in env] == []


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        (["/usr/bin/env", "A=1"], "no_program"),
        (["/usr/bin/env", "-S", "x", "/x/loopx"], "env_option"),
        (["/usr/bin/nice", "--foo", "/x/loopx"], "nice_option"),
        (["/usr/bin/nohup"], "no_program"),
        (["/usr/bin/env", "-u", "X"], "no_program"),
    ],
)
def test_each_wrapper_refusal_names_its_rule(args: list[str], detail: str) -> None:
    with pytest.raises(Ambiguous) as info:
        _service_env(args)
    assert info.value.detail == detail


def _zsh(script: str, startup: dict[str, str | None], env: dict[str, str] | None = None) -> str:
    from loopx_chat.launchagent.legacy import decode_service, launchd_environment

    base, origin = launchd_environment(env or {}, user_home=HOME, user="me", shell="/bin/zsh")
    launch = decode_service(["/bin/zsh", "-c", script], base, origin, startup)
    return launch.environment.get("CODEX_HOME", "")


ZSHENV = f"{HOME}/.zshenv"
SYSTEM = {"/etc/zshenv": None, "/etc/zsh/zshenv": None}


def test_zsh_needs_every_startup_file_it_would_read() -> None:
    with pytest.raises(Ambiguous) as info:
        _zsh("export CODEX_HOME=/a; exec loopx", {ZSHENV: None})
    assert info.value.detail == "startup_file_unread"
    assert _zsh("export CODEX_HOME=/a; exec loopx", {**SYSTEM, ZSHENV: None}) == "/a"


@pytest.mark.parametrize(
    ("text", "inert"),
    [
        ("export EDITOR=vi\nPATH=/opt/x:$PATH\n", True),
        ("# CODEX_HOME in a comment only\nexport EDITOR=vi\n", True),
        ("export CODEX_HOME=/z\n", False),
        ("export LOOPX_CHAT_CODEX_HOME=/z\n", False),
        ("setopt allexport\n", False),
        ("source ~/.other\n", False),
        (". ~/.other\n", False),
        ('eval "$(x)"\n', False),
        ("export HOME=/elsewhere\n", False),
        ("ZDOTDIR=/x\n", False),
        ("f() { :; }\n", False),
        ("alias exec=true\n", False),
    ],
)
def test_a_startup_file_must_be_inert(text: str, inert: bool) -> None:
    startup = {**SYSTEM, ZSHENV: text}
    if inert:
        assert _zsh("export CODEX_HOME=/a; exec loopx", startup) == "/a"
    else:
        with pytest.raises(Ambiguous) as info:
            _zsh("export CODEX_HOME=/a; exec loopx", startup)
        assert info.value.detail == "startup_file"


def test_zdotdir_moves_zshenv_and_f_skips_it() -> None:
    moved = {**SYSTEM, "/zd/.zshenv": "export CODEX_HOME=/z\n"}
    with pytest.raises(Ambiguous):
        _zsh("exec loopx", moved, env={"ZDOTDIR": "/zd"})
    from loopx_chat.launchagent.legacy import decode_service, launchd_environment

    base, origin = launchd_environment({}, user_home=HOME, user="me", shell="/bin/zsh")
    launch = decode_service(["/bin/zsh", "-f", "-c", "exec loopx"], base, origin, SYSTEM)
    assert "CODEX_HOME" not in launch.environment


@pytest.mark.parametrize(
    ("argv", "files"),
    [
        (["/bin/sh", "-c", "x"], ()),
        (["/bin/dash", "-c", "x"], ()),
        (["/bin/bash", "-c", "x"], ()),
        (["/bin/sh", "-l", "-c", "x"], ("/etc/profile", f"{HOME}/.profile")),
        (["/bin/dash", "-lc", "x"], ("/etc/profile", f"{HOME}/.profile")),
        (
            ["/bin/bash", "--login", "-c", "x"],
            ("/etc/profile", f"{HOME}/.bash_profile", f"{HOME}/.bash_login", f"{HOME}/.profile"),
        ),
        (["/bin/bash", "--login", "--noprofile", "-c", "x"], ()),
        (["/bin/zsh", "-c", "x"], ("/etc/zshenv", "/etc/zsh/zshenv", f"{HOME}/.zshenv")),
        (["/bin/zsh", "-f", "-c", "x"], ("/etc/zshenv", "/etc/zsh/zshenv")),
    ],
)
def test_the_startup_files_each_shell_reads(argv: list[str], files: tuple[str, ...]) -> None:
    existing = ParsedPlist(data={}, program_arguments=tuple(argv))
    assert startup_files_to_read(existing, USER) == files

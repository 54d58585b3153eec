"""The legacy decoder's rules one at a time, each with a test that names it.

Decoded cases come from `tests/helpers/legacy_decoder_cases.py`, whose expected values the real
shells confirm in `tests/integration/test_launchagent_shells.py`. The name tables here
(variables a shell sets, commands a startup file must not run, each shell's options) are
written from the shells' documentation, never imported from the module: a rule table with an
entry missing must fail one of these. Pure and fast: the mutation pass over
`launchagent/legacy.py` runs this file for every mutant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from loopx_chat.launchagent.legacy import (
    Ambiguous,
    ServiceLaunch,
    ShellCall,
    decode_service,
    launchd_environment,
    shell_call,
    startup_files,
    startup_files_for,
)
from tests.helpers.legacy_decoder_cases import ARGV_SCRIPT, ARGVS, HOME, SCRIPTS, USER, Decoded

ZSH_SYSTEM = {"/etc/zshenv": None, "/etc/zsh/zshenv": None, f"{HOME}/.zshenv": None}


def _launch(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    startup: Mapping[str, str | None] | None = None,
) -> ServiceLaunch:
    base, origin = launchd_environment(env or {}, user_home=HOME, user=USER, shell="/bin/zsh")
    return decode_service(args, base, origin, ZSH_SYSTEM if startup is None else startup)


def _refused(args: Sequence[str], env: Mapping[str, str] | None = None, **kw: object) -> str:
    with pytest.raises(Ambiguous) as info:
        _launch(args, env, **kw)  # type: ignore[arg-type]
    assert info.value.error_code == "legacy_binding_ambiguous"
    assert f"[{info.value.detail}]" in info.value.message
    return info.value.detail


def _script(script: str) -> ServiceLaunch:
    return _launch(["/bin/sh", "-c", script])


def _script_refused(script: str) -> str:
    return _refused(["/bin/sh", "-c", script])


# ---- what each allowlisted construct gives the service (real shells agree) --------------


@pytest.mark.parametrize("case", SCRIPTS, ids=[repr(c.script)[1:40] for c in SCRIPTS])
def test_each_construct_gives_the_service_what_the_shells_give(case: Decoded) -> None:
    launch = _script(case.script)
    assert launch.program[1:] == case.argv
    assert {k: launch.environment.get(k) for k in case.env} == case.env
    assert launch.shell == "sh"


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a[:-1]) for a in ARGVS])
def test_each_allowed_shell_option_decodes(argv: tuple[str, ...]) -> None:
    launch = _launch(argv)
    assert launch.environment["CODEX_HOME"] == "/w"
    assert launch.shell == argv[0].rsplit("/", 1)[1]


def test_the_environment_launchd_gives_and_where_each_variable_came_from() -> None:
    env, origin = launchd_environment(
        {"A": "1", "HOME": "/h"}, user_home=HOME, user="u", shell="/bin/zsh"
    )
    assert env == {
        "HOME": "/h",
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "USER": "u",
        "LOGNAME": "u",
        "SHELL": "/bin/zsh",
        "A": "1",
    }
    assert origin == {
        "HOME": "EnvironmentVariables",
        "PATH": "launchd",
        "USER": "launchd",
        "LOGNAME": "launchd",
        "SHELL": "launchd",
        "A": "EnvironmentVariables",
    }
    bare, _ = launchd_environment({}, user_home=HOME, user=None, shell=None)
    assert bare == {"HOME": HOME, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}


def test_where_each_variable_came_from() -> None:
    launch = _launch(
        ["/usr/bin/env", "-u", "USER", "B=2", "/bin/sh", "-c", "export C=3 D; exec loopx-chat"],
        {"D": "4"},
    )
    assert launch.program == ("loopx-chat",)
    assert dict(launch.origin) == {
        "HOME": "launchd",
        "PATH": "launchd",
        "USER": "env wrapper",
        "LOGNAME": "launchd",
        "SHELL": "launchd",
        "D": "EnvironmentVariables",
        "B": "env wrapper",
        "C": "shell script",
    }
    unset = _script("export A=1; unset A LOGNAME; exec loopx-chat")
    assert unset.origin["A"] == unset.origin["LOGNAME"] == "shell script"
    assert "LOGNAME" not in unset.environment


def test_a_direct_program_keeps_its_argv_and_has_no_shell() -> None:
    launch = _launch(["/usr/local/bin/loopx-chat", "serve", "--port", "1"])
    assert launch.program == ("/usr/local/bin/loopx-chat", "serve", "--port", "1")
    assert launch.shell is None
    python = _launch(["/usr/bin/python3", "-m", "loopx_chat", "serve"])
    assert python.program == ("/usr/bin/python3", "-m", "loopx_chat", "serve")


# ---- the shells and their options -------------------------------------------------------


@pytest.mark.parametrize("shell", ["sh", "bash", "zsh", "dash"])
def test_every_modelled_shell_is_read(shell: str) -> None:
    launch = _launch([f"/bin/{shell}", "-c", ARGV_SCRIPT])
    assert (launch.shell, launch.environment["CODEX_HOME"]) == (shell, "/w")


@pytest.mark.parametrize(
    "args",
    [
        ["/bin/ksh", "-c", ARGV_SCRIPT],
        ["/bin/mksh", "-c", ARGV_SCRIPT],
        ["/bin/fish", "-c", ARGV_SCRIPT],
        ["/bin/csh", "-c", ARGV_SCRIPT],
    ],
)
def test_other_shells_are_unknown_programs(args: list[str]) -> None:
    assert _refused(args) == "unknown_program"


@pytest.mark.parametrize(
    "args",
    [
        # long options: bash's four, zsh's two, none for sh and dash
        ["/bin/sh", "--login", "-c", ARGV_SCRIPT],
        ["/bin/dash", "--posix", "-c", ARGV_SCRIPT],
        ["/bin/bash", "--rcfile", "/x", "-c", ARGV_SCRIPT],
        ["/bin/bash", "--no-rcs", "-c", ARGV_SCRIPT],
        ["/bin/bash", "--init-file", "-c", ARGV_SCRIPT],
        ["/bin/zsh", "--norc", "-c", ARGV_SCRIPT],
        ["/bin/zsh", "--posix", "-c", ARGV_SCRIPT],
        # letters other than c, e, x, l (and zsh's -f)
        ["/bin/sh", "-a", "-c", ARGV_SCRIPT],
        ["/bin/sh", "-f", "-c", ARGV_SCRIPT],
        ["/bin/bash", "-fc", ARGV_SCRIPT],
        ["/bin/sh", "-o", "allexport", "-c", ARGV_SCRIPT],
        ["/bin/sh", "-ic", ARGV_SCRIPT],
        ["/bin/zsh", "-ac", ARGV_SCRIPT],
        # `+` options, before or after the others
        ["/bin/sh", "+e", "-c", ARGV_SCRIPT],
        ["/bin/sh", "-e", "+x", "-c", ARGV_SCRIPT],
    ],
)
def test_shell_options_of_unknown_effect_are_refused(args: list[str]) -> None:
    assert _refused(args) == "shell_option"


@pytest.mark.parametrize(
    "args",
    [
        ["/bin/bash", "/Users/me/start.sh"],
        ["/bin/sh", "-e", "/Users/me/start.sh"],
        ["/bin/sh", "-c"],
        ["/bin/sh", "-e"],
        ["/bin/sh"],
        ["/bin/sh", "-", "-c", ARGV_SCRIPT],
        ["/bin/sh", "-c", "--"],
    ],
)
def test_a_shell_without_a_c_script_runs_a_file(args: list[str]) -> None:
    assert _refused(args) == "script_file"


@pytest.mark.parametrize(
    ("args", "call"),
    [
        (["/bin/sh", "-c", "s"], ShellCall("sh", "s", login=False, no_rcs=False)),
        (["/bin/sh", "-lc", "s", "x"], ShellCall("sh", "s", login=True, no_rcs=False)),
        (["/bin/sh", "-l", "-c", "--", "s"], ShellCall("sh", "s", login=True, no_rcs=False)),
        (["/bin/bash", "--login", "-c", "s"], ShellCall("bash", "s", login=True, no_rcs=False)),
        (
            ["/bin/bash", "-l", "--noprofile", "-c", "s"],
            ShellCall("bash", "s", login=False, no_rcs=False),
        ),
        (["/bin/zsh", "-f", "-c", "s"], ShellCall("zsh", "s", login=False, no_rcs=True)),
        (["/bin/zsh", "--no-rcs", "-c", "s"], ShellCall("zsh", "s", login=False, no_rcs=True)),
        (["/bin/zsh", "--login", "-xc", "s"], ShellCall("zsh", "s", login=True, no_rcs=False)),
    ],
)
def test_what_each_shell_option_means(args: list[str], call: ShellCall) -> None:
    assert shell_call(args) == call


# ---- startup files ----------------------------------------------------------------------


def _call(shell: str, *, login: bool = False, no_rcs: bool = False) -> ShellCall:
    return ShellCall(shell, "s", login=login, no_rcs=no_rcs)


@pytest.mark.parametrize(
    ("call", "env", "files"),
    [
        (_call("sh"), {"HOME": "/h"}, ()),
        (_call("bash"), {"HOME": "/h"}, ()),
        (_call("sh", login=True), {"HOME": "/h"}, ("/etc/profile", "/h/.profile")),
        (_call("dash", login=True), {"HOME": "/h"}, ("/etc/profile", "/h/.profile")),
        (
            _call("bash", login=True),
            {"HOME": "/h"},
            ("/etc/profile", "/h/.bash_profile", "/h/.bash_login", "/h/.profile"),
        ),
        (_call("zsh"), {"HOME": "/h"}, ("/etc/zshenv", "/etc/zsh/zshenv", "/h/.zshenv")),
        (
            _call("zsh"),
            {"HOME": "/h", "ZDOTDIR": "/z"},
            ("/etc/zshenv", "/etc/zsh/zshenv", "/z/.zshenv"),
        ),
        (
            _call("zsh"),
            {"HOME": "/h", "ZDOTDIR": ""},
            ("/etc/zshenv", "/etc/zsh/zshenv", "/h/.zshenv"),
        ),
        (_call("zsh", no_rcs=True), {"HOME": "/h"}, ("/etc/zshenv", "/etc/zsh/zshenv")),
        (_call("zsh", login=True, no_rcs=True), {"HOME": "/h"}, ("/etc/zshenv", "/etc/zsh/zshenv")),
        (
            _call("zsh", login=True),
            {"HOME": "/h", "ZDOTDIR": "/z"},
            (
                "/etc/zshenv",
                "/etc/zsh/zshenv",
                "/z/.zshenv",
                "/etc/zprofile",
                "/etc/zsh/zprofile",
                "/z/.zprofile",
                "/etc/zlogin",
                "/etc/zsh/zlogin",
                "/z/.zlogin",
            ),
        ),
    ],
)
def test_the_startup_files_a_shell_reads_in_order(
    call: ShellCall, env: dict[str, str], files: tuple[str, ...]
) -> None:
    assert startup_files(call, env) == files


@pytest.mark.parametrize(
    ("argv", "env", "files"),
    [
        (["/bin/zsh", "-f", "-c", "x"], {"HOME": "/h"}, ("/etc/zshenv", "/etc/zsh/zshenv")),
        (
            ["/usr/bin/env", "HOME=/e", "/bin/sh", "-lc", "x"],
            {"HOME": "/h"},
            ("/etc/profile", "/e/.profile"),
        ),
        (["/usr/bin/nohup", "/bin/sh", "-c", "x"], {"HOME": "/h"}, ()),
        (["/usr/local/bin/loopx-chat", "serve"], {"HOME": "/h"}, ()),
        (["/bin/sh", "-a", "-c", "x"], {"HOME": "/h"}, ()),
        (["/usr/bin/env"], {"HOME": "/h"}, ()),
    ],
)
def test_the_startup_files_a_caller_must_read(
    argv: list[str], env: dict[str, str], files: tuple[str, ...]
) -> None:
    assert startup_files_for(argv, env) == files


def test_every_startup_file_must_have_been_read() -> None:
    args = ["/bin/zsh", "-c", ARGV_SCRIPT]
    for missing in ZSH_SYSTEM:
        partial = {k: v for k, v in ZSH_SYSTEM.items() if k != missing}
        assert _refused(args, startup=partial) == "startup_file_unread"
    login = ["/bin/bash", "-l", "-c", ARGV_SCRIPT]
    assert _refused(login, startup={"/etc/profile": None}) == "startup_file_unread"
    read = dict.fromkeys(
        ["/etc/profile", f"{HOME}/.bash_profile", f"{HOME}/.bash_login", f"{HOME}/.profile"]
    )
    assert _launch(login, startup=read).environment["CODEX_HOME"] == "/w"


# Every command that can set a variable, run other code, or change how the shell reads the
# script, from the bash, dash and zsh manuals' lists of builtins.
STARTUP_COMMANDS = [
    "source ~/.other",
    ". ~/.other",
    'eval "$X"',
    "alias ls=true",
    "setopt allexport",
    "unsetopt globalrcs",
    "set -a",
    "emulate sh",
    "exec zsh",
    "function f { :; }",
    "typeset -x A=1",
    "declare -x A=1",
    "readonly A=1",
    "local A=1",
    "unset PATH",
    "builtin cd /",
    "command cd /",
    "trap 'x' EXIT",
    "enable -n cd",
    "disable cd",
    "autoload -U x",
    "zmodload zsh/parameter",
    # the same, after each separator a command can follow
    "true;set -a",
    "true && set -a",
    "true || set -a",
    "true | set -a",
    "(set -a)",
    "x=`set -a`",
    "\tset -a",
    "true\nset -a",
    # what sets a home variable, HOME, or where zsh reads from, in any form
    "export CODEX_HOME=/z",
    "CODEX_HOME=/z",
    "LOOPX_CHAT_CODEX_HOME=/z",
    "export CODEX_SQLITE_HOME=/z",
    "ZDOTDIR=/x",
    "HOME=/x",
    "HOME =/x",
    "export A=1 HOME",
    "f() { :; }",
    "f ( ) { :; }",
    "export X=a#CODEX_HOME",
]


@pytest.mark.parametrize("text", STARTUP_COMMANDS)
def test_a_startup_file_running_any_of_these_is_refused(text: str) -> None:
    startup = {**ZSH_SYSTEM, f"{HOME}/.zshenv": f"# a comment\n{text}\n"}
    assert _refused(["/bin/zsh", "-c", ARGV_SCRIPT], startup=startup) == "startup_file"


# Their neighbours: the same letters as part of another word, or in a comment.
INERT = [
    "export EDITOR=vi",
    "PATH=/opt/x:$PATH",
    "sources=1",
    "setopt_x=1",
    "export LANG=C.UTF-8 # set -a",
    "# source ~/.other",
    "  # CODEX_HOME=/z",
    "echo hello-source",
    "export MYHOME=/x",
    "HOMEBREW_X=1",
    "x=unset",
    "PS1=typeset",
    "",
]


@pytest.mark.parametrize("text", INERT)
def test_an_inert_startup_file_is_fine(text: str) -> None:
    startup = {**ZSH_SYSTEM, f"{HOME}/.zshenv": f"{text}\n"}
    launch = _launch(["/bin/zsh", "-c", ARGV_SCRIPT], startup=startup)
    assert launch.environment["CODEX_HOME"] == "/w"


@pytest.mark.parametrize(
    ("shell", "variable", "refused"),
    [
        ("bash", "BASH_ENV", True),
        ("bash", "ENV", True),
        ("sh", "BASH_ENV", True),
        ("sh", "ENV", True),
        # dash reads ENV only when interactive, zsh neither file for `-c`
        ("dash", "BASH_ENV", False),
        ("dash", "ENV", False),
        ("zsh", "BASH_ENV", False),
        ("zsh", "ENV", False),
    ],
)
def test_bash_env_and_env_name_a_file_bash_reads_first(
    shell: str, variable: str, refused: bool
) -> None:
    args = [f"/bin/{shell}", "-c", ARGV_SCRIPT]
    if refused:
        assert _refused(args, {variable: "/x"}) == "bash_env"
        assert _launch(args, {variable: ""}).environment["CODEX_HOME"] == "/w"
    else:
        assert _launch(args, {variable: "/x"}).environment["CODEX_HOME"] == "/w"


# ---- variables the shell sets itself ----------------------------------------------------

# Set or changed by bash, dash or zsh themselves (their manuals' "Shell Variables" and
# "Parameters Set By The Shell"), or naming a file the shell reads first.
SHELL_SET = [
    *("PWD", "OLDPWD", "SHLVL", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "PPID"),
    *("UID", "EUID", "GID", "EGID", "OPTIND", "OPTARG", "IFS", "PS1", "PS2", "PS4"),
    *("HOSTNAME", "HOSTTYPE", "MACHTYPE", "OSTYPE", "USERNAME", "TTY", "HISTCMD"),
    *("COLUMNS", "LINES", "EPOCHSECONDS", "EPOCHREALTIME", "ERRNO", "_"),
    *("ENV", "BASH_ENV", "ZDOTDIR"),
]
# Every BASH* and ZSH* name is the shell's to read (bash and zsh add new ones each release).
BASH_ZSH = ["BASH", "BASHOPTS", "BASH_VERSION", "BASHPID", "ZSH_NAME", "ZSH_VERSION", "ZSHX"]


@pytest.mark.parametrize("name", SHELL_SET + BASH_ZSH)
def test_a_variable_the_shell_sets_is_never_read(name: str) -> None:
    assert _script_refused(f"export CODEX_HOME=${name}; exec loopx-chat") == "shell_variable"
    assert _script_refused(f'exec loopx-chat "${{{name}}}"') == "shell_variable"
    assert _script_refused(f"export CODEX_HOME=${{{name}:-/d}}; exec loopx-chat") == (
        "shell_variable"
    )


@pytest.mark.parametrize("name", SHELL_SET)
def test_a_variable_the_shell_sets_is_never_assigned(name: str) -> None:
    assert _script_refused(f"{name}=/x; exec loopx-chat") == "shell_variable"
    assert _script_refused(f"export {name}=/x; exec loopx-chat") == "shell_variable"
    assert _script_refused(f"{name}=/x exec loopx-chat") == "shell_variable"


@pytest.mark.parametrize("name", ["path", "Home", "codex_home", "a", "_x"])
def test_lowercase_names_are_shell_variables_in_zsh(name: str) -> None:
    assert _script_refused(f"{name}=/x; exec loopx-chat") == "shell_variable"
    assert _script_refused(f"exec loopx-chat ${name}") == "shell_variable"


@pytest.mark.parametrize("name", ["A", "CODEX_HOME", "MY_BASH", "XZSH", "_A", "PATH2", "PWDX"])
def test_ordinary_names_are_assigned_and_read(name: str) -> None:
    launch = _script(f"export {name}=/v; exec loopx-chat ${name} ${{{name}}}")
    assert launch.program[1:] == ("/v", "/v")
    assert launch.environment[name] == "/v"


def test_tmpdir_is_launchds_own_folder_and_not_known() -> None:
    assert _script_refused("exec loopx-chat $TMPDIR") == "unknown_variable"
    assert _script("TMPDIR=/t; exec loopx-chat $TMPDIR").program[1:] == ("/t",)
    assert _launch(["/bin/sh", "-c", "exec loopx-chat $TMPDIR"], {"TMPDIR": "/p"}).program[1:] == (
        "/p",
    )


# ---- the script's statements: one rule each ---------------------------------------------


@pytest.mark.parametrize(
    ("script", "detail"),
    [
        # control flow and lists: every operator that is not a plain `;` or newline
        ("exec loopx-chat &", "control_flow"),
        ("true & exec loopx-chat", "control_flow"),
        ("true && exec loopx-chat", "control_flow"),
        ("true || exec loopx-chat", "control_flow"),
        ("true | exec loopx-chat", "control_flow"),
        ("(exec loopx-chat)", "control_flow"),
        ("exec loopx-chat )", "control_flow"),
        ("exec loopx-chat a;;", "control_flow"),
        ("x;;exec loopx-chat", "control_flow"),
        ("exec loopx-chat a|b", "control_flow"),
        ("exec loopx-chat a&", "control_flow"),
        # redirections that cannot be read
        ("cat <<EOF\nx\nEOF\nexec loopx-chat", "heredoc"),
        ("exec loopx-chat 0<<EOF\nEOF", "heredoc"),
        ("exec loopx-chat <>/tmp/x", "redirection"),
        ("exec loopx-chat >&", "redirection"),
        ("exec loopx-chat >&x", "redirection"),
        ("exec loopx-chat >", "redirection"),
        ("exec loopx-chat >\nexec loopx-chat", "redirection"),
        ("exec loopx-chat > ;", "redirection"),
        ("exec loopx-chat 2> \t", "redirection"),
        ("exec loopx-chat >(x)", "redirection"),
        ("exec loopx-chat <(x)", "redirection"),
        ("exec loopx-chat >>|x", "redirection"),
        ("exec loopx-chat >>&2", "redirection"),  # bash, dash: syntax error; zsh: both streams
        ("exec loopx-chat 2>|&1", "redirection"),
        ("exec loopx-chat &>x", "control_flow"),
        ("exec loopx-chat >&&x", "redirection"),
        ("exec loopx-chat <|x", "redirection"),
        ("exec loopx-chat ><x", "redirection"),
        ("exec loopx-chat > ;true", "redirection"),
        ("exec loopx-chat 2>\t;true", "redirection"),
        # quoting the lexer cannot close
        ("exec loopx-chat 'a", "unbalanced_quote"),
        ('exec loopx-chat "a', "unbalanced_quote"),
        ('exec loopx-chat "a\\"', "unbalanced_quote"),
        ("exec loopx-chat a\\", "unbalanced_quote"),
        # expansions outside the grammar
        ("exec loopx-chat $(x)", "command_substitution"),
        ('exec loopx-chat "$(x)"', "command_substitution"),
        ("exec loopx-chat `x`", "command_substitution"),
        ('exec loopx-chat "`x`"', "command_substitution"),
        ("exec loopx-chat a`x`", "command_substitution"),
        ("exec loopx-chat ${A:=x}", "parameter_operator"),
        ("exec loopx-chat ${A:+x}", "parameter_operator"),
        ("exec loopx-chat ${#A}", "parameter_operator"),
        ("exec loopx-chat ${A", "parameter_operator"),
        ("exec loopx-chat ${A:-$B}", "parameter_operator"),
        ("exec loopx-chat ${A:-~}", "parameter_operator"),
        ('exec loopx-chat "${A:-a b}"', "parameter_operator"),
        ("exec loopx-chat $1", "special_parameter"),
        ("exec loopx-chat $@", "special_parameter"),
        ('exec loopx-chat "$*"', "special_parameter"),
        ("exec loopx-chat $$", "special_parameter"),
        ("exec loopx-chat a$", "special_parameter"),
        ("exec loopx-chat $'a'", "dollar_quote"),
        ('exec loopx-chat $"a"', "dollar_quote"),
        # unquoted characters a shell would treat specially
        ("exec loopx-chat a*", "unquoted_special"),
        ("exec loopx-chat a?", "unquoted_special"),
        ("exec loopx-chat [a]", "unquoted_special"),
        ("exec loopx-chat a]", "unquoted_special"),
        ("exec loopx-chat {a,b}", "unquoted_special"),
        ("exec loopx-chat a}", "unquoted_special"),
        ("exec loopx-chat !a", "unquoted_special"),
        ("exec loopx-chat a^b", "unquoted_special"),
        ("exec loopx-chat =a", "unquoted_special"),
        ("exec loopx-chat a~", "unquoted_special"),
        ("A=x:~/b; exec loopx-chat", "unquoted_special"),
        ("exec loopx-chat >#x", "unquoted_special"),
        ("exec loopx-chat ~root", "tilde_user"),
        ("exec loopx-chat ~+", "tilde_user"),
        ("export CODEX_HOME=~root/h; exec loopx-chat", "tilde_user"),
        ("exec loopx-chat a=~/x", "tilde_in_argument"),
        ("exec env CODEX_HOME=~ loopx-chat", "tilde_in_argument"),
        # word splitting and globbing of an unquoted value
        ("X='a b'; exec loopx-chat $X", "word_splitting"),
        ("X='a\tb'; exec loopx-chat $X", "word_splitting"),
        ("X='a\nb'; exec loopx-chat $X", "word_splitting"),
        ("X='a*'; exec loopx-chat $X", "word_splitting"),
        ("X='a?'; exec loopx-chat ${X}", "word_splitting"),
        ("X='[a]'; exec loopx-chat $X", "word_splitting"),
        ("X=']'; exec loopx-chat $X", "word_splitting"),
        ("exec loopx-chat ${NOPE:-a*}", "parameter_operator"),
        ("X='a b'; exec loopx-chat ${NOPE:-$X}", "parameter_operator"),
        ("X='a b'; exec env A=$X loopx-chat", "word_splitting"),
        ("X='a b'; $X", "word_splitting"),
        # statements
        ("CODEX_HOME=/a export CODEX_HOME; exec loopx-chat", "prefix_before_builtin"),
        ("A=/a unset B; exec loopx-chat", "prefix_before_builtin"),
        ("A=/a exec; exec loopx-chat", "prefix_before_builtin"),
        ("A=/a B=$A exec loopx-chat", "prefix_order"),
        ("A=/a B=${A}x loopx-chat", "prefix_order"),
        ("A=/a B=${A:-x} loopx-chat", "prefix_order"),
        ("exec -c loopx-chat", "exec_option"),
        ("exec -a name loopx-chat", "exec_option"),
        ("export -n CODEX_HOME; exec loopx-chat", "export_option"),
        ("export -p; exec loopx-chat", "export_option"),
        ("export 1A; exec loopx-chat", "export_option"),
        ("export A-B; exec loopx-chat", "export_option"),
        ("unset -f A; exec loopx-chat", "unset_option"),
        ("unset 1A; exec loopx-chat", "unset_option"),
        ("unset A.B; exec loopx-chat", "unset_option"),
        ("touch /x; exec loopx-chat", "trailing_statements"),
        ("loopx-chat; exec loopx-chat", "trailing_statements"),
        ("exec loopx-chat; export A=1", "trailing_statements"),
        ("exec loopx-chat\ntrue", "trailing_statements"),
        # `export $X` / `unset $X` split the value into names: not read here
        ("X='A B'; export $X; exec loopx-chat", "word_splitting"),
        ("X='A B'; unset $X; exec loopx-chat", "word_splitting"),
        ("exec /Users/me/start.sh", "unknown_command"),
        # a quoted `NAME=` is a command's name, not an assignment
        ("'A=1' exec loopx-chat", "unknown_command"),
        ('"A=1" exec loopx-chat', "unknown_command"),
        ("\\A=1 exec loopx-chat", "unknown_command"),
        ("$NOPE=1 exec loopx-chat", "unknown_command"),
        ("exec loopx-chat; >/dev/null", "trailing_statements"),
        ("exec loopx-chatx", "unknown_command"),
        ("python3 /x.py", "unknown_command"),
        ("export CODEX_HOME=/a", "no_program"),
        ("A=1", "no_program"),
        ("exec >/dev/null", "no_program"),
        ("", "no_program"),
        ("# only a comment", "no_program"),
        ("exec env A=1", "no_program"),
        ("exec env loopx-chatx", "unknown_program"),
        ("exec nohup x", "unknown_program"),
    ],
)
def test_each_refusal_names_the_rule_that_refused(script: str, detail: str) -> None:
    assert _script_refused(script) == detail


# ---- wrappers in front of the program ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "program", "env"),
    [
        (["/usr/bin/env", "-i", "A=1", "/x/loopx"], ("/x/loopx",), {"A": "1", "HOME": None}),
        (["/usr/bin/env", "-", "A=1", "/x/loopx"], ("/x/loopx",), {"A": "1", "PATH": None}),
        (
            ["/usr/bin/env", "--ignore-environment", "/x/loopx", "-i"],
            ("/x/loopx", "-i"),
            {"USER": None},
        ),
        (["/usr/bin/env", "A=1", "-i", "/x/loopx"], ("/x/loopx",), {"A": None, "HOME": None}),
        (["/usr/bin/env", "-u", "USER", "/x/loopx"], ("/x/loopx",), {"USER": None, "HOME": HOME}),
        (["/usr/bin/env", "--unset", "USER", "/x/loopx"], ("/x/loopx",), {"USER": None}),
        (["/usr/bin/env", "--unset=USER", "/x/loopx"], ("/x/loopx",), {"USER": None}),
        (["/usr/bin/env", "-u", "NOPE", "/x/loopx"], ("/x/loopx",), {"USER": USER}),
        (["/usr/bin/env", "--", "B=2", "/x/loopx"], ("/x/loopx",), {"B": "2"}),
        (["/usr/bin/env", "A=1\n2", "B==", "/x/loopx"], ("/x/loopx",), {"A": "1\n2", "B": "="}),
        (["/usr/bin/env", "A=", "/x/loopx", "C=3"], ("/x/loopx", "C=3"), {"A": "", "C": None}),
        (["/usr/bin/env", "A=~/x", "/x/loopx"], ("/x/loopx",), {"A": "~/x"}),
        (["env", "env", "A=1", "/x/loopx"], ("/x/loopx",), {"A": "1"}),
        (["/usr/bin/nohup", "/x/loopx", "--"], ("/x/loopx", "--"), {"HOME": HOME}),
        (["/usr/bin/nohup", "--", "/x/loopx"], ("/x/loopx",), {}),
        (["/usr/bin/nice", "-n", "5", "/x/loopx", "-n"], ("/x/loopx", "-n"), {}),
        (["/usr/bin/nice", "-n", "-5", "/x/loopx"], ("/x/loopx",), {}),
        (["/usr/bin/nice", "-5", "/x/loopx"], ("/x/loopx",), {}),
        (["/usr/bin/nice", "-15", "/x/loopx"], ("/x/loopx",), {}),
        (["/usr/bin/nice", "--adjustment=3", "/x/loopx"], ("/x/loopx",), {}),
        (["/usr/bin/nice", "--adjustment=-3", "/x/loopx"], ("/x/loopx",), {}),
        (["/usr/bin/nice", "/x/loopx", "-5"], ("/x/loopx", "-5"), {}),
        (["nohup", "nice", "env", "A=1", "nohup", "/x/loopx"], ("/x/loopx",), {"A": "1"}),
    ],
)
def test_each_wrapper_form_is_unwrapped_as_the_wrapper_does(
    args: list[str], program: tuple[str, ...], env: dict[str, str | None]
) -> None:
    launch = _launch(args)
    assert launch.program == program
    assert {k: launch.environment.get(k) for k in env} == env


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        (["/usr/bin/env"], "no_program"),
        (["/usr/bin/env", "A=1"], "no_program"),
        (["/usr/bin/env", "-i"], "no_program"),
        (["/usr/bin/env", "-u", "X"], "no_program"),
        (["/usr/bin/env", "--"], "no_program"),
        (["/usr/bin/env", "-u"], "env_option"),
        (["/usr/bin/env", "--unset"], "env_option"),
        (["/usr/bin/env", "-S", "x", "/x/loopx"], "env_option"),
        (["/usr/bin/env", "-0", "/x/loopx"], "env_option"),
        (["/usr/bin/env", "-iu", "X", "/x/loopx"], "env_option"),
        (["/usr/bin/env", "--chdir=/", "/x/loopx"], "env_option"),
        (["/usr/bin/env", "--", "-i", "/x/loopx"], "unknown_program"),
        (["/usr/bin/env", "=x", "/x/loopx"], "unknown_program"),
        (["/usr/bin/nohup"], "no_program"),
        (["/usr/bin/nohup", "--"], "no_program"),
        (["/usr/bin/nohup", "-p", "/x/loopx"], "unknown_program"),
        (["/usr/bin/nice"], "no_program"),
        (["/usr/bin/nice", "-n", "5"], "no_program"),
        (["/usr/bin/nice", "-n"], "nice_option"),
        (["/usr/bin/nice", "--foo", "/x/loopx"], "nice_option"),
        (["/usr/bin/nice", "-n5", "/x/loopx"], "nice_option"),
        (["/usr/bin/nice", "--adjustment=x", "/x/loopx"], "nice_option"),
        (["/usr/bin/nice", "-5x", "/x/loopx"], "nice_option"),
        (["/usr/bin/nice", "-", "/x/loopx"], "nice_option"),
        ([], "no_program"),
        (["/usr/local/bin/tool", "serve"], "unknown_program"),
    ],
)
def test_each_wrapper_refusal_names_the_rule_that_refused(args: list[str], detail: str) -> None:
    assert _refused(args) == detail


def test_a_refusal_says_how_to_settle_it() -> None:
    with pytest.raises(Ambiguous) as info:
        _script("exec loopx-chat $1")
    assert info.value.message == (
        "the existing LaunchAgent's Codex home cannot be decided safely: the script uses a "
        "special parameter (`$1`, `$@`) [special_parameter]; pass --codex-home <absolute "
        "home> (or LOOPX_CHAT_CODEX_HOME) to install"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["/usr/bin/env", "-i", "/bin/sh", "-c", "export CODEX_HOME=~/h; exec loopx-chat"],
        ["/usr/bin/env", "-u", "HOME", "/bin/sh", "-c", "exec loopx-chat ~"],
        ["/bin/sh", "-c", "unset HOME; CODEX_HOME=~ exec loopx-chat"],
    ],
)
def test_a_tilde_without_home_is_refused(args: list[str]) -> None:
    # bash and zsh then read the user database, dash keeps the `~`: no one answer.
    assert _refused(args) == "tilde_without_home"


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["/bin/sh", "-c", "exec loopx-chat =a"], "uses a word starting with `=`"),
        (["/bin/sh", "-c", "exec loopx-chat a*"], "uses an unquoted `*`"),
        (["/bin/sh", "-c", "exec /x/start.sh a b"], "runs `start.sh`, not loopx-chat"),
        (["/bin/sh", "-c", "/x/tool a; exec loopx-chat"], "runs `tool` before its last"),
        (["/bin/sh", "-c", "exec -a x loopx-chat"], "runs `exec -a`"),
        (["/bin/sh", "-c", "export -n A; exec loopx-chat"], "runs `export -n`"),
        (["/bin/sh", "-c", "export 1A; exec loopx-chat"], "exports `1A`"),
        (["/bin/sh", "-c", "unset -f A; exec loopx-chat"], "runs `unset -f`"),
        (["/bin/sh", "-c", "exec loopx-chat $PWD"], "expands $PWD, which the shell sets"),
        (["/bin/sh", "-c", "PWD=/; exec loopx-chat"], "assigns PWD, which shells treat"),
        (["/bin/sh", "-c", "X='a b'; exec loopx-chat $X"], "$X is unquoted"),
        (["/bin/sh", "-c", "exec loopx-chat &"], "uses `&` (control flow)"),
        (["/bin/sh", "-a", "-x", "-c", "exec loopx-chat"], "sh runs with option -a"),
        (["/bin/sh", "-ab", "-c", "exec loopx-chat"], "sh runs with option -ab"),
        (["/bin/bash", "--rcfile", "-c", "exec loopx-chat"], "bash runs with option --rcfile"),
        (["/bin/sh", "+x", "-c", "exec loopx-chat"], "sh runs with option +x"),
        (["/bin/zsh", "/x/s.sh"], "runs zsh on a script file"),
        (["/usr/bin/env", "A=1"], "`env` starts no program"),
        (["/usr/bin/env", "-S", "x", "/x/loopx"], "`env` runs with option -S"),
        (["/usr/bin/nice", "-x", "/x/loopx", "-y"], "`nice` runs with option -x"),
        (["/usr/bin/nohup"], "the LaunchAgent starts no program"),
        (["/bin/sh", "-c", "A=1"], "the script starts no program"),
        ([], "the plist has no ProgramArguments"),
        (["/x/tool", "a", "b"], "runs `tool`, which is not loopx-chat"),
        (["/usr/bin/env", "BASH_ENV=/x", "/bin/bash", "-c", "x"], "bash reads the file named"),
        (
            ["/bin/bash", "-l", "-c", "exec loopx-chat"],
            f"bash would read {HOME}/.bash_profile",
        ),
    ],
)
def test_each_refusal_says_what_it_refused(args: list[str], what: str) -> None:
    startup = {"/etc/profile": None}
    with pytest.raises(Ambiguous) as info:
        _launch(args, startup=startup)
    assert what in info.value.message


def test_a_refusal_names_the_startup_file() -> None:
    startup = {**ZSH_SYSTEM, f"{HOME}/.zshenv": "set -a\n"}
    with pytest.raises(Ambiguous) as info:
        _launch(["/bin/zsh", "-c", ARGV_SCRIPT], startup=startup)
    assert f"zsh reads {HOME}/.zshenv, which may set the home" in info.value.message


def test_export_and_unset_leave_other_inherited_variables_alone() -> None:
    # launchd passes any name, lowercase too; bash, dash and zsh pass these on untouched.
    launch = _launch(
        ["/bin/sh", "-c", "unset A; export B; exec loopx-chat"], {"unset": "1", "export": "2"}
    )
    assert (launch.environment["unset"], launch.environment["export"]) == ("1", "2")

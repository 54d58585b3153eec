"""What the legacy decoder must make of each allowlisted construct, as data a real shell checks.

Each case is a `/bin/sh -c SCRIPT` (or a whole argv) the decoder accepts, with the words the
service program receives after its name and the environment variables it sees (None: not in
its environment). `tests/launchagent/test_legacy_rules.py` holds the decoder to these
(fast, in the mutation pass); `tests/integration/test_launchagent_shells.py` holds bash (as
`sh` and as itself), dash and zsh to the very same values, so no expected value here is only
our guess.

Placeholders: the job's HOME is `/Users/me` and its USER `me` (launchd's environment); the
real-shell run finds `loopx-chat` on PATH as a program that reports what it received.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HOME = "/Users/me"
USER = "me"


@dataclass(frozen=True)
class Decoded:
    script: str
    argv: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)


SCRIPTS: tuple[Decoded, ...] = (
    # words, blanks and line continuations
    Decoded("exec loopx-chat a b", ("a", "b")),
    Decoded("exec loopx-chat  a\t\tb  ", ("a", "b")),
    Decoded("exec loopx-chat a \\\n b", ("a", "b")),
    Decoded("exec loopx-chat a\\\nb", ("ab",)),
    Decoded("exec loopx-chat a \\\nb c", ("a", "b", "c")),
    Decoded("\n\nexec loopx-chat a;", ("a",)),
    Decoded("exec loopx-chat a\n\n", ("a",)),
    Decoded("loopx-chat x y", ("x", "y")),
    # quoting
    Decoded("exec loopx-chat 'a b' 'x'y'z'", ("a b", "xyz")),
    Decoded("exec loopx-chat '$HOME' '\\' ''", ("$HOME", "\\", "")),
    Decoded(
        'exec loopx-chat "a\\"b" "c\\\\d" "e\\$f" "g\\`h" "i\\\nj" "k\\l" ""',
        ('a"b', "c\\d", "e$f", "g`h", "ij", "k\\l", ""),
    ),
    Decoded('exec loopx-chat "$USER x" "${USER}y" "a\'b"', ("me x", "mey", "a'b")),
    Decoded("exec loopx-chat \\$USER \\a\\ b \\'", ("$USER", "a b", "'")),
    Decoded("exec loopx-chat x\"'\"y'\"'z", ("x'y\"z",)),
    # comments, and `#` / `=` inside a word
    Decoded("exec loopx-chat a#b c # d e", ("a#b", "c")),
    Decoded("# first; exec other\nexec loopx-chat x # last", ("x",)),
    Decoded("exec loopx-chat a=b d== e#=", ("a=b", "d==", "e#=")),
    # tilde at a word's start, and after `=` in an assignment
    Decoded("exec loopx-chat ~ ~/x", (HOME, f"{HOME}/x")),
    Decoded("exec loopx-chat ~\tz", (HOME, "z")),
    Decoded("exec loopx-chat ~", (HOME,)),
    Decoded("export CODEX_HOME=~;exec loopx-chat", (), {"CODEX_HOME": HOME}),
    Decoded("export CODEX_HOME=~\nexec loopx-chat", (), {"CODEX_HOME": HOME}),
    Decoded("export CODEX_HOME=~/h; exec loopx-chat", (), {"CODEX_HOME": f"{HOME}/h"}),
    Decoded("CODEX_HOME=~/p exec loopx-chat", (), {"CODEX_HOME": f"{HOME}/p"}),
    Decoded("exec loopx-chat '~' \"~\" \\~", ("~", "~", "~")),
    # digits are words unless a redirection follows them
    Decoded("exec loopx-chat 12 3x", ("12", "3x")),
    Decoded("exec loopx-chat 12", ("12",)),
    # redirections: none of them is a word of the program
    Decoded("exec loopx-chat a2>/dev/null b", ("a2", "b")),
    Decoded(
        "exec loopx-chat a >/dev/null b 2>&1 c >>/dev/null d >|/dev/null e </dev/null f 2>&- g",
        ("a", "b", "c", "d", "e", "f", "g"),
    ),
    Decoded("exec loopx-chat a 2> /dev/null b <&0 c >&2", ("a", "b", "c")),
    Decoded("exec loopx-chat a>/dev/null", ("a",)),
    Decoded("exec loopx-chat 1>/dev/null a 10", ("a", "10")),
    Decoded(
        "exec >/dev/null 2>&1; export CODEX_HOME=/r; exec loopx-chat", (), {"CODEX_HOME": "/r"}
    ),
    Decoded("exec 2>/dev/null\nexec loopx-chat q", ("q",)),
    # variables: assigned, exported, unset, expanded
    Decoded("A=/x; B=$A/y; export CODEX_HOME=$B; exec loopx-chat", (), {"CODEX_HOME": "/x/y"}),
    Decoded("A=1 B=2; export A; exec loopx-chat", (), {"A": "1", "B": None}),
    Decoded("export A B=2; A=1; exec loopx-chat", (), {"A": "1", "B": "2"}),
    Decoded("export A=1; unset A; exec loopx-chat", (), {"A": None}),
    Decoded("export A=1 B=2; unset -v A B; exec loopx-chat", (), {"A": None, "B": None}),
    Decoded("A=1 exec loopx-chat", (), {"A": "1"}),
    Decoded("A=1 B=2 loopx-chat z", ("z",), {"A": "1", "B": "2"}),
    Decoded('A=1; A=2 exec loopx-chat "$A"', ("1",), {"A": "2"}),
    Decoded("export CODEX_HOME=${NOPE:-/d}/x; exec loopx-chat", (), {"CODEX_HOME": "/d/x"}),
    Decoded("export CODEX_HOME=${NOPE-/d}; exec loopx-chat", (), {"CODEX_HOME": "/d"}),
    Decoded("A=; export CODEX_HOME=${A:-/d}; exec loopx-chat", (), {"CODEX_HOME": "/d"}),
    Decoded("A=; export CODEX_HOME=${A-/d}x; exec loopx-chat", (), {"CODEX_HOME": "x"}),
    Decoded("A=/a; export CODEX_HOME=${A:-/d}; exec loopx-chat", (), {"CODEX_HOME": "/a"}),
    Decoded("A=/a; export CODEX_HOME=${A-/d}; exec loopx-chat", (), {"CODEX_HOME": "/a"}),
    Decoded("export CODEX_HOME=$NOPE/x; exec loopx-chat", (), {"CODEX_HOME": "/x"}),
    Decoded("X='a b'; export CODEX_HOME=$X; exec loopx-chat", (), {"CODEX_HOME": "a b"}),
    Decoded("X='a b'; Y=$X; exec loopx-chat \"$Y\"", ("a b",)),
    Decoded("X=a; exec loopx-chat $X$X ${X}b $X.c", ("aa", "ab", "a.c")),
    Decoded("exec loopx-chat $USER $HOME/x", (USER, f"{HOME}/x")),
    Decoded("export HOME=/h2; exec loopx-chat ~", ("/h2",), {"HOME": "/h2"}),
    Decoded("export CODEX_HOME=/a CODEX_HOME=/b; exec loopx-chat", (), {"CODEX_HOME": "/b"}),
    Decoded("X='a b'; A=$X exec loopx-chat", (), {"A": "a b"}),
    Decoded('A="a b" B= exec loopx-chat', (), {"A": "a b", "B": ""}),
    Decoded('A=1; unset A; exec loopx-chat "$A"', ("",)),
    Decoded("export A=1; unset A; A=2; exec loopx-chat", (), {"A": None}),
    Decoded("export A; exec loopx-chat", (), {"A": None}),
    Decoded("exec loopx-chat -v --x", ("-v", "--x")),
    # wrappers inside the script
    Decoded("exec env A=1 loopx-chat", (), {"A": "1"}),
    Decoded("export A=1; exec env -u A loopx-chat", (), {"A": None}),
    Decoded("exec nohup loopx-chat n", ("n",)),
    Decoded("exec nice loopx-chat n", ("n",)),
    Decoded("exec nice -n 5 nohup env B=2 loopx-chat", (), {"B": "2"}),
    Decoded("nohup loopx-chat x", ("x",)),
)

# Whole argvs (shell options): the script is always the same; CODEX_HOME is what it gives.
ARGV_SCRIPT = "export CODEX_HOME=/w; exec loopx-chat"
ARGVS: tuple[tuple[str, ...], ...] = (
    ("/bin/sh", "-c", ARGV_SCRIPT),
    ("/bin/sh", "-e", "-c", ARGV_SCRIPT),
    ("/bin/sh", "-ec", ARGV_SCRIPT),
    ("/bin/sh", "-xc", ARGV_SCRIPT),
    ("/bin/sh", "-c", ARGV_SCRIPT, "name", "arg"),
    ("/bin/sh", "-c", "--", ARGV_SCRIPT),
    ("/bin/dash", "-c", ARGV_SCRIPT),
    ("/bin/bash", "-c", ARGV_SCRIPT),
    ("/bin/bash", "--norc", "-c", ARGV_SCRIPT),
    ("/bin/bash", "--posix", "-c", ARGV_SCRIPT),
    ("/bin/bash", "--noprofile", "-c", ARGV_SCRIPT),
    ("/bin/zsh", "-c", ARGV_SCRIPT),
    ("/bin/zsh", "-f", "-c", ARGV_SCRIPT),
    ("/bin/zsh", "--no-rcs", "-c", ARGV_SCRIPT),
    ("/bin/zsh", "-fc", ARGV_SCRIPT),
)

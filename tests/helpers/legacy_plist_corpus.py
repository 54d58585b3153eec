"""The corpus of older LaunchAgent plists the decoder is checked against with real shells.

Hand-written cases (every construct that once gave a wrong home, and their neighbours) plus
a seeded generator over statements, quoting styles, separators, expansions, wrappers and
startup files. A case is data only: `args` (ProgramArguments), `env` (EnvironmentVariables)
and `startup` (files under the temporary HOME), with placeholders the test fills in:
`@BIN@` (a folder whose `loopx-chat`, `loopx` and `python3` print what they received),
`@HOME@` (the job's HOME) and `@ALT@` (another folder, for a plist that sets HOME).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SEED = 20261130
GENERATED = 280


@dataclass(frozen=True)
class LegacyCase:
    name: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    startup: dict[str, str] = field(default_factory=dict)


def _sh(name: str, script: str, shell: str = "/bin/sh", *opts: str, **kw: object) -> LegacyCase:
    return LegacyCase(name, (shell, *opts, "-c", script), **kw)  # type: ignore[arg-type]


SVC = "@BIN@/loopx-chat serve"
HAND: tuple[LegacyCase, ...] = (
    # the forms loopx-chat and the public LoopX wrote
    LegacyCase("direct-own", ("@BIN@/loopx-chat", "serve"), {"LOOPX_CHAT_CODEX_HOME": "/h/own"}),
    LegacyCase("direct-codex-home", ("@BIN@/loopx-chat", "serve"), {"CODEX_HOME": "/h/c"}),
    LegacyCase("direct-none", ("@BIN@/loopx", "chat"), {}),
    LegacyCase("direct-tilde-env", ("@BIN@/loopx", "chat"), {"CODEX_HOME": "~/.codex-x"}),
    LegacyCase("direct-home-env", ("@BIN@/loopx", "chat"), {"HOME": "@ALT@"}),
    LegacyCase(
        "direct-python", ("@BIN@/python3", "-m", "loopx_chat", "serve"), {"CODEX_HOME": "/h/py"}
    ),
    _sh("peer-zsh", "export CODEX_HOME=/h/p; exec @BIN@/loopx chat", "/bin/zsh"),
    _sh(
        "peer-zsh-both",
        "export CODEX_HOME=/h/c; export LOOPX_CHAT_CODEX_HOME=/h/l; exec @BIN@/loopx chat",
        "/bin/zsh",
    ),
    _sh("peer-zsh-quoted", "export CODEX_HOME='@HOME@/legacy home'; exec @BIN@/loopx chat"),
    _sh("peer-zsh-path", "export PATH=@BIN@:$PATH; exec loopx chat", "/bin/zsh"),
    # redirect-only exec before the real one
    _sh("exec-redirect", f"exec >>@HOME@/log 2>&1; export CODEX_HOME=/h/r; exec {SVC}"),
    _sh("exec-redirect-2", f"export CODEX_HOME=/h/r\nexec 2>>@HOME@/err\nexec {SVC}"),
    # env / nohup / nice in front
    _sh("env-assign", "exec env CODEX_HOME=/h/e @BIN@/loopx-chat serve"),
    _sh("env-i", "export CODEX_HOME=/h/x; exec env -i HOME=@HOME@ @BIN@/loopx-chat serve"),
    _sh("env-i-bare", "export CODEX_HOME=/h/x; exec env -i @BIN@/loopx-chat serve"),
    _sh("env-u", "export CODEX_HOME=/h/x; exec env -u CODEX_HOME @BIN@/loopx-chat serve"),
    _sh("nice-env", "exec nice -n 5 env CODEX_HOME=/h/n @BIN@/loopx-chat serve"),
    _sh("nohup", "export CODEX_HOME=/h/nh; exec nohup @BIN@/loopx-chat serve"),
    _sh("exec-c", "export CODEX_HOME=/h/x; exec -c @BIN@/loopx-chat serve", "/bin/bash"),
    _sh("exec-c-zsh", "export CODEX_HOME=/h/x; exec -c @BIN@/loopx-chat serve", "/bin/zsh"),
    LegacyCase("env-program", ("/usr/bin/env", "CODEX_HOME=/h/ep", "@BIN@/loopx-chat", "serve")),
    LegacyCase("env-program-home", ("/usr/bin/env", "CODEX_HOME=$HOME/x", "@BIN@/loopx-chat")),
    LegacyCase("env-program-tilde", ("/usr/bin/env", "CODEX_HOME=~/x", "@BIN@/loopx-chat")),
    LegacyCase("env-program-i", ("/usr/bin/env", "-i", "HOME=@ALT@", "@BIN@/loopx-chat")),
    LegacyCase("env-dashdash", ("/usr/bin/env", "--", "CODEX_HOME=/h/dd", "@BIN@/loopx-chat")),
    LegacyCase(
        "env-u-long", ("/usr/bin/env", "--unset=CODEX_HOME", "@BIN@/loopx"), {"CODEX_HOME": "/h"}
    ),
    LegacyCase("nice-program", ("/usr/bin/nice", "-n", "3", "@BIN@/loopx"), {"CODEX_HOME": "/h"}),
    # heredocs, comments, escapes
    _sh("heredoc", f"cat <<EOF >/dev/null\nexport CODEX_HOME=/h/no\nEOF\nexec {SVC}"),
    _sh("hash-in-word", f"export CODEX_HOME=/h/a#b; exec {SVC}"),
    _sh("hash-comment", f"export CODEX_HOME=/h/a #b\nexec {SVC}"),
    _sh("hash-comment-zsh", f"export CODEX_HOME=/h/a #b\nexec {SVC}", "/bin/zsh"),
    _sh("escaped-dollar", f"export CODEX_HOME=/h/\\$HOME; exec {SVC}"),
    _sh("escaped-space", f"export CODEX_HOME=/h/a\\ b; exec {SVC}"),
    _sh("line-continuation", f"export CODEX_HOME=/h/a\\\nb; exec {SVC}"),
    _sh("dq-escape", f'export CODEX_HOME="/h/\\$x\\"q"; exec {SVC}'),
    _sh("sq-dollar", f"export CODEX_HOME='/h/$HOME'; exec {SVC}"),
    # HOME from EnvironmentVariables
    _sh("home-env-dollar", f"export CODEX_HOME=$HOME/x; exec {SVC}", env={"HOME": "@ALT@"}),
    _sh("home-env-tilde", f"export CODEX_HOME=~/x; exec {SVC}", env={"HOME": "@ALT@"}),
    _sh("home-env-brace", f"export CODEX_HOME=${{HOME}}/x; exec {SVC}", env={"HOME": "@ALT@"}),
    _sh("home-env-default", f"exec {SVC}", env={"HOME": "@ALT@"}),
    _sh("home-script", f"export HOME=@ALT@; exec {SVC}"),
    _sh("home-script-then-tilde", f"HOME=@ALT@; export CODEX_HOME=~/t; exec {SVC}"),
    # parameter-expansion assignments and other expansions
    _sh("param-assign", f": ${{CODEX_HOME:=/h/pa}}; export CODEX_HOME; exec {SVC}"),
    _sh("param-default", f"export CODEX_HOME=${{X:-/h/d}}; exec {SVC}"),
    _sh("cmd-subst", f"export CODEX_HOME=$(echo /h/cs); exec {SVC}"),
    _sh("backtick", f"export CODEX_HOME=`echo /h/bt`; exec {SVC}"),
    _sh("arith", f"export CODEX_HOME=/h/$((1+1)); exec {SVC}"),
    _sh("positional", f"export CODEX_HOME=/h/$1; exec {SVC}"),
    _sh("unset-var", f"export CODEX_HOME=/h/$NOPE; exec {SVC}"),
    _sh("var-chain", f"A=/h/a; B=$A/b; export CODEX_HOME=$B; exec {SVC}"),
    _sh("dollar-sq", f"export CODEX_HOME=$'/h/ds'; exec {SVC}", "/bin/bash"),
    _sh("glob", f"export CODEX_HOME=/h/*; exec {SVC}"),
    _sh("brace-exp", f"export CODEX_HOME=/h/{{a,b}}; exec {SVC}", "/bin/bash"),
    # allexport and set
    _sh("set-a", f"set -a; CODEX_HOME=/h/sa; exec {SVC}"),
    _sh("allexport-zsh", f"setopt allexport; CODEX_HOME=/h/ae; exec {SVC}", "/bin/zsh"),
    _sh("allexport-o", f"set -o allexport; CODEX_HOME=/h/ao; exec {SVC}"),
    LegacyCase("sh-a", ("/bin/sh", "-a", "-c", f"CODEX_HOME=/h/sha; exec {SVC}")),
    # prefix assignments before builtins and the final program
    _sh("prefix-export", f"CODEX_HOME=/h/a export CODEX_HOME; exec {SVC}"),
    _sh("prefix-export-bash", f"CODEX_HOME=/h/a export CODEX_HOME; exec {SVC}", "/bin/bash"),
    _sh("prefix-exec", f"CODEX_HOME=/h/pe exec {SVC}"),
    _sh("prefix-exec-zsh", f"CODEX_HOME=/h/pe exec {SVC}", "/bin/zsh"),
    _sh("prefix-plain", f"CODEX_HOME=/h/pp {SVC}"),
    _sh("prefix-two", f"A=/h/x CODEX_HOME=/h/p2 exec {SVC}"),
    # every shell expands `${A:-..}` with the A assigned just before it on the line
    _sh("prefix-default-reads-earlier", f"A=/h/a CODEX_HOME=${{A:-/h/d}} exec {SVC}"),
    # `~` with HOME unset: bash and zsh read the user database, dash keeps the `~`
    LegacyCase(
        "tilde-home-unset",
        ("/usr/bin/env", "-i", "/bin/sh", "-c", f"export CODEX_HOME=~/h; exec {SVC}"),
    ),
    _sh("unexported-assign", f"CODEX_HOME=/h/u\nexec {SVC}"),
    _sh("inherited-reassign", f"CODEX_HOME=/h/ir; exec {SVC}", env={"CODEX_HOME": "/h/old"}),
    _sh("unset-inherited", f"unset CODEX_HOME; exec {SVC}", env={"CODEX_HOME": "/h/old"}),
    _sh(
        "unset-then-assign",
        f"unset CODEX_HOME; CODEX_HOME=/h/ua; exec {SVC}",
        env={"CODEX_HOME": "/h/old"},
    ),
    _sh("export-then-assign", f"export CODEX_HOME; CODEX_HOME=/h/ea; exec {SVC}"),
    _sh("export-n", f"export -n CODEX_HOME; exec {SVC}", "/bin/bash", env={"CODEX_HOME": "/h"}),
    # control flow and other commands
    _sh("and", f"export CODEX_HOME=/h/and && exec {SVC}"),
    _sh("or", f"false || export CODEX_HOME=/h/or; exec {SVC}"),
    _sh("if", f"if true; then export CODEX_HOME=/h/if; fi; exec {SVC}"),
    _sh("subshell", f"(export CODEX_HOME=/h/sub); exec {SVC}"),
    _sh("source", f". @HOME@/.codexrc; exec {SVC}", startup={".codexrc": "CODEX_HOME=/h/src\n"}),
    _sh("cd", f"cd /tmp; export CODEX_HOME=/h/cd; exec {SVC}"),
    _sh("no-exec-last", f"export CODEX_HOME=/h/ne; {SVC}"),
    _sh("two-programs", f"@BIN@/loopx-chat serve; export CODEX_HOME=/h/2; exec {SVC}"),
    # wrapper scripts
    LegacyCase(
        "script-file",
        ("/bin/sh", "@HOME@/start.sh"),
        startup={"start.sh": f"export CODEX_HOME=/h/sf\nexec {SVC}\n"},
    ),
    _sh("sh-c-path", "@HOME@/start.sh", startup={"start.sh": f"#!/bin/sh\nexec {SVC}\n"}),
    LegacyCase(
        "wrapper-program",
        ("@HOME@/start.sh",),
        startup={"start.sh": f"#!/bin/sh\nexport CODEX_HOME=/h/w\nexec {SVC}\n"},
    ),
    # startup files
    _sh(
        "zshenv-other-var",
        f"export CODEX_HOME=/h/z; exec {SVC}",
        "/bin/zsh",
        startup={".zshenv": "export LOOPX_CHAT_CODEX_HOME=/h/zshenv\n"},
    ),
    _sh(
        "zshenv-inert",
        f"export CODEX_HOME=/h/zi; exec {SVC}",
        "/bin/zsh",
        startup={".zshenv": "export EDITOR=vim\nPATH=/opt/x:$PATH\n"},
    ),
    _sh(
        "zshenv-sets-home",
        f"exec {SVC}",
        "/bin/zsh",
        startup={".zshenv": "export CODEX_HOME=/h/zh\n"},
    ),
    _sh(
        "zshenv-allexport",
        f"CODEX_HOME=/h/za; exec {SVC}",
        "/bin/zsh",
        startup={".zshenv": "setopt allexport\n"},
    ),
    _sh(
        "zshenv-f",
        f"exec {SVC}",
        "/bin/zsh",
        "-f",
        startup={".zshenv": "export CODEX_HOME=/h/zf\n"},
    ),
    _sh(
        "zdotdir",
        f"exec {SVC}",
        "/bin/zsh",
        env={"ZDOTDIR": "@HOME@/zd"},
        startup={"zd/.zshenv": "export CODEX_HOME=/h/zd\n"},
    ),
    _sh("zsh-login", f"export CODEX_HOME=/h/zl; exec {SVC}", "/bin/zsh", "-l"),
    _sh(
        "zsh-login-zprofile",
        f"exec {SVC}",
        "/bin/zsh",
        "-l",
        startup={".zprofile": "export CODEX_HOME=/h/zp\n"},
    ),
    _sh("bash-login", f"export CODEX_HOME=/h/bl; exec {SVC}", "/bin/bash", "-l"),
    _sh(
        "bash-profile",
        f"exec {SVC}",
        "/bin/bash",
        "-l",
        startup={".bash_profile": "export CODEX_HOME=/h/bp\n"},
    ),
    _sh(
        "bash-env",
        f"exec {SVC}",
        "/bin/bash",
        env={"BASH_ENV": "@HOME@/benv"},
        startup={"benv": "export CODEX_HOME=/h/be\n"},
    ),
    _sh("dash-login", f"export CODEX_HOME=/h/dl; exec {SVC}", "/bin/dash", "-l"),
    _sh(
        "sh-login-profile",
        f"exec {SVC}",
        "/bin/sh",
        "-l",
        startup={".profile": "export CODEX_HOME=/h/sp\n"},
    ),
    _sh("bash-norc", f"export CODEX_HOME=/h/nr; exec {SVC}", "/bin/bash", "--norc"),
    _sh("bash-posix", f"export CODEX_HOME=/h/px; exec {SVC}", "/bin/bash", "--posix"),
    _sh(
        "zsh-no-rcs",
        f"exec {SVC}",
        "/bin/zsh",
        "--no-rcs",
        startup={".zshenv": "export CODEX_HOME=/h/nrc\n"},
    ),
    # tilde forms
    _sh("tilde-plain", f"export CODEX_HOME=~/t; exec {SVC}"),
    _sh("tilde-bare", f"export CODEX_HOME=~; exec {SVC}"),
    _sh("tilde-quoted", f"export CODEX_HOME='~/t'; exec {SVC}"),
    _sh("tilde-dq", f'export CODEX_HOME="~/t"; exec {SVC}'),
    _sh("tilde-colon", f"export CODEX_HOME=/a:~/t; exec {SVC}"),
    _sh("tilde-user", f"export CODEX_HOME=~root/t; exec {SVC}"),
    _sh("tilde-assign-then-export", f"CODEX_HOME=~/ta; export CODEX_HOME; exec {SVC}"),
    _sh("tilde-env-arg", "exec env CODEX_HOME=~/te @BIN@/loopx-chat serve", "/bin/bash"),
    _sh("tilde-env-arg-sh", "exec env CODEX_HOME=~/te @BIN@/loopx-chat serve"),
    # values
    _sh("relative", f"export CODEX_HOME=rel/home; exec {SVC}"),
    _sh("empty-loopx", f"export LOOPX_CHAT_CODEX_HOME=; export CODEX_HOME=/h/em; exec {SVC}"),
    _sh("sqlite", f"export CODEX_HOME=/h/s CODEX_SQLITE_HOME=/h/db; exec {SVC}"),
    _sh("newlines", f"\n\nexport CODEX_HOME=/h/nl\n\nexec {SVC}\n"),
    _sh("semicolon-tight", f"export CODEX_HOME=/h/st;exec {SVC}"),
    _sh("multi-export", f"export A=1 CODEX_HOME=/h/me B; exec {SVC}"),
    _sh("dup-assign", f"export CODEX_HOME=/h/1; export CODEX_HOME=/h/2; exec {SVC}"),
    _sh("ksh", f"export CODEX_HOME=/h/k; exec {SVC}", "/bin/ksh"),
    _sh("unknown-prog", "export CODEX_HOME=/h/up; exec /usr/bin/true"),
)

_NAMES = ("CODEX_HOME", "LOOPX_CHAT_CODEX_HOME", "CODEX_HOME", "HOME", "FOO")
_SHELLS = (
    ("/bin/sh",),
    ("/bin/dash",),
    ("/bin/bash",),
    ("/bin/zsh",),
    ("/bin/zsh", "-f"),
    ("/bin/bash", "--posix"),
    ("/bin/sh", "-e"),
    ("/bin/zsh", "-l"),
    ("/bin/dash", "-l"),
)
_SEPARATORS = ("; ", ";", "\n", " ;\n", "\n\n")


def _value(rng: random.Random, name: str) -> str:
    base = f"/h/{name.lower()}-{rng.randrange(100)}"
    forms = [
        lambda: base,
        lambda: f"'{base} sp'",
        lambda: f'"{base} dq"',
        lambda: f'"$HOME/{name.lower()}"',
        lambda: f"$HOME/{name.lower()}",
        lambda: f"${{HOME}}/{name.lower()}",
        lambda: f"~/{name.lower()}",
        lambda: f"\\$HOME{base}",
        lambda: f"{base}#x",
        lambda: f"$FOO{base}",
        lambda: f"{base}\\ esc",
        lambda: f"$(echo {base})",
        lambda: f"${{FOO:-{base}}}",
        lambda: f"'~'{base}",
        lambda: "@ALT@" if name == "HOME" else base,
    ]
    return rng.choice(forms)()


def _statement(rng: random.Random) -> str:
    name = rng.choice(_NAMES)
    kind = rng.randrange(10)
    if kind < 4:
        return f"export {name}={_value(rng, name)}"
    if kind < 6:
        return f"{name}={_value(rng, name)}"
    if kind == 6:
        return f"export {name}"
    if kind == 7:
        return f"unset {name}"
    if kind == 8:
        return "exec >>@HOME@/out.log 2>&1"
    return f"{name}={_value(rng, name)} export {name}" if rng.random() < 0.3 else "export FOO=1"


def _final(rng: random.Random) -> str:
    program = rng.choice(("@BIN@/loopx-chat serve", "@BIN@/loopx chat", "loopx chat"))
    wrapper = rng.choice(
        (
            "",
            "",
            "",
            "env ",
            "env CODEX_HOME=/h/envw ",
            "env -u CODEX_HOME ",
            "env -i ",
            "nohup ",
            "nice -n 2 ",
            "env LOOPX_CHAT_CODEX_HOME=$HOME/w ",
        )
    )
    prefix = rng.choice(("", "", "", f"CODEX_HOME={_value(rng, 'CODEX_HOME')} "))
    exec_word = rng.choice(("exec ", "exec ", ""))
    return f"{prefix}{exec_word}{wrapper}{program}"


def _startup(rng: random.Random, shell: tuple[str, ...]) -> dict[str, str]:
    pick = rng.randrange(8)
    files = [".zshenv"] if "zsh" in shell[0] else []
    if "-l" in shell:
        files += [".profile", ".zprofile"]
    if not files or pick < 4:
        return {}
    content = (
        "export EDITOR=vi\n",
        "export CODEX_HOME=/h/startup\n",
        "export LOOPX_CHAT_CODEX_HOME=/h/startup-l\n",
        "setopt allexport\n",
    )[pick - 4]
    return {rng.choice(files): content}


def generated(count: int = GENERATED, seed: int = SEED) -> tuple[LegacyCase, ...]:
    rng = random.Random(seed)
    cases: list[LegacyCase] = []
    for n in range(count):
        shell = rng.choice(_SHELLS)
        final = _final(rng)
        statements = [_statement(rng) for _ in range(rng.randrange(0, 4))] + [final]
        bare = " loopx chat" in f" {final}" and "@BIN@/loopx chat" not in final
        if bare and "env -i" in final:
            final = statements[-1] = final.replace(" loopx chat", " @BIN@/loopx chat")
        elif bare or rng.random() < 0.3:
            # a bare `loopx` is found through PATH, as in the public LoopX plists
            statements.insert(0, "export PATH=@BIN@:$PATH")
        script = rng.choice(_SEPARATORS).join(statements)
        env: dict[str, str] = {}
        for name in ("CODEX_HOME", "LOOPX_CHAT_CODEX_HOME", "HOME"):
            if rng.random() < 0.2:
                env[name] = "@ALT@" if name == "HOME" else f"/h/plist-{name.lower()}"
        if rng.random() < 0.3:
            env["PATH"] = "@BIN@:/usr/bin:/bin"
        cases.append(LegacyCase(f"gen-{n:03d}", (*shell, "-c", script), env, _startup(rng, shell)))
    return tuple(cases)


def corpus() -> tuple[LegacyCase, ...]:
    return HAND + generated()

"""The legacy-plist decoder against the real shells: match or refusal, never another home.

For every plist of `legacy_plist_corpus`, the plist's argv is run by the real shell under
launchd's minimal environment with the plist's `EnvironmentVariables` over it, in a
temporary HOME holding the case's startup files; the service program is replaced by a
tiny program that writes the environment it received. The true home is what loopx-chat's
own resolver makes of that environment. Then `loopx-chat launchagent install --json` runs
(fake launchctl) on the same plist, and must either bind exactly that home or refuse with
exit 1, the plist's bytes unchanged and no launchctl call.

`/bin/sh` is run twice: as macOS has it (bash invoked as `sh`, so in POSIX mode) and as
dash. The counts are printed at the end of the module, and at least 60 % of the runs must
be decided and matched, so the decoder cannot pass by refusing everything.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import plistlib
import pwd
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopx_chat.cli import launchagent_cmd, main
from loopx_chat.home import resolve_codex_home
from loopx_chat.launchagent.launchctl import Runner, RunResult
from tests.helpers.fakes import FAKE_LAUNCHCTL
from tests.helpers.legacy_decoder_cases import ARGVS, SCRIPTS, Decoded
from tests.helpers.legacy_decoder_cases import HOME as HOME_OF_CASES
from tests.helpers.legacy_decoder_cases import USER as USER_OF_CASES
from tests.helpers.legacy_plist_corpus import LegacyCase, corpus

ROOT = Path(__file__).resolve().parents[2]

LABEL = "com.loopx.chat"
LAUNCHD_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
SHELLS = ("bash", "dash", "zsh")
COUNTS: Counter[str] = Counter()
CASES = corpus()

PRINTER = """#!{python} -SI
import json, os, pathlib, sys
out = pathlib.Path(sys.argv[0]).resolve().parent.parent / "service-env.json"
out.write_text(json.dumps(dict(os.environ)))
"""


def _missing_shells() -> list[str]:
    return [name for name in SHELLS if shutil.which(name) is None]


@pytest.fixture(scope="module")
def shells() -> None:
    missing = _missing_shells()
    if missing:
        message = f"the real shells {missing} are needed (make test installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def launchctl(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stateful fake launchctl, called in-process (the same `main` its script runs)
    instead of one Python process per call: 400 installs would otherwise take minutes."""
    spec = importlib.util.spec_from_file_location("fake_launchctl", FAKE_LAUNCHCTL)
    assert spec and spec.loader
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)

    def factory(environ: Mapping[str, str]) -> Runner:
        def run(args: Sequence[str]) -> RunResult:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = fake.main(list(args))
            return RunResult(code, out.getvalue(), err.getvalue())

        return run

    monkeypatch.setattr(launchagent_cmd, "subprocess_runner", factory)


def _fill(text: str, bindir: Path, home: Path, alt: Path) -> str:
    return (
        text.replace("@BIN@", str(bindir)).replace("@HOME@", str(home)).replace("@ALT@", str(alt))
    )


def _user() -> tuple[str, str]:
    entry = pwd.getpwuid(os.getuid())
    return entry.pw_name, entry.pw_shell


def _launchd_env(home: Path, plist_env: dict[str, str], tmpdir: Path) -> dict[str, str]:
    user, shell = _user()
    env = {
        "HOME": str(home),
        "PATH": LAUNCHD_PATH,
        "USER": user,
        "LOGNAME": user,
        "SHELL": shell,
        "TMPDIR": str(tmpdir),
    }
    env.update(plist_env)
    return env


def _variants(args: list[str], root: Path) -> list[tuple[str, list[str]]]:
    """(label, argv to run) for each real shell this plist's argv stands for."""
    if args and args[0] == "/bin/sh":
        macos_sh = root / "macos-sh" / "sh"  # bash invoked as `sh`, as /bin/sh on macOS
        macos_sh.parent.mkdir(exist_ok=True)
        if not macos_sh.exists():
            macos_sh.symlink_to(shutil.which("bash") or "/bin/bash")
        return [
            ("sh=bash-posix", [str(macos_sh), *args[1:]]),
            ("sh=dash", ["/bin/dash", *args[1:]]),
        ]
    name = os.path.basename(args[0]) if args else "none"
    return [(name if name in SHELLS else "direct", args)]


def _run_quietly(argv: Sequence[str], env: Mapping[str, str]) -> None:
    subprocess.run(
        argv,
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=20,
        check=False,
    )


def _true_home(root: Path, argv: list[str], env: dict[str, str]) -> str | None:
    """The home the service would get, or None when the real shell started no service."""
    out = root / "service-env.json"
    out.unlink(missing_ok=True)
    try:
        _run_quietly(argv, env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not out.exists():
        return None
    received = json.loads(out.read_text())
    return str(resolve_codex_home(received, Path("/")).path)


def _prepare(case: LegacyCase, root: Path) -> tuple[Path, Path, Path, dict[str, str], list[str]]:
    home, alt, bindir = root / "home", root / "alt", root / "bin"
    for folder in (home, alt, bindir, root / "tmp"):
        folder.mkdir(parents=True, exist_ok=True)
    for name in ("loopx-chat", "loopx", "python3"):
        program = bindir / name
        program.write_text(PRINTER.format(python=sys.executable))
        program.chmod(0o755)
    for rel, text in case.startup.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_fill(text, bindir, home, alt))
        path.chmod(0o755)
    env = {k: _fill(v, bindir, home, alt) for k, v in case.env.items()}
    args = [_fill(a, bindir, home, alt) for a in case.args]
    return home, alt, bindir, env, args


def _install(root: Path, home: Path) -> tuple[int, dict[str, object], list[str]]:
    log = root / "launchctl-calls.jsonl"
    log.unlink(missing_ok=True)
    (root / "launchctl-state.json").unlink(missing_ok=True)
    env = {
        "HOME": str(home),
        "LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN": "1",
        "FAKE_LAUNCHCTL_STATE": str(root / "launchctl-state.json"),
        "FAKE_LAUNCHCTL_LOG": str(log),
        "LOOPX_CHAT_STATE_DIR": str(root / "state"),
        "CODEX_HOME": str(root / "ambient-home-of-the-installing-shell"),
        "LOOPX_CHAT_CODEX_HOME": None,
        "CODEX_SQLITE_HOME": None,
        "LOOPX_CHAT_CODEX_BIN": None,
    }
    result = CliRunner().invoke(main, ["launchagent", "install", "--json"], env=env)  # type: ignore[arg-type]
    assert "Traceback" not in result.output
    doc = json.loads(result.output)
    calls = [line for line in log.read_text().splitlines()] if log.exists() else []
    return result.exit_code, doc, calls


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_binding_matches_the_real_shell_or_is_refused(
    case: LegacyCase, shells: None, launchctl: None, tmp_path: Path
) -> None:
    home, _alt, _bindir, env, args = _prepare(case, tmp_path)
    plist_path = home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    plist_path.parent.mkdir(parents=True)
    data: dict[str, object] = {"Label": LABEL, "ProgramArguments": args, "RunAtLoad": True}
    if env:
        data["EnvironmentVariables"] = env
    raw = plistlib.dumps(data)
    for label, argv in _variants(args, tmp_path):
        plist_path.write_bytes(raw)
        for old in plist_path.parent.glob("*.previous"):
            old.unlink()
        truth = _true_home(tmp_path, argv, _launchd_env(home, env, tmp_path / "tmp"))
        code, doc, calls = _install(tmp_path, home)
        if code != 0:
            assert code == 1 and doc["ok"] is False, doc
            assert plist_path.read_bytes() == raw, f"{label}: a refusal changed the plist"
            assert calls == [], f"{label}: a refusal called launchctl"
            COUNTS["refused"] += 1
            continue
        bound = plistlib.loads(plist_path.read_bytes())["EnvironmentVariables"]
        got = bound["LOOPX_CHAT_CODEX_HOME"]
        if truth is None:
            # The old job never started its service (say, a program PATH does not find):
            # there is no home to keep, so no binding can be the wrong one. Counted apart.
            COUNTS["no service"] += 1
            continue
        if got != truth:
            COUNTS["wrong"] += 1
        assert got == truth, (
            f"{case.name} under {label}: the real shell gives the service "
            f"{truth if truth else 'nothing (it never starts)'}, the installer bound {got}"
        )
        COUNTS["matched"] += 1


def test_counts_and_how_much_is_decided(shells: None) -> None:
    runs = sum(COUNTS.values())
    print(
        f"\nlegacy plists vs real shells: {len(CASES)} plists, {runs} runs: "
        f"{COUNTS['matched']} matched, {COUNTS['refused']} refused, {COUNTS['wrong']} wrong, "
        f"{COUNTS['no service']} bound where the old job started no service"
    )
    assert len(CASES) >= 300
    assert runs >= len(CASES), "the differential cases must run before this summary"
    assert COUNTS["wrong"] == 0
    assert COUNTS["matched"] >= 0.6 * runs, COUNTS
    assert COUNTS["no service"] <= 0.05 * runs, COUNTS


# ---- the rule tests' expected values, checked against the real shells ------------------

REPORTER = """#!/bin/sh
{{ for a in "$@"; do printf '%s\\0' "$a"; done; printf '\\1\\0'; env -0; }} > {out}
"""


def _report(root: Path, argv: Sequence[str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """(the words after the program's name, its environment) as the real shell gave them."""
    bindir, out = root / "bin", root / "report"
    if not bindir.exists():
        bindir.mkdir()
        for name in ("loopx-chat", "loopx"):
            (bindir / name).write_text(REPORTER.format(out=out))
            (bindir / name).chmod(0o755)
    out.unlink(missing_ok=True)
    shell = _user()[1]
    env = {"HOME": HOME_OF_CASES, "PATH": f"{bindir}:{LAUNCHD_PATH}", "USER": USER_OF_CASES}
    env |= {"LOGNAME": USER_OF_CASES, "SHELL": shell}
    _run_quietly(argv, env)
    assert out.exists(), f"{argv}: the real shell started no program"
    words, _, environ = out.read_bytes().decode().partition("\1\0")
    received = dict(item.split("=", 1) for item in environ.split("\0") if item)
    return tuple(words.split("\0")[:-1]), received


def _shell_variants(argv: Sequence[str], root: Path) -> list[list[str]]:
    if argv[0] == "/bin/sh":
        return (
            [v for _, v in _variants(list(argv), root)]
            + [["/bin/bash", *argv[1:]]]
            + [["/bin/zsh", *argv[1:]]]
        )
    return [list(argv)]


@pytest.mark.parametrize("case", SCRIPTS, ids=[repr(c.script)[1:40] for c in SCRIPTS])
def test_the_rule_tests_expected_words_are_what_real_shells_give(
    case: Decoded, shells: None, tmp_path: Path
) -> None:
    for argv in _shell_variants(["/bin/sh", "-c", case.script], tmp_path):
        words, received = _report(tmp_path, argv)
        assert words == case.argv, f"{argv[0]}: {case.script!r}"
        assert {k: received.get(k) for k in case.env} == case.env, f"{argv[0]}: {case.script!r}"


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a[:-1]) for a in ARGVS])
def test_the_rule_tests_shell_options_are_what_real_shells_do(
    argv: tuple[str, ...], shells: None, tmp_path: Path
) -> None:
    for variant in _shell_variants(argv, tmp_path):
        assert _report(tmp_path, variant)[1].get("CODEX_HOME") == "/w", variant

#!/usr/bin/env python3
"""Smoke: the real LaunchAgent installer against fixture plists and a fake launchctl.

Runs `python -m loopx_chat launchagent ...` as subprocesses, each case in a fresh temporary
HOME, with `tests/helpers/fakes/fake_launchctl.py` first on PATH as `launchctl` (stateful: loaded,
running, pid, last exit code; every call recorded). No real service is started.
Prints `macos-dashboard-launchagent-status-smoke ok` only when every check holds.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "examples") not in sys.path:
    sys.path.insert(0, str(ROOT / "examples"))

import smoke_support  # noqa: E402
from smoke_support import SmokeFailure  # noqa: E402

FIXTURES = ROOT / "launchagents" / "fixtures"
FAKE_LAUNCHCTL = ROOT / "tests" / "helpers" / "fakes" / "fake_launchctl.py"
LABEL = "com.loopx.chat"
CHECKS: list[str] = []


def check(condition: bool, what: str) -> None:
    smoke_support.check(condition, what)
    CHECKS.append(what)  # counted, so the smoke says how much it proved


class Case:
    """A temporary HOME, a fake launchctl on PATH, and helpers to run the installer."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.root = Path(tempfile.mkdtemp(prefix=f"la-smoke-{name}-"))
        self.home = self.root / "home"
        self.home.mkdir()
        self.bin = self.root / "bin"
        self.bin.mkdir()
        launchctl = self.bin / "launchctl"
        launchctl.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_LAUNCHCTL}" "$@"\n')
        launchctl.chmod(0o755)
        self.state = self.root / "launchctl-state.json"
        self.log = self.root / "launchctl-calls.jsonl"
        self.plist = self.home / "Library" / "LaunchAgents" / f"{LABEL}.plist"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"CODEX_HOME", "LOOPX_CHAT_CODEX_HOME", "LOOPX_CHAT_STATE_DIR"}
            and not k.startswith(("FAKE_LAUNCHCTL", "LOOPX_LAUNCH"))
        }
        env.update(
            HOME=str(self.home),
            PATH=f"{self.bin}:{env.get('PATH', '/usr/bin:/bin')}",
            PYTHONPATH=str(ROOT),
            LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN="1",
            FAKE_LAUNCHCTL_STATE=str(self.state),
            FAKE_LAUNCHCTL_LOG=str(self.log),
        )
        env.update(extra)
        return env

    def run(self, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
        done = subprocess.run(
            [sys.executable, "-m", "loopx_chat", "launchagent", *args, "--json"],
            env=self.env(**env),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if "Traceback" in done.stderr:
            raise SmokeFailure(f"{self.name}: traceback from {args}:\n{done.stderr}")
        try:
            doc = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise SmokeFailure(f"{self.name}: {args} printed no JSON: {done.stdout!r}") from None
        return done.returncode, doc

    def place(self, fixture: str, replace: dict[str, str] | None = None) -> bytes:
        data = (FIXTURES / fixture).read_bytes()
        for old, new in (replace or {}).items():
            data = data.replace(old.encode(), new.encode())
        self.plist.parent.mkdir(parents=True, exist_ok=True)
        self.plist.write_bytes(data)
        return data

    def written(self) -> dict[str, Any]:
        raw = self.plist.read_bytes()
        check(raw.startswith(b"<?xml"), f"{self.name}: the installer writes XML")
        check(stat.S_IMODE(self.plist.stat().st_mode) == 0o644, f"{self.name}: plist is 0644")
        return plistlib.loads(raw)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line)["argv"] for line in self.log.read_text().splitlines()]

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def binding(case: Case) -> str:
    return case.written()["EnvironmentVariables"]["LOOPX_CHAT_CODEX_HOME"]


def case_fresh_install(c: Case) -> None:
    code, doc = c.run("install")
    check(code == 0 and doc["ok"], "fresh install succeeds")
    check(binding(c) == str(c.home / ".codex"), "fresh install binds ~/.codex")
    check(doc["binding"]["source"] == "default", "fresh install reports the default source")
    argv = c.written()["ProgramArguments"]
    script = Path(sys.executable).parent / "loopx-chat"
    check(
        argv[0] == (str(script) if script.is_file() else sys.executable)
        and argv[-7:] == ["serve", "--host", "127.0.0.1", "--port", "8767", "--notify", "desktop"],
        "ProgramArguments runs the installed loopx-chat script: serve --host 127.0.0.1 --port 8767"
        " --notify desktop",
    )
    check(
        any("source checkout" in w for w in doc["warnings"]),
        "an editable (checkout) install warns that the service runs from the checkout",
    )
    verbs = [call[0] for call in c.calls()]
    check(verbs.index("enable") < verbs.index("bootstrap"), "enable runs before bootstrap")
    check(doc["state"] == "running" and isinstance(doc["pid"], int), "fresh install is running")


def case_fresh_install_ambient(c: Case) -> None:
    code, _ = c.run("install", CODEX_HOME=str(c.home / "ambient-home"))
    check(
        code == 0 and binding(c) == str(c.home / "ambient-home"),
        "a fresh install takes the ambient CODEX_HOME",
    )


def case_explicit_override(c: Case) -> None:
    c.place("env-binding.plist")
    code, doc = c.run("install", LOOPX_CHAT_CODEX_HOME=str(c.home / "chosen home"))
    check(
        code == 0 and binding(c) == str(c.home / "chosen home"),
        "explicit LOOPX_CHAT_CODEX_HOME overrides the installed binding",
    )
    check(doc["binding"]["source"] == "explicit", "explicit source reported")


def case_upgrade_keeps_env_binding(c: Case) -> None:
    original = c.place("env-binding.plist")
    code, _doc = c.run("install", CODEX_HOME=str(c.home / "unrelated-upgrader"))
    check(
        code == 0 and binding(c) == "/Users/fixture/selected codex home",
        "upgrade keeps EnvironmentVariables.LOOPX_CHAT_CODEX_HOME (ambient ignored)",
    )
    backups = sorted(c.plist.parent.glob(f"{LABEL}.plist.*.previous"))
    check(
        len(backups) == 1 and backups[0].read_bytes() == original,
        "the previous plist is kept byte for byte as <label>.plist.<UTC stamp>.previous",
    )
    code, _ = c.run("restart")
    check(code == 0 and binding(c) == "/Users/fixture/selected codex home", "restart keeps it")
    verbs = [call[0] for call in c.calls()]
    check("kickstart" in verbs, "an unchanged plist is restarted with kickstart -k")


def case_upgrade_codex_home_only(c: Case) -> None:
    c.place("env-codex-home-only.plist")
    code, _ = c.run("install", CODEX_HOME=str(c.home / "unrelated-upgrader"))
    check(
        code == 0 and binding(c) == "/Users/fixture/worker-home",
        "upgrade falls back to EnvironmentVariables.CODEX_HOME, ambient ignored",
    )


def case_legacy_shell_export(c: Case) -> None:
    c.place("legacy-shell-export.plist")
    code, _doc = c.run("install", CODEX_HOME=str(c.home / "unrelated-upgrader"))
    check(
        code == 0 and binding(c) == str(c.home / "Codex Homes" / "legacy home"),
        "legacy shell export with a quoted path with spaces is decoded ($HOME expanded)",
    )
    check(c.written()["ProgramArguments"][0] != "/bin/zsh", "the new plist has no shell")
    check(
        _doc["binding"]["source"] == "existing plist: CODEX_HOME from shell script",
        "a peer-style `zsh -c` plist with no startup files upgrades without --codex-home",
    )
    check("EnvironmentVariables.PATH" not in _doc["kept"], "a foreign plist keeps nothing")


def case_own_upgrade_keeps_user_additions(c: Case) -> None:
    code, _ = c.run("install", LOOPX_CHAT_CODEX_HOME=str(c.home / "h"))
    check(code == 0, "first install")
    data = c.written()
    data["EnvironmentVariables"]["HTTPS_PROXY"] = "http://127.0.0.1:3128"
    data["StandardOutPath"] = str(c.home / "my-logs" / "out.log")
    data["StandardErrorPath"] = str(c.home / "my-logs" / "err.log")
    data["Nice"] = 5
    c.plist.write_bytes(plistlib.dumps(data))
    code, doc = c.run("install")
    new = c.written()
    check(
        code == 0
        and new["EnvironmentVariables"]["HTTPS_PROXY"] == "http://127.0.0.1:3128"
        and new["StandardOutPath"] == data["StandardOutPath"]
        and new["StandardErrorPath"] == data["StandardErrorPath"]
        and new["Nice"] == 5,
        "an upgrade of our own plist keeps the user's env var, log paths and Nice",
    )
    check(
        {"EnvironmentVariables.HTTPS_PROXY", "StandardOutPath", "Nice"} <= set(doc["kept"]),
        "the upgrade lists every key it kept",
    )
    check(binding(c) == str(c.home / "h"), "and the binding")


def case_rebind_is_reported(c: Case) -> None:
    c.run("install", LOOPX_CHAT_CODEX_HOME=str(c.home / "a"))
    code, doc = c.run("install", LOOPX_CHAT_CODEX_HOME=str(c.home / "b"))
    check(
        code == 0
        and doc["binding_changed"]
        == {"from": str(c.home / "a"), "to": str(c.home / "b"), "source": "LOOPX_CHAT_CODEX_HOME"},
        "a rebind says binding changed: old -> new (source)",
    )


def case_codex_path_carried(c: Case) -> None:
    codex = c.bin / "codex"
    codex.write_text("#!/bin/sh\nexit 0\n")
    codex.chmod(0o755)
    code, _ = c.run("install")
    env = c.written()["EnvironmentVariables"]
    check(code == 0 and env["LOOPX_CHAT_CODEX_BIN"] == str(codex), "the codex found is written")
    codex.unlink()
    code, _ = c.run("install")
    check(
        code == 0 and c.written()["EnvironmentVariables"]["LOOPX_CHAT_CODEX_BIN"] == str(codex),
        "an upgrade keeps the installed codex path",
    )


def case_legacy_exec_prefix(c: Case) -> None:
    c.place("legacy-exec-prefix.plist")
    code, _ = c.run("install")
    check(
        code == 0 and binding(c) == "/Users/fixture/prefix & <home>",
        "a CODEX_HOME=… exec prefix with & and < survives",
    )


def case_binary_upgrade(c: Case) -> None:
    c.place("binary-env-binding.plist")
    code, _ = c.run("install", CODEX_HOME="/elsewhere")
    check(
        code == 0 and binding(c) == "/Users/fixture/binary codex home",
        "a binary plist upgrade keeps its binding and is rewritten as XML",
    )


def refused(
    c: Case, fixture: str, code_expected: str, replace: dict[str, str] | None = None
) -> None:
    before = c.place(fixture, replace)
    code, doc = c.run("install")
    check(code != 0 and doc["error_code"] == code_expected, f"{fixture} fails with {code_expected}")
    check(c.plist.read_bytes() == before, f"{fixture}: bytes unchanged")
    check(c.calls() == [], f"{fixture}: no launchctl call")
    check(not list(c.plist.parent.glob(f"{LABEL}.plist.*previous")), f"{fixture}: nothing written")


def case_malformed(c: Case) -> None:
    for name in (
        "malformed-truncated.plist",
        "malformed-not-a-dict.plist",
        "malformed-env-not-dict.plist",
    ):
        refused(c, name, "plist_malformed")


def case_command_substitution(c: Case) -> None:
    refused(c, "legacy-command-substitution.plist", "legacy_binding_ambiguous")
    check(
        not (c.home / "SENTINEL-touched").exists() and not list(c.root.rglob("*SENTINEL*")),
        "the legacy script was never executed (no sentinel)",
    )


def case_four_states(c: Case) -> None:
    _, doc = c.run("status")
    check(doc["state"] == "not_installed", "status: not installed")
    c.run("install")
    _, doc = c.run("status")
    check(doc["state"] == "running" and doc["pid"], "status: running with a pid")
    c.run("stop")
    _, doc = c.run("status")
    check(doc["state"] == "installed_not_loaded", "status: installed but not loaded")
    code, _ = c.run("start", FAKE_LAUNCHCTL_RUN="exited")
    _, doc = c.run("status")
    check(
        doc["state"] == "loaded_not_running" and doc["last_exit_code"] == 78,
        "status: loaded but not running, with the last exit code",
    )
    check(doc["binding"]["path"] == str(c.home / ".codex"), "status shows the binding")
    code, doc = c.run("uninstall")
    check(
        code == 0 and not c.plist.exists() and doc["state"] == "not_installed",
        "uninstall removes the plist and unloads",
    )
    check(any("left in place" in n for n in doc["notes"]), "uninstall says logs and state stay")


def case_bootstrap_eio(c: Case) -> None:
    code, doc = c.run("install", FAKE_LAUNCHCTL_BOOTSTRAP_EIO="1", FAKE_LAUNCHCTL_BOOTOUT_LAG="2")
    bootstraps = [call for call in c.calls() if call[0] == "bootstrap"]
    check(
        code == 0 and doc["state"] == "running" and len(bootstraps) == 2,
        "a first bootstrap failing with error 5 is recovered once",
    )


def case_not_macos(c: Case) -> None:
    code, doc = c.run("status", LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN="")
    if sys.platform == "darwin":
        check(code == 0, "on macOS the switch is not needed")
    else:
        check(
            code == 4 and doc["state"] == "not_installed",
            "off macOS status exits 4: no LaunchAgent can be installed",
        )
        code, doc = c.run("install", LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN="")
        check(
            code == 1 and doc["error_code"] == "platform_unsupported",
            "off macOS install refuses with platform_unsupported",
        )


CASES = [
    case_fresh_install,
    case_fresh_install_ambient,
    case_explicit_override,
    case_upgrade_keeps_env_binding,
    case_upgrade_codex_home_only,
    case_legacy_shell_export,
    case_legacy_exec_prefix,
    case_binary_upgrade,
    case_malformed,
    case_command_substitution,
    case_four_states,
    case_own_upgrade_keeps_user_additions,
    case_rebind_is_reported,
    case_codex_path_carried,
    case_bootstrap_eio,
    case_not_macos,
]


def main() -> int:
    for fn in CASES:
        case = Case(fn.__name__.removeprefix("case_"))
        try:
            fn(case)
        except SmokeFailure as exc:
            print(f"macos-dashboard-launchagent-status-smoke FAILED in {case.name}: {exc}")
            return 1
        except (KeyError, TypeError, ValueError, subprocess.TimeoutExpired) as exc:
            # A missing key or a hung command is a failed check, reported, not a traceback.
            kind = type(exc).__name__
            print(f"macos-dashboard-launchagent-status-smoke FAILED in {case.name}: {kind} {exc}")
            return 1
        finally:
            case.cleanup()
    print(f"({len(CHECKS)} checks)")
    print("macos-dashboard-launchagent-status-smoke ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

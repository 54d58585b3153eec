"""LaunchAgent: pure plist building/parsing and binding recovery, the launchctl adapter with
an injected runner, an independent parser (plistutil), and the fixture smoke."""

from __future__ import annotations

import os
import plistlib
import posixpath
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopx_chat.launchagent.launchctl import Launchctl, RunResult, parse_print
from loopx_chat.launchagent.plist import (
    AgentSpec,
    LaunchAgentError,
    ParsedPlist,
    build_plist,
    parse_plist,
    render_plist,
)

# The binding helpers are the decoder tests' own (one definition).
from tests.helpers.launchd import HOME, launchagent_cli, resolve_binding, service_plist
from tests.helpers.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def spec(home: str, port: int = 8767) -> AgentSpec:
    return AgentSpec(
        label="com.loopx.chat",
        program_arguments=("/usr/bin/python3", "-m", "loopx_chat", "serve", "--port", str(port)),
        environment={"LOOPX_CHAT_CODEX_HOME": home, "PATH": "/usr/bin:/bin"},
        working_directory=HOME,
        stdout_path=f"{HOME}/Library/Logs/loopx/chat.out.log",
        stderr_path=f"{HOME}/Library/Logs/loopx/chat.err.log",
    )


# plist paths: any absolute path with spaces, quotes, &, <, unicode (no NUL / XML-invalid chars)
path_text = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00\ufffe\uffff"
    ),
    min_size=1,
    max_size=40,
)
homes = st.builds(lambda parts: "/" + "/".join(parts), st.lists(path_text, min_size=1, max_size=3))


@given(home=homes.filter(lambda h: "/./" not in h and "//" not in h and not h.endswith("/.")))
@settings(max_examples=200)
def test_binding_survives_build_and_parse(home: str) -> None:
    home = os.path.normpath(home)
    data = render_plist(build_plist(spec(home)))
    parsed = parse_plist(data, where="generated")
    assert parsed.environment["LOOPX_CHAT_CODEX_HOME"] == home
    binding = resolve_binding(existing=parsed, ambient="/ambient")
    assert (binding.path, binding.source, binding.legacy) == (
        posixpath.normpath(home),
        "existing plist: LOOPX_CHAT_CODEX_HOME from EnvironmentVariables",
        False,
    )
    assert render_plist(build_plist(spec(home))) == data  # deterministic bytes


def test_plist_shape() -> None:
    data = build_plist(spec("/h"))
    assert data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["RunAtLoad"] is True and data["ThrottleInterval"] == 10
    assert data["ProgramArguments"][0].startswith("/")
    assert "sh" not in os.path.basename(data["ProgramArguments"][0])


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"", "InvalidFileException"),
        (b"<?xml version='1.0'?><plist><dict><key>a</key>", "ExpatError"),
        (b"bplist00\x00\x01", "binary"),
        (plistlib.dumps([1, 2]), "top level"),
        (plistlib.dumps({"EnvironmentVariables": "x"}), "EnvironmentVariables"),
        (plistlib.dumps({"EnvironmentVariables": {"A": 1}}), "EnvironmentVariables"),
        (plistlib.dumps({"ProgramArguments": ["a", 2]}), "ProgramArguments"),
        (plistlib.dumps({"ProgramArguments": "sh -c x"}), "ProgramArguments"),
    ],
)
def test_malformed_plists_fail_closed(raw: bytes, detail: str) -> None:
    with pytest.raises(LaunchAgentError) as info:
        parse_plist(raw, where="/x.plist")
    assert info.value.error_code == "plist_malformed"
    assert "/x.plist" in info.value.message


def test_binary_plist_is_read() -> None:
    raw = plistlib.dumps(build_plist(spec("/bin home")), fmt=plistlib.FMT_BINARY)
    assert parse_plist(raw, where="b").environment["LOOPX_CHAT_CODEX_HOME"] == "/bin home"


class ScriptedRunner:
    """An injected launchctl runner: answers from a script, records every call."""

    def __init__(self, answers: dict[str, list[RunResult]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> RunResult:
        self.calls.append(list(args))
        queue = self.answers.get(args[0], [])
        return queue.pop(0) if len(queue) > 1 else (queue[0] if queue else RunResult(0, "", ""))


LOADED = RunResult(0, "gui/501/com.loopx.chat = {\n\tstate = running\n\tpid = 77\n}\n", "")
MISSING = RunResult(113, "", "Could not find service")


def test_bootout_polls_until_gone_and_tolerates_not_loaded() -> None:
    runner = ScriptedRunner(
        {
            "bootout": [RunResult(3, "", "Boot-out failed: 3: No such process")],
            "print": [LOADED, LOADED, MISSING],
        }
    )
    Launchctl(runner, 501, sleep=lambda s: None).bootout("com.loopx.chat")
    assert [c[0] for c in runner.calls] == ["bootout", "print", "print", "print"]


def test_bootstrap_eio_is_retried_once_then_fails_clearly() -> None:
    eio = RunResult(5, "", "Bootstrap failed: 5: Input/output error")
    runner = ScriptedRunner({"bootstrap": [eio, eio], "print": [MISSING]})
    with pytest.raises(LaunchAgentError) as info:
        Launchctl(runner, 501, sleep=lambda s: None).bootstrap("com.loopx.chat", "/p.plist")
    assert info.value.error_code == "bootstrap_failed"
    assert [c[0] for c in runner.calls].count("bootstrap") == 2
    assert runner.calls[0] == ["enable", "gui/501/com.loopx.chat"]


def test_parse_print_states() -> None:
    assert parse_print(MISSING).loaded is False
    running = parse_print(LOADED)
    assert (running.loaded, running.running, running.pid) == (True, True, 77)
    stopped = parse_print(RunResult(0, "state = not running\n\tlast exit code = 78\n", ""))
    assert (stopped.running, stopped.last_exit_code) == (False, 78)


def test_generated_plist_parses_with_plistutil(tmp_path: Path) -> None:
    exe = shutil.which("plistutil")
    if exe is None:
        message = "plistutil (Debian libplist-utils) is missing; `make test` installs it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    home = '/Users/me/Codex & <homes>/"quoted" ünïcode'
    src = tmp_path / "gen.plist"
    src.write_bytes(render_plist(build_plist(spec(home))))
    out = tmp_path / "gen.bin"
    subprocess.run([exe, "-i", str(src), "-o", str(out), "-f", "bin"], check=True)
    assert out.read_bytes().startswith(b"bplist00")
    reparsed = plistlib.loads(out.read_bytes())
    assert reparsed == build_plist(spec(home))


def test_reference_plist_matches_the_builder() -> None:
    data = plistlib.loads((ROOT / "launchagents" / "com.loopx.chat.plist").read_bytes())
    assert set(data) == set(build_plist(spec("/x")))
    assert data["ProgramArguments"][-7:] == [
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "8767",
        "--notify",
        "desktop",
    ]


def test_fixture_smoke_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "macos-dashboard-launchagent-status-smoke.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("macos-dashboard-launchagent-status-smoke ok")


def _installer(tmp_path: Path, runner: ScriptedRunner, **env: str):  # type: ignore[no-untyped-def]
    from loopx_chat.launchagent.installer import InstallerContext, LaunchAgentInstaller

    ctx = InstallerContext(
        # A state dir of the test's own: the platform's default is found from this process's
        # home, not from `environ`, and install makes the owner's secret there.
        environ={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "LOOPX_CHAT_STATE_DIR": str(tmp_path / "state"),
            **env,
        },
        user_home=str(tmp_path),
        uid=501,
        platform="darwin",
    )
    return LaunchAgentInstaller(ctx, lambda: Launchctl(runner, 501, sleep=lambda s: None))


def test_status_probes_the_service_and_flags_a_stale_version(tmp_path: Path) -> None:
    import json
    import socket
    import socketserver
    import threading
    from http.server import BaseHTTPRequestHandler

    class Stale(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            doc: dict[str, Any] = {
                "ok": True,
                "schema_version": "loopx_chat_capabilities_v1",
                "runtime_identity": {"package_version": "0.0.1"},
                "codex_home": {"path": "/an/older/home", "source": "LOOPX_CHAT_CODEX_HOME"},
            }
            if self.path == "/status.json":
                doc = {"schema_version": "loopx_chat_status_v1", "contract_version": 2}
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

        def address_string(self) -> str:
            return "owner-socket"

    installer = _installer(
        tmp_path, ScriptedRunner({"print": [LOADED]}), LOOPX_CHAT_STATE_DIR=str(tmp_path / "st")
    )
    state_dir = installer.service_state_dir(None)
    state_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    # The probe asks over the owner's socket in the service's state dir, never over TCP.
    server = socketserver.ThreadingUnixStreamServer(str(state_dir / "service.sock"), Stale)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as sock:  # the port the plist names: nobody is asked there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        installer.paths.plist.parent.mkdir(parents=True, exist_ok=True)
        installer.paths.plist.write_bytes(render_plist(build_plist(spec("/h", port=port))))
        report = installer.status()
    finally:
        server.shutdown()
    assert report.state == "running" and report.port == port
    assert report.service["answering"] is True
    assert report.service["version_matches"] is False
    assert report.service["contract"] == "loopx_chat_status_v1 (contract 2)"
    assert any("version 0.0.1" in w and "launchagent restart" in w for w in report.warnings)
    assert any("/an/older/home" in w and "launchagent restart" in w for w in report.warnings)


def test_status_reports_a_service_that_does_not_answer(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    installer = _installer(tmp_path, ScriptedRunner({"print": [LOADED]}))
    installer.paths.plist.parent.mkdir(parents=True)
    installer.paths.plist.write_bytes(render_plist(build_plist(spec("/h", port=port))))
    report = installer.status()
    assert report.service["answering"] is False


def test_symlinked_plist_is_refused(tmp_path: Path) -> None:
    installer = _installer(tmp_path, ScriptedRunner({}))
    target = tmp_path / "elsewhere.plist"
    target.write_bytes(render_plist(build_plist(spec("/h"))))
    installer.paths.plist.parent.mkdir(parents=True)
    installer.paths.plist.symlink_to(target)
    with pytest.raises(LaunchAgentError) as info:
        installer.install(explicit_home=None, port=None)
    assert info.value.error_code == "plist_unsafe"


def test_install_with_no_home_named_binds_the_default_codex_home(tmp_path: Path) -> None:
    done = launchagent_cli(tmp_path, "install")
    assert done.returncode == 0, done.stderr
    import json

    doc = json.loads(done.stdout)
    assert doc["state"] == "running"
    assert doc["binding"]["path"] == str(tmp_path / ".codex")


# ---------------------------------------------------------------------------------------------
# Legacy programs: what the old service actually started with, or a refusal
# ---------------------------------------------------------------------------------------------


def test_control_characters_are_refused_not_a_traceback() -> None:
    with pytest.raises(LaunchAgentError) as explicit:
        resolve_binding(explicit="/tmp/a\x01b")
    assert explicit.value.error_code == "codex_home_not_absolute"
    raw = plistlib.dumps(
        {"EnvironmentVariables": {"LOOPX_CHAT_CODEX_HOME": "/h\x1bx"}}, fmt=plistlib.FMT_BINARY
    )
    with pytest.raises(LaunchAgentError) as parsed:
        parse_plist(raw, where="/x.plist")
    assert parsed.value.error_code == "plist_malformed"
    assert service_plist(args=["x", "--port", "\u00b2"]).port() is None
    assert service_plist(args=["x", "--port=8123"]).port() == 8123


def _la(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return launchagent_cli(tmp_path, *args, **extra)


def _jobs(tmp_path: Path) -> dict[str, Any]:
    import json

    return dict(json.loads((tmp_path / "launchd.json").read_text())["jobs"])


def test_a_failed_upgrade_leaves_the_running_service_running(tmp_path: Path) -> None:
    import json

    first = _la(tmp_path, "install", LOOPX_CHAT_CODEX_HOME="/Users/me/.codex-a")
    assert first.returncode == 0, first.stderr
    running = _jobs(tmp_path)
    plist = tmp_path / "Library" / "LaunchAgents" / "com.loopx.chat.plist"
    before = plist.read_bytes()
    # The upgrade cannot make its log folder (a file is in the way): refused, and the job
    # that was running was never booted out.
    shutil.rmtree(tmp_path / "Library" / "Logs")
    (tmp_path / "Library" / "Logs").write_text("a file, not a folder")
    again = _la(tmp_path, "install", LOOPX_CHAT_CODEX_HOME="/Users/me/.codex-b")
    assert json.loads(again.stdout)["error_code"] == "plist_unwritable"
    assert "Traceback" not in again.stderr
    assert _jobs(tmp_path) == running and plist.read_bytes() == before


def test_a_failed_bootstrap_of_an_upgrade_reloads_the_previous_plist(tmp_path: Path) -> None:
    import json

    assert _la(tmp_path, "install", LOOPX_CHAT_CODEX_HOME="/Users/me/.codex-a").returncode == 0
    plist = tmp_path / "Library" / "LaunchAgents" / "com.loopx.chat.plist"
    before = plist.read_bytes()
    failed = _la(
        tmp_path,
        "install",
        LOOPX_CHAT_CODEX_HOME="/Users/me/.codex-b",
        FAKE_LAUNCHCTL_BOOTSTRAP_EIO="2",  # the new one fails twice (with its retry)
    )
    assert failed.returncode != 0
    assert json.loads(failed.stdout)["error_code"] == "bootstrap_failed"
    assert plist.read_bytes() == before
    assert "com.loopx.chat" in _jobs(tmp_path)  # the old definition is loaded again


def test_stop_and_uninstall_refuse_before_touching_launchd(tmp_path: Path) -> None:
    import json

    assert _la(tmp_path, "install").returncode == 0
    running = _jobs(tmp_path)
    plist = tmp_path / "Library" / "LaunchAgents" / "com.loopx.chat.plist"
    plist.write_bytes(b"<?xml version='1.0'?><plist><dict><key>a</key>")
    stopped = _la(tmp_path, "stop")
    assert json.loads(stopped.stdout)["error_code"] == "plist_malformed"
    assert _jobs(tmp_path) == running  # not booted out behind the error
    plist.unlink()
    plist.mkdir()
    removed = _la(tmp_path, "uninstall")
    assert json.loads(removed.stdout)["error_code"] == "plist_unsafe"
    assert "Traceback" not in removed.stderr
    assert _jobs(tmp_path) == running


@pytest.mark.parametrize(
    ("existing", "ambient_sqlite", "expected"),
    [
        (service_plist({"CODEX_HOME": "/h", "CODEX_SQLITE_HOME": "/db"}), "/amb", "/db"),
        (
            service_plist(
                {}, ["/bin/sh", "-c", "export CODEX_HOME=/h CODEX_SQLITE_HOME=/s; exec loopx"]
            ),
            None,
            "/s",
        ),
        (
            service_plist({"CODEX_HOME": "/h"}),
            "/amb",
            None,
        ),  # an installed agent keeps its own: none
        (None, "/amb", "/amb"),  # a fresh install follows the installing shell
        (None, None, None),
    ],
)
def test_the_sqlite_home_moves_with_the_binding(
    existing: ParsedPlist | None, ambient_sqlite: str | None, expected: str | None
) -> None:
    assert resolve_binding(existing=existing, ambient_sqlite=ambient_sqlite).sqlite_home == expected


def test_an_upgrade_keeps_the_sqlite_home_of_the_installed_agent(tmp_path: Path) -> None:
    import json

    first = _la(
        tmp_path, "install", LOOPX_CHAT_CODEX_HOME="/Users/me/.codex-a", CODEX_SQLITE_HOME="/db"
    )
    assert json.loads(first.stdout)["binding"]["sqlite_home"] == "/db"
    upgraded = _la(tmp_path, "install", CODEX_SQLITE_HOME="/elsewhere")  # a later shell
    doc = json.loads(upgraded.stdout)
    assert (doc["binding"]["path"], doc["binding"]["sqlite_home"]) == ("/Users/me/.codex-a", "/db")
    plist = plistlib.loads(
        (tmp_path / "Library" / "LaunchAgents" / "com.loopx.chat.plist").read_bytes()
    )
    assert plist["EnvironmentVariables"]["CODEX_SQLITE_HOME"] == "/db"


def test_status_shows_the_home_an_older_plist_runs_with(tmp_path: Path) -> None:
    import json

    agents = tmp_path / "Library" / "LaunchAgents"
    agents.mkdir(parents=True)
    fixture = ROOT / "launchagents" / "fixtures" / "env-codex-home-only.plist"
    (agents / "com.loopx.chat.plist").write_bytes(fixture.read_bytes())
    home = plistlib.loads(fixture.read_bytes())["EnvironmentVariables"]["CODEX_HOME"]
    doc = json.loads(_la(tmp_path, "status").stdout)
    assert doc["binding"] == {"path": home, "source": "plist: CODEX_HOME from EnvironmentVariables"}
    assert any("older plist" in w for w in doc["warnings"])


def test_a_bootout_that_never_completes_leaves_the_previous_plist_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installer = _installer(tmp_path, ScriptedRunner({"print": [LOADED] * 50}))
    installer.paths.plist.parent.mkdir(parents=True)
    old = render_plist(build_plist(spec("/old")))
    installer.paths.plist.write_bytes(old)

    def stuck(label: str, plist_path: str | None = None) -> None:
        raise LaunchAgentError("still loaded after bootout", error_code="launchctl_failed")

    monkeypatch.setattr(installer.launchctl, "bootout", stuck)
    with pytest.raises(LaunchAgentError) as failed:
        installer.install(explicit_home="/new", port=None)
    assert failed.value.error_code == "launchctl_failed"
    # launchd still runs the old job, and the file says so: a retry reloads for real.
    assert installer.paths.plist.read_bytes() == old


def _serve(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The real `loopx-chat serve` on a free loopback port, answering once this returns."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "loopx_chat"),
            *("--state-dir", str(tmp_path / "served-state"), "serve", "--port", str(port)),
        ],
        env={**os.environ, "LOOPX_CHAT_CODEX_HOME": str(tmp_path / "served-home")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def answering() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            assert proc.poll() is None, "serve exited before it listened"
            return False
        return True

    try:
        wait_for(answering)
    except BaseException:
        proc.kill()
        raise
    return proc, port


def _status_elsewhere(tmp_path: Path) -> tuple[int, dict[str, Any]]:
    import json

    done = _la(tmp_path, "status", LOOPX_CHAT_STATE_DIR=str(tmp_path / "other-state"))
    return done.returncode, json.loads(done.stdout)


def test_status_exit_codes_a_script_can_use(tmp_path: Path) -> None:
    import json

    log = tmp_path / "launchctl.log"

    # The same state dir as the service's: status asks it with the owner's secret from there.
    served = {"LOOPX_CHAT_STATE_DIR": str(tmp_path / "served-state")}

    def status() -> tuple[int, dict[str, Any]]:
        done = _la(tmp_path, "status", FAKE_LAUNCHCTL_LOG=str(log), **served)
        assert "Traceback" not in done.stderr
        return done.returncode, json.loads(done.stdout)

    code, doc = status()
    assert (code, doc["state"]) == (4, "not_installed")
    # Stopping what is not installed is an error that touches nothing in launchd.
    log.write_text("")
    stopped = _la(tmp_path, "stop", FAKE_LAUNCHCTL_LOG=str(log))
    assert stopped.returncode == 1
    assert json.loads(stopped.stdout)["error_code"] == "not_installed"
    verbs = [json.loads(line)["argv"][0] for line in log.read_text().splitlines()]
    assert "bootout" not in verbs, verbs

    proc, port = _serve(tmp_path)
    try:
        assert _la(tmp_path, "install", "--port", str(port), **served).returncode == 0
        code, doc = status()
        assert (code, doc["state"], doc["service"]["answering"]) == (0, "running", True)
        # Another state dir has no service socket: nothing is asked over TCP, and it says so.
        code, doc = _status_elsewhere(tmp_path)
        assert (code, doc["service"]["answering"], doc["service"]["detail"]) == (
            3,
            False,
            "no service socket in its state dir",
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    code, doc = status()  # launchd says running, but nobody answers on the port
    assert (code, doc["state"], doc["service"]["answering"]) == (3, "running", False)
    assert _la(tmp_path, "stop").returncode == 0
    code, doc = status()
    assert (code, doc["state"]) == (3, "installed_not_loaded")
    assert _la(tmp_path, "uninstall").returncode == 0
    assert status()[0] == 4


def test_status_exit_codes_are_in_the_help_and_the_readme() -> None:
    from click.testing import CliRunner

    from loopx_chat.cli import main

    shown = CliRunner().invoke(main, ["launchagent", "status", "--help"]).stdout
    docs = "".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    for code, words in ((0, "running and answering"), (3, "not loaded"), (4, "not installed")):
        assert f"{code}  " in shown and words in shown
        assert f"`{code}` {words}" in docs, (code, words)


def test_launchd_holds_the_services_port_between_two_runs() -> None:
    """The plist's `Sockets` entry: launchd binds 127.0.0.1 on the port `serve` is given and
    keeps it while the service restarts, so no other user can take it in between; off
    macOS `serve` never asks launchd for it."""
    from loopx_chat.launchagent.plist import build_plist, render_plist
    from loopx_chat.service.launchd_socket import launchd_listener

    data = plistlib.loads(render_plist(build_plist(spec("/h", port=9876))))
    assert data["Sockets"] == {
        "Listeners": {
            "SockNodeName": "127.0.0.1",
            "SockServiceName": "9876",
            "SockType": "stream",
            "SockFamily": "IPv4",
        }
    }
    assert "--port" in data["ProgramArguments"]
    assert data["ProgramArguments"][data["ProgramArguments"].index("--port") + 1] == "9876"
    if sys.platform != "darwin":
        assert launchd_listener() is None

"""`loopx-chat service` on Linux, end to end against the stateful fake `systemctl --user`:
every unit written passes `systemd-analyze verify`, an upgrade keeps the binding and the
user's lines (drop-ins untouched), refusals change nothing, and `status` exits 0/3/4."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from loopx_chat.systemd.unit import SERVICE_UNIT, SOCKET_UNIT, parse_unit
from tests.helpers.fakes import FAKE_LAUNCHCTL
from tests.helpers.systemd import FakeSystemd, verify_units
from tests.helpers.waiting import wait_for


@pytest.fixture
def sd(tmp_path: Path) -> FakeSystemd:
    return FakeSystemd(tmp_path)


def unit_env(sd: FakeSystemd) -> dict[str, str]:
    text = (sd.units / SERVICE_UNIT).read_text()
    return parse_unit(text, where="u", user_home=str(sd.home)).environment()


def test_a_fresh_install_writes_both_units_reloads_enables_and_starts(sd: FakeSystemd) -> None:
    code, doc = sd.service("install", "--codex-home", str(sd.root / "my codex"), "--port", "9123")
    assert code == 0, doc
    verify_units(sd.units, SERVICE_UNIT, SOCKET_UNIT)
    assert doc["binding"] == {"path": str(sd.root / "my codex"), "source": "explicit"}
    assert (doc["state"], doc["enabled"], doc["port"]) == ("running", True, 9123)
    assert "127.0.0.1:9123" in (sd.units / SOCKET_UNIT).read_text()
    assert (sd.units / SERVICE_UNIT).stat().st_mode & 0o777 == 0o644
    verbs = [argv[0] for argv in sd.verbs()]
    # systemd reads the new files before anything is started from them.
    assert verbs.index("daemon-reload") < verbs.index("enable") < verbs.index("start")
    started = [c for c in sd.calls() if c["argv"][0] == "start"][-1]
    assert started["ran"][SERVICE_UNIT] == (sd.units / SERVICE_UNIT).read_text()
    assert (sd.units / "default.target.wants" / SERVICE_UNIT).is_symlink()
    assert (sd.units / "sockets.target.wants" / SOCKET_UNIT).is_symlink()
    # Nothing the service is asked about answers on 9123 here: installed, not serving.
    assert doc["service"]["answering"] is False
    assert "token" not in json.dumps(doc)  # the login URL is for the terminal only


def test_xdg_config_home_is_honoured(sd: FakeSystemd) -> None:
    config = sd.root / "xdg"
    code, doc = sd.service("install", XDG_CONFIG_HOME=str(config))
    assert code == 0, doc
    assert doc["unit_path"] == str(config / "systemd" / "user" / SERVICE_UNIT)
    assert not sd.units.exists()
    assert doc["binding"]["path"] == str(sd.home / ".codex")


# A unit an earlier loopx-chat wrote (another argv, no socket), which the owner then edited:
# their own variables, a nicer priority, a restart policy, a comment; and a drop-in.
OLDER_UNIT = """\
# loopx-chat: written by `loopx-chat service install`.
[Unit]
Description=loopx-chat (older)
Wants=network-online.target

[Service]
ExecStart={python} -m loopx_chat serve --port 9001 --notify webhook \\
  --notify-url https://hook.invalid/x --approval untrusted
Environment="LOOPX_CHAT_CODEX_HOME={home}" PATH=/usr/bin:/bin
Environment=OPENAI_ORG=org-mine
# mine: keep the service gentle
Nice=10
Restart=always

[Install]
WantedBy=default.target
"""
DROPIN = "[Service]\nEnvironment=HTTPS_PROXY=http://proxy.invalid:3128\nMemoryMax=2G\n"


def test_an_upgrade_from_an_older_unit_keeps_the_binding_and_every_user_line(
    sd: FakeSystemd,
) -> None:
    home = sd.root / "bound home"
    sd.units.mkdir(parents=True)
    older = OLDER_UNIT.format(python=sys.executable, home=home)
    (sd.units / SERVICE_UNIT).write_text(older)
    dropins = sd.units / f"{SERVICE_UNIT}.d"
    dropins.mkdir()
    (dropins / "override.conf").write_text(DROPIN)
    # Another shell's CODEX_HOME never moves an installed service.
    code, doc = sd.service("install", CODEX_HOME=str(sd.root / "elsewhere"))
    assert code == 0, doc
    verify_units(sd.units, SERVICE_UNIT, SOCKET_UNIT)  # with the drop-in
    assert doc["binding"] == {
        "path": str(home),
        "source": "installed unit: LOOPX_CHAT_CODEX_HOME from loopx-chat.service",
    }
    assert doc["binding_changed"] is None
    unit = parse_unit((sd.units / SERVICE_UNIT).read_text(), where="u", user_home=str(sd.home))
    argv = unit.exec_start()
    assert argv[argv.index("serve") :] == (
        *("serve", "--host", "127.0.0.1", "--port", "9001", "--notify", "webhook"),
        *("--notify-url", "https://hook.invalid/x", "--approval", "untrusted"),
    )
    env = unit.environment()
    assert (env["LOOPX_CHAT_CODEX_HOME"], env["OPENAI_ORG"]) == (str(home), "org-mine")
    assert unit.values("Service", "Nice") == ["10"]
    assert unit.values("Service", "Restart") == ["always"]
    assert unit.values("Unit", "Wants") == ["network-online.target"]
    assert unit.values("Unit", "Requires") == [SOCKET_UNIT]
    assert "# mine: keep the service gentle" in (sd.units / SERVICE_UNIT).read_text()
    assert {"Environment.OPENAI_ORG", "Service.Nice", "Service.Restart", "Unit.Wants"} <= set(
        doc["kept"]
    )
    assert (dropins / "override.conf").read_text() == DROPIN  # never touched
    assert doc["dropins"] == [str(dropins / "override.conf")]
    backups = sorted(sd.units.glob(f"{SERVICE_UNIT}.*.previous"))
    assert [b.read_text() for b in backups] == [older]
    # A second install over the upgraded unit changes nothing and keeps no new backup.
    before = sd.snapshot()
    assert sd.service("install")[0] == 0
    assert sd.snapshot() == before


def test_a_rebind_says_what_it_replaces(sd: FakeSystemd) -> None:
    assert sd.service("install", "--codex-home", "/first")[0] == 0
    code, doc = sd.service("install", "--codex-home", "/second")
    assert code == 0, doc
    assert doc["binding_changed"] == {"from": "/first", "to": "/second", "source": "--codex-home"}
    assert unit_env(sd)["LOOPX_CHAT_CODEX_HOME"] == "/second"
    code, doc = sd.service("install", LOOPX_CHAT_CODEX_HOME="/third")
    assert doc["binding_changed"]["source"] == "LOOPX_CHAT_CODEX_HOME"


def test_refusals_change_nothing_on_disk_or_in_systemd(sd: FakeSystemd) -> None:
    assert sd.service("install", "--codex-home", "/h")[0] == 0
    dropins = sd.units / f"{SERVICE_UNIT}.d"
    dropins.mkdir()
    (dropins / "home.conf").write_text("[Service]\nEnvironment=LOOPX_CHAT_CODEX_HOME=/d\n")
    before, started = sd.snapshot(), len(sd.calls())

    def refused(code: str, *args: str, **env: str) -> None:
        done, doc = sd.service(*args, **env)
        assert (done, doc["error_code"]) == (1, code), doc
        assert sd.snapshot() == before
        writes = [c["argv"][0] for c in sd.calls()[started:]]
        assert not {"start", "stop", "enable", "daemon-reload"} & set(writes), writes

    refused("binding_overridden", "install", "--codex-home", "/other")
    refused("systemd_user_unavailable", "install", FAKE_SYSTEMCTL_NO_BUS="1")
    refused("usage_error", "install", "--notify", "webhook")
    (sd.units / SERVICE_UNIT).write_text("[Service]\nExecStart=/x \\\n")
    before = sd.snapshot()
    refused("unit_malformed", "install")
    refused("unit_malformed", "status")
    (sd.units / SERVICE_UNIT).unlink()
    (sd.units / SERVICE_UNIT).symlink_to(sd.root / "elsewhere.service")
    before = sd.snapshot()
    refused("unit_unsafe", "install")
    refused("unit_unsafe", "uninstall")


def test_a_failed_start_puts_the_previous_unit_back(sd: FakeSystemd) -> None:
    assert sd.service("install", "--codex-home", "/old")[0] == 0
    old = (sd.units / SERVICE_UNIT).read_text()
    code, doc = sd.service("install", "--codex-home", "/new", FAKE_SYSTEMCTL_RUN="failed")
    assert (code, doc["error_code"]) == (1, "systemctl_failed"), doc
    assert "journalctl --user -u loopx-chat.service" in doc["gate"]["next_action"]
    assert (sd.units / SERVICE_UNIT).read_text() == old
    # ... and systemd was told: the last definition it loaded is the old one.
    assert sd.manager()["loaded"][SERVICE_UNIT] == old


def test_a_new_port_restarts_the_socket_while_the_service_is_down(sd: FakeSystemd) -> None:
    assert sd.service("install", "--port", "9200")[0] == 0
    started = len(sd.calls())
    code, doc = sd.service("install", "--port", "9201")
    assert (code, doc["port"]) == (0, 9201)
    verbs = [c["argv"] for c in sd.calls()[started:]]
    stop_socket = verbs.index(["stop", SOCKET_UNIT])
    assert (
        verbs.index(["stop", SERVICE_UNIT])
        < stop_socket
        < verbs.index(["start", SOCKET_UNIT, SERVICE_UNIT])
    )
    # The same port: the socket stays up, only the service restarts.
    started = len(sd.calls())
    assert sd.service("restart")[0] == 0
    assert ["stop", SOCKET_UNIT] not in [c["argv"] for c in sd.calls()[started:]]


def _serve_on_systemds_socket(sd: FakeSystemd, port: int) -> subprocess.Popen[bytes]:
    """The real `serve` of the unit, started as systemd would: through Debian's
    `systemd-socket-activate`, which listens on the port and execs the service with the
    socket as fd 3 once a client connects."""
    activate = subprocess.run(["which", "systemd-socket-activate"], capture_output=True)
    if activate.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("systemd-socket-activate (Debian systemd) is missing")
        pytest.skip("systemd-socket-activate (Debian systemd) is missing")
    unit = parse_unit((sd.units / SERVICE_UNIT).read_text(), where="u", user_home=str(sd.home))
    env = unit.environment()
    proc = subprocess.Popen(
        [
            "systemd-socket-activate",
            f"--listen=127.0.0.1:{port}",
            *(f"--setenv={k}={v}" for k, v in env.items() if k != "PATH"),
            f"--setenv=PATH={os.environ['PATH']}",
            *unit.exec_start(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def answering() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                conn.sendall(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                return conn.recv(64).startswith(b"HTTP/1.1 200 ")
        except OSError:
            assert proc.poll() is None, "the activated serve exited"
            return False

    wait_for(answering)
    return proc


def test_status_exit_codes_a_script_can_use(sd: FakeSystemd) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, doc = sd.service("status")
    assert (code, doc["state"]) == (4, "not_installed")
    code, doc = sd.service("stop")
    assert (code, doc["error_code"]) == (1, "not_installed")
    assert sd.service("install", "--codex-home", str(sd.root / "h"), "--port", str(port))[0] == 0
    code, doc = sd.service("status")
    assert (code, doc["state"], doc["service"]["answering"]) == (3, "running", False)
    proc = _serve_on_systemds_socket(sd, port)
    try:
        code, doc = sd.service("status")
        assert (code, doc["state"], doc["service"]["answering"]) == (0, "running", True)
        assert doc["service"]["codex_home"] == str(sd.root / "h")
        # Asked over the owner's socket in the unit's state dir, with no secret: none is
        # printed either, and the person is told how to sign in.
        text = subprocess.run(
            [sys.executable, "-m", "loopx_chat", "service", "status"],
            env=sd.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        secret = (sd.root / "state" / "service-token").read_text().strip()
        assert text.returncode == 0 and "sign in:  loopx-chat open" in text.stdout, text.stderr
        assert secret and secret not in text.stdout + text.stderr + json.dumps(doc)
        assert "service: answering" in text.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert sd.service("stop")[0] == 0
    code, doc = sd.service("status")
    assert (code, doc["state"], doc["active"]) == (3, "installed_not_running", "inactive")
    code, doc = sd.service("status", FAKE_SYSTEMCTL_NO_BUS="1")
    assert (code, doc["state"]) == (3, "installed_manager_unavailable")
    code, doc = sd.service("status", PATH=str(sd.root / "no-systemctl-here"))
    assert (code, doc["state"]) == (3, "installed_manager_unavailable")
    assert sd.service("start")[0] == 0
    dropins = sd.units / f"{SERVICE_UNIT}.d"
    dropins.mkdir()
    (dropins / "mine.conf").write_text(DROPIN)
    code, doc = sd.service("uninstall")
    assert (code, doc["state"]) == (0, "not_installed")
    assert sd.service("status")[0] == 4
    code, doc = sd.service("status", PATH=str(sd.root / "no-systemctl-here"))
    assert (code, doc["state"]) == (4, "not_installed")  # a Linux without systemd
    code, doc = sd.service("install", PATH=str(sd.root / "no-systemctl-here"))
    assert (code, doc["error_code"]) == (1, "systemctl_unavailable")
    assert sorted(p.name for p in sd.units.rglob("*") if not p.is_dir()) == ["mine.conf"]


def test_status_exit_codes_are_in_the_help_and_the_readme() -> None:
    from click.testing import CliRunner

    from loopx_chat.cli import main

    shown = CliRunner().invoke(main, ["service", "status", "--help"]).stdout
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    for code, words in ((0, "running and answering"), (3, "not loaded"), (4, "not installed")):
        assert f"{code}  " in shown and words in shown
    assert "loopx-chat service status" in readme and "systemd" in readme


def test_launchagent_status_on_linux_exits_as_documented(sd: FakeSystemd) -> None:
    done = sd.run("launchagent", "status")
    doc = json.loads(done.stdout)
    assert (done.returncode, doc["state"]) == (4, "not_installed")
    assert "loopx-chat service status" in doc["notes"][0]
    install = sd.run("launchagent", "install")
    assert (install.returncode, json.loads(install.stdout)["error_code"]) == (
        1,
        "platform_unsupported",
    )
    assert "loopx-chat service install" in json.loads(install.stdout)["gate"]["next_action"]


def test_on_macos_service_is_launchagent(sd: FakeSystemd) -> None:
    fake = sd.bindir / "launchctl"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_LAUNCHCTL}" "$@"\n')
    fake.chmod(0o755)
    mac = {
        "LOOPX_SERVICE_PLATFORM": "darwin",
        "LOOPX_LAUNCHAGENT_ALLOW_NON_DARWIN": "1",
        "FAKE_LAUNCHCTL_STATE": str(sd.root / "launchd.json"),
    }
    code, doc = sd.service("install", "--codex-home", "/mac-home", "--port", "9301", **mac)
    assert (code, doc["label"], doc["port"]) == (0, "com.loopx.chat", 9301), doc
    assert doc["binding"]["path"] == "/mac-home"
    assert not sd.units.exists()  # no systemd unit on macOS
    code, doc = sd.service("status", **mac)
    assert (code, doc["state"]) == (3, "running")
    assert sd.service("uninstall", **mac)[0] == 0
    assert sd.service("status", **mac)[0] == 4
    code, doc = sd.service("status", LOOPX_SERVICE_PLATFORM="win32")
    assert (code, doc["error_code"]) == (1, "platform_unsupported")

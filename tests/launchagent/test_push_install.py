"""`launchagent install` carries `serve`'s push options into the plist's ProgramArguments and
keeps their secrets out of it (launchd starts `serve` without the owner's shell, so `serve`
reads them from a 0600 file in the 0700 state dir), against the fake launchctl. An upgrade
keeps options and secrets unless told otherwise; no secret is in the plist, in any launchctl
argv, in the install's or `status`'s output."""

from __future__ import annotations

import json
import plistlib
import subprocess
from pathlib import Path

from tests.helpers.launchd import launchagent_cli
from tests.helpers.push_install import (
    PUSH_ARGS,
    SECRET_ENV,
    assert_no_secret,
    kept_secrets,
)


def _la(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    done = launchagent_cli(
        tmp_path,
        *args,
        FAKE_LAUNCHCTL_LOG=str(tmp_path / "launchctl.log"),
        LOOPX_CHAT_STATE_DIR=str(tmp_path / "state"),
        **extra,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _plist(tmp_path: Path) -> Path:
    return tmp_path / "Library" / "LaunchAgents" / "com.loopx.chat.plist"


def _serve_args(tmp_path: Path) -> tuple[str, ...]:
    args = plistlib.loads(_plist(tmp_path).read_bytes())["ProgramArguments"]
    return tuple(args[args.index("serve") :])


def test_install_carries_push_options_and_keeps_secrets_out_of_the_plist(tmp_path: Path) -> None:
    public = "https://phone.example:8443"
    done = _la(tmp_path, "install", "--public-url", public, *PUSH_ARGS, **SECRET_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _serve_args(tmp_path) == (
        *("serve", "--host", "127.0.0.1", "--port", "8767", "--notify", "desktop"),
        *("--public-url", public, *PUSH_ARGS),
    )
    env = plistlib.loads(_plist(tmp_path).read_bytes())["EnvironmentVariables"]
    assert not set(SECRET_ENV) & set(env)
    assert kept_secrets(tmp_path / "state") == SECRET_ENV
    status = _la(tmp_path, "status")
    assert json.loads(status.stdout)["state"] == "running"
    log = (tmp_path / "launchctl.log").read_text()
    assert_no_secret(
        _plist(tmp_path).read_text(), log, done.stdout, done.stderr, status.stdout, status.stderr
    )

    # An upgrade from a shell with none of it keeps options and secrets.
    again = _la(tmp_path, "install", "--port", "9100")
    assert again.returncode == 0, again.stdout
    assert _serve_args(tmp_path)[-len(PUSH_ARGS) :] == PUSH_ARGS
    assert kept_secrets(tmp_path / "state") == SECRET_ENV
    # A channel whose secret is in neither the shell nor the kept file is refused, and the
    # plist stays as it was.
    before = _plist(tmp_path).read_bytes()
    (tmp_path / "state" / "push-secrets.json").unlink()
    refused = _la(tmp_path, "install", "--push", "pushover")
    assert refused.returncode != 0 and "LOOPX_CHAT_PUSHOVER_TOKEN" in refused.stdout
    assert _plist(tmp_path).read_bytes() == before
    assert_no_secret(refused.stdout, refused.stderr)


def test_a_secret_hand_written_into_the_plist_moves_to_the_state_dir(tmp_path: Path) -> None:
    assert _la(tmp_path, "install").returncode == 0
    slack = SECRET_ENV["LOOPX_CHAT_SLACK_WEBHOOK_URL"]
    data = plistlib.loads(_plist(tmp_path).read_bytes())
    data["ProgramArguments"] += ["--push", "slack"]
    data["EnvironmentVariables"]["LOOPX_CHAT_SLACK_WEBHOOK_URL"] = slack
    data["EnvironmentVariables"]["MY_OWN"] = "kept"
    _plist(tmp_path).write_bytes(plistlib.dumps(data))
    done = _la(tmp_path, "install")
    assert done.returncode == 0, done.stdout
    env = plistlib.loads(_plist(tmp_path).read_bytes())["EnvironmentVariables"]
    assert "LOOPX_CHAT_SLACK_WEBHOOK_URL" not in env and env["MY_OWN"] == "kept"
    assert _serve_args(tmp_path)[-2:] == ("--push", "slack")
    assert kept_secrets(tmp_path / "state") == {"LOOPX_CHAT_SLACK_WEBHOOK_URL": slack}
    notes = json.loads(done.stdout)["notes"]
    assert any(n.startswith("LOOPX_CHAT_SLACK_WEBHOOK_URL moved out") for n in notes)
    assert_no_secret(_plist(tmp_path).read_text(), done.stdout)

"""`service install` carries `serve`'s push options into the unit's ExecStart and keeps their
secrets out of it: against the fake `systemctl --user`, every unit checked by the real
`systemd-analyze verify`. The secrets the installing shell holds go to a 0600 file in the
0700 state dir; an upgrade keeps options and secrets unless told otherwise; `none` drops
them; a missing or malformed secret is refused with nothing changed. No secret is in the
unit, in any systemctl argv, in the install's or `status`'s output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopx_chat.systemd.unit import SERVICE_UNIT, parse_unit
from tests.helpers.push_install import (
    NTFY_URL,
    PUSH_ARGS,
    SECRET_ENV,
    assert_no_secret,
    kept_secrets,
)
from tests.helpers.systemd import FakeSystemd


@pytest.fixture
def sd(tmp_path: Path) -> FakeSystemd:
    return FakeSystemd(tmp_path)


def _argv(sd: FakeSystemd) -> tuple[str, ...]:
    unit = parse_unit((sd.units / SERVICE_UNIT).read_text(), where="u", user_home=str(sd.home))
    argv = unit.exec_start()
    return argv[argv.index("serve") :]


def _everything_said(sd: FakeSystemd, *outputs: str) -> None:
    """No secret in the unit files, in any argv systemctl was given, or in what was printed."""
    files = [p.read_text() for p in sd.units.rglob("*") if p.is_file()]
    assert_no_secret(*files, sd.log.read_text(), *outputs)


def test_install_carries_push_options_and_keeps_secrets_out_of_the_unit(
    sd: FakeSystemd,
) -> None:
    public = "https://phone.example:8443"
    done = sd.run("service", "install", "--public-url", public, *PUSH_ARGS, **SECRET_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    code, doc = sd.service("restart")  # verified by systemd-analyze, as the install was
    assert code == 0, doc
    assert _argv(sd) == (
        *("serve", "--host", "127.0.0.1", "--port", "8767", "--notify", "desktop"),
        *("--public-url", public, *PUSH_ARGS),
    )
    assert kept_secrets(sd.root / "state") == SECRET_ENV
    status = sd.run("service", "status")
    _everything_said(sd, done.stdout, done.stderr, status.stdout, status.stderr)

    # An upgrade from a shell with no secrets and no push options keeps both.
    before = (sd.units / SERVICE_UNIT).read_text()
    code, doc = sd.service("install", "--port", "9100")
    assert code == 0, doc
    assert _argv(sd)[-len(PUSH_ARGS) :] == PUSH_ARGS and "--public-url" in _argv(sd)
    assert (sd.units / SERVICE_UNIT).read_text() != before
    assert kept_secrets(sd.root / "state") == SECRET_ENV
    # A secret given again replaces the kept one; only the channels asked for keep theirs.
    newer = "https://hooks.slack.com/services/T1/B1/anotherslacksecret"
    code, doc = sd.service("install", "--push", "slack", LOOPX_CHAT_SLACK_WEBHOOK_URL=newer)
    assert code == 0, doc
    assert "--push" in _argv(sd) and _argv(sd).count("--push") == 1
    assert "--telegram-chat" not in _argv(sd) and NTFY_URL in _argv(sd)
    assert kept_secrets(sd.root / "state") == {
        "LOOPX_CHAT_SLACK_WEBHOOK_URL": newer,
        "LOOPX_CHAT_NTFY_TOKEN": SECRET_ENV["LOOPX_CHAT_NTFY_TOKEN"],
    }
    # `none` drops them, and the kept secrets with them.
    code, doc = sd.service("install", "--push", "none", "--ntfy-url", "none")
    assert code == 0, doc
    assert not {"--push", "--ntfy-url", "--telegram-chat"} & set(_argv(sd))
    assert not (sd.root / "state" / "push-secrets.json").exists()


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (("--push", "pushover"), {}, "LOOPX_CHAT_PUSHOVER_TOKEN"),
        (("--push", "slack"), {"LOOPX_CHAT_SLACK_WEBHOOK_URL": "http://hooks.example/x"}, None),
        (
            ("--push", "telegram", "--telegram-chat", "42"),
            {"LOOPX_CHAT_TELEGRAM_TOKEN": "not-a-token"},
            "LOOPX_CHAT_TELEGRAM_TOKEN",
        ),
        (("--push", "telegram"), SECRET_ENV, "--telegram-chat"),
        (("--ntfy-url", "ftp://ntfy.example/t"), {}, None),
        (
            ("--ntfy-url", "https://ntfy.example/t"),
            {"LOOPX_CHAT_NTFY_TOKEN": "Bearer tk_copiedwiththeheader"},
            "LOOPX_CHAT_NTFY_TOKEN",
        ),
    ],
)
def test_a_push_serve_would_refuse_is_refused_with_nothing_changed(
    sd: FakeSystemd, args: tuple[str, ...], env: dict[str, str], named: str | None
) -> None:
    assert sd.service("install")[0] == 0
    before, calls = sd.snapshot(), len(sd.calls())
    done = sd.run("service", "install", *args, **env)
    assert done.returncode != 0 and '"usage_error"' in done.stdout, done.stdout
    if named:
        assert named in done.stdout
    assert sd.snapshot() == before
    writes = {c["argv"][0] for c in sd.calls()[calls:]}
    assert not {"start", "stop", "restart", "enable", "daemon-reload"} & writes, writes
    assert not (sd.root / "state" / "push-secrets.json").exists()
    _everything_said(sd, done.stdout, done.stderr)


def test_a_secret_hand_written_into_the_unit_moves_to_the_state_dir(sd: FakeSystemd) -> None:
    assert sd.service("install")[0] == 0
    path = sd.units / SERVICE_UNIT
    slack = SECRET_ENV["LOOPX_CHAT_SLACK_WEBHOOK_URL"]
    # What an owner had to do before: the channel on ExecStart, its secret in Environment=.
    text = path.read_text().replace('"desktop"', '"desktop" "--push" "slack"')
    text = text.replace(
        "[Service]\n", f'[Service]\nEnvironment="LOOPX_CHAT_SLACK_WEBHOOK_URL={slack}"\n'
    )
    path.write_text(text)
    code, doc = sd.service("install")
    assert code == 0, doc
    assert _argv(sd)[-2:] == ("--push", "slack")
    assert slack not in path.read_text()
    assert kept_secrets(sd.root / "state") == {"LOOPX_CHAT_SLACK_WEBHOOK_URL": slack}
    assert any(n.startswith("LOOPX_CHAT_SLACK_WEBHOOK_URL moved out") for n in doc["notes"])
    assert slack not in json.dumps(doc)

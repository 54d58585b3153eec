"""What the service-manager install tests give and look for: the push options `serve` takes,
secrets in the installing shell's environment, and where none of them may appear."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.helpers.push_apis import PUSHOVER_TOKEN, PUSHOVER_USER, TELEGRAM_TOKEN

SLACK_URL = "https://hooks.slack.com/services/T0SECRET/B0SECRET/slacksecretslacksecret"
NTFY_TOKEN = "tk_ntfysecretntfysecretntfysecret"
SECRET_ENV = {
    "LOOPX_CHAT_PUSHOVER_TOKEN": PUSHOVER_TOKEN,
    "LOOPX_CHAT_PUSHOVER_USER": PUSHOVER_USER,
    "LOOPX_CHAT_TELEGRAM_TOKEN": TELEGRAM_TOKEN,
    "LOOPX_CHAT_SLACK_WEBHOOK_URL": SLACK_URL,
    "LOOPX_CHAT_NTFY_TOKEN": NTFY_TOKEN,
}
SECRET_VALUES = tuple(SECRET_ENV.values())
NTFY_URL = "https://ntfy.example/loopx-owner-topic"
PUSH_ARGS = (
    *("--ntfy-url", NTFY_URL, "--push", "pushover", "--push", "telegram", "--push", "slack"),
    *("--telegram-chat", "123456789"),
)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for value in SECRET_VALUES:
            assert value not in text


def kept_secrets(state: Path) -> dict[str, str]:
    """The 0600 file in the 0700 state dir, its values by variable."""
    path = state / "push-secrets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    return dict(json.loads(path.read_text())["env"])

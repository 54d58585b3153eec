"""Which push options a service definition (the LaunchAgent's plist, the systemd unit) gives
`serve`, and which secrets they need. Pure: options and the installed argv in, argv out.

Owns the one table of the push channels and the environment variables holding their
secrets (`CHANNEL_SECRETS`; `notify/` reads its names from here), and the rule an upgrade
follows: an option not given keeps what the installed definition says, `none` drops it.
It never sees a secret's value: only the names of the variables that hold them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loopx_chat.errors import UsageError

# `serve --push CHANNEL` → the variables its secrets are read from (never argv).
CHANNEL_SECRETS: Mapping[str, tuple[str, ...]] = {
    "pushover": ("LOOPX_CHAT_PUSHOVER_TOKEN", "LOOPX_CHAT_PUSHOVER_USER"),
    "telegram": ("LOOPX_CHAT_TELEGRAM_TOKEN",),
    "slack": ("LOOPX_CHAT_SLACK_WEBHOOK_URL",),
}
PUSH_CHANNELS = tuple(CHANNEL_SECRETS)
# ntfy's token, only when the owner's ntfy server wants one.
NTFY_TOKEN_ENV = "LOOPX_CHAT_NTFY_TOKEN"
SECRET_NAMES = frozenset({NTFY_TOKEN_ENV, *(n for ns in CHANNEL_SECRETS.values() for n in ns)})
# What `install --push none` / `--ntfy-url none` say: drop what the installed one has.
DROP = "none"


def option_values(argv: Sequence[str], name: str) -> tuple[str, ...]:
    """Every value of `name` (`--push X` or `--push=X`) in an argv, in order."""
    args = list(argv)
    found = []
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith(name + "="):
            found.append(arg[len(name) + 1 :])
    return tuple(found)


@dataclass(frozen=True)
class PushChoice:
    """What `install` was told; None / () means: keep what the installed definition says."""

    ntfy_url: str | None = None
    push: tuple[str, ...] = ()
    telegram_chat: str | None = None


@dataclass(frozen=True)
class PushPlan:
    """The push options the new definition carries."""

    ntfy_url: str | None = None
    channels: tuple[str, ...] = ()
    telegram_chat: str | None = None

    def argv(self) -> tuple[str, ...]:
        return (
            *(("--ntfy-url", self.ntfy_url) if self.ntfy_url else ()),
            *(word for channel in self.channels for word in ("--push", channel)),
            *(("--telegram-chat", self.telegram_chat) if self.telegram_chat else ()),
        )

    @property
    def required_secrets(self) -> tuple[str, ...]:
        return tuple(name for channel in self.channels for name in CHANNEL_SECRETS[channel])

    @property
    def optional_secrets(self) -> tuple[str, ...]:
        return (NTFY_TOKEN_ENV,) if self.ntfy_url else ()


KEEP = PushChoice()  # install given no push option: keep the installed ones
NO_PUSH = PushPlan()


def push_plan(choice: PushChoice, installed_argv: Sequence[str]) -> PushPlan:
    """The push options of a new definition: what was given, else what the installed one
    says; `none` drops. `usage_error` for `--push telegram` with no chat to write to (serve
    would refuse at every start)."""
    ntfy = choice.ntfy_url
    if ntfy is None:
        ntfy = next(iter(option_values(installed_argv, "--ntfy-url")), None)
    channels = choice.push or option_values(installed_argv, "--push")
    if DROP in channels:
        channels = ()
    kept = tuple(dict.fromkeys(c for c in channels if c in CHANNEL_SECRETS))
    chat = choice.telegram_chat
    if chat is None:
        chat = next(iter(option_values(installed_argv, "--telegram-chat")), None)
    if "telegram" not in kept:
        if choice.telegram_chat is not None:
            raise UsageError("--telegram-chat is for --push telegram", error_code="usage_error")
        chat = None
    elif not chat:
        raise UsageError(
            "--push telegram needs --telegram-chat ID (none given, and the installed service "
            "names none); nothing was changed",
            error_code="usage_error",
        )
    return PushPlan(None if ntfy in (None, "", DROP) else ntfy, kept, chat)

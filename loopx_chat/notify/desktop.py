"""Desktop notices: macOS Notification Center through `terminal-notifier` (a click opens the
page) or `osascript`, else `notify-send`.

Owns the three argv shapes and running them: argv only (never a shell), stdin and output to
/dev/null, a 10 s limit, the service's own environment. `terminal-notifier`, when it is on
the service's PATH (`brew install terminal-notifier`), gets each text as its own argument
(`-title`, `-message`, `-open` the page URL, `-group` the gate, so a notice about the same
gate replaces the last one); nothing needs escaping there. Otherwise the text reaches
`osascript` as an AppleScript string literal built by `applescript.applescript_string`, the
one escaping rule; a notice from `display notification` cannot carry a link, so the page URL
(never the secret: the page asks for the login itself) is its subtitle. `notify-send` gets
the URL in the body. Success is exit status 0; a missing notifier is "unavailable", never an
error.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from loopx_chat.notify.applescript import applescript_string
from loopx_chat.notify.notice import Notice

RUN_TIMEOUT_SEC = 10.0


def osascript_argv(program: str, notice: Notice) -> list[str]:
    script = (
        f"display notification {applescript_string(notice.body)}"
        f" with title {applescript_string(notice.title)}"
        f" subtitle {applescript_string(notice.page_url)}"
    )
    return [program, "-e", script]


def terminal_notifier_argv(program: str, notice: Notice) -> list[str]:
    group = notice.blocker_ref or notice.key
    return [
        *(program, "-title", notice.title, "-message", notice.body),
        *("-open", notice.page_url, "-group", group),
    ]


def notify_send_argv(program: str, notice: Notice) -> list[str]:
    return [program, "--app-name=loopx-chat", notice.title, f"{notice.body}\n{notice.page_url}"]


@dataclass(frozen=True)
class Outcome:
    ok: bool
    channel: str
    code: str  # "sent", or why not: unavailable, exit_N, timeout, spawn_failed, http_N, ...


class DesktopSender:
    """Sends one notice through the first desktop notifier found on the service's PATH."""

    channel = "desktop"

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        run: Callable[..., subprocess.CompletedProcess[bytes]] = subprocess.run,
        which: Callable[..., str | None] = shutil.which,
    ) -> None:
        self._env = dict(environ)
        self._run = run
        self._which = which

    def argv(self, notice: Notice) -> Sequence[str] | None:
        path = self._env.get("PATH")
        found = self._which("terminal-notifier", path=path)
        if found:
            return terminal_notifier_argv(found, notice)
        found = self._which("osascript", path=path)
        if found:
            return osascript_argv(found, notice)
        found = self._which("notify-send", path=path)
        if found:
            return notify_send_argv(found, notice)
        return None

    def send(self, notice: Notice) -> Outcome:
        argv = self.argv(notice)
        if argv is None:
            return Outcome(False, self.channel, "unavailable")
        try:
            done = self._run(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self._env,
                timeout=RUN_TIMEOUT_SEC,
                check=False,
                shell=False,
            )
        except subprocess.TimeoutExpired:
            return Outcome(False, self.channel, "timeout")
        except OSError:
            return Outcome(False, self.channel, "spawn_failed")
        if done.returncode != 0:
            return Outcome(False, self.channel, f"exit_{done.returncode}")
        return Outcome(True, self.channel, "sent")

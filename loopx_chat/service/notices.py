"""Which goals need the owner now, turned into notices: one per gate, never twice.

Owns the watch: whenever the status document changes (any process's write), every goal the
page would badge "Waiting on you" (each pending blocking gate) or "Blocked" (its latest
blocker) becomes a notice keyed by goal and gate, handed to the notifier, which dedups,
rate-limits and sends on its own workers. It records each outcome in the notice log and
keeps, in memory, the failed ones as notes for the card. It never puts a gate's question,
a path or the owner's secret in a notice: the goal id, the kind and a link only.

The link is the page on the public URL when the service has one (`--public-url`), else on
loopback, with the gate in the fragment (`/#gate=GOAL/GATE`, `/#goal=GOAL` for a blocked
goal): a browser never sends a fragment to a server, the link carries no credential, and
opening it only shows the card (GET never decides; the page's signed POST does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from loopx_chat.goals.gate_store import HOST_GATE_PREFIX
from loopx_chat.notify.desktop import DesktopSender, Outcome
from loopx_chat.notify.dispatcher import Notifier, Sender
from loopx_chat.notify.log import NoticeLog, NoticeRecord
from loopx_chat.notify.notice import Notice
from loopx_chat.notify.ntfy import NtfySender
from loopx_chat.notify.pushover import PushoverSender
from loopx_chat.notify.slack import SlackSender
from loopx_chat.notify.telegram import TelegramSender
from loopx_chat.notify.webhook import WebhookSender
from loopx_chat.notify.webhook_secret import webhook_secret
from loopx_chat.service.page import GoalActions, actor_of
from loopx_chat.state.control_events import ControlLog
from loopx_chat.state.session_store import utc_now

POLL_SEC = 0.5
# The latest run's words when the blocker is a gate the owner rejected (goal_facts).
REJECTED_GATE = "blocked: gate "


def gate_link(page_url: str, goal_id: str, gate_id: str | None = None) -> str:
    """The page with this gate's (or goal's) card named in the fragment."""
    base = page_url.split("#", 1)[0]
    if gate_id is None:
        return f"{base}#goal={quote(goal_id, safe='')}"
    return f"{base}#gate={quote(goal_id, safe='')}/{quote(gate_id, safe='')}"


def wanted_notices(
    status: Mapping[str, Any], actions: Mapping[str, GoalActions], page_url: str
) -> list[Notice]:
    """Pure: the notices the status asks for now (the notifier drops those already sent)."""
    out: list[Notice] = []
    for row in status.get("attention_queue", []):
        goal_id = str(row.get("goal_id", ""))
        if row.get("status") == "problem" or not goal_id:
            continue
        acts = actions.get(goal_id, GoalActions())
        actor = actor_of(row, acts)
        if actor == "owner":
            for gate in acts.gates:
                if gate.blocking and gate.status == "pending":
                    kind = (
                        "host_gate" if gate.gate_id.startswith(HOST_GATE_PREFIX) else "owner_gate"
                    )
                    key = f"{goal_id}:{gate.gate_id}"
                    link = gate_link(page_url, goal_id, gate.gate_id)
                    out.append(Notice(key, goal_id, kind, link, blocker_ref=gate.gate_id))
        elif actor == "blocked":
            latest = str((row.get("answers") or {}).get("latest_run", ""))
            if latest.startswith(REJECTED_GATE):
                continue  # the owner rejected that gate themselves: nothing to tell them
            ref = acts.blockers[-1] if acts.blockers else latest[:80]
            key = f"{goal_id}:blocked:{ref}"
            link = gate_link(page_url, goal_id)
            out.append(Notice(key, goal_id, "blocked", link, blocker_ref=ref))
    return out


# Each `--push` channel, made from the service's environment (its secrets) and the chat.
PUSH_MAKERS: dict[str, Callable[[Mapping[str, str], str | None], Sender]] = {
    "pushover": lambda environ, _chat: PushoverSender(environ),
    "telegram": TelegramSender,
    "slack": lambda environ, _chat: SlackSender(environ),
}


def push_senders(
    channels: Sequence[str], environ: Mapping[str, str], telegram_chat: str | None = None
) -> list[Sender]:
    """The `--push` channels, each once; `usage_error` naming what one of them lacks."""
    return [PUSH_MAKERS[name](environ, telegram_chat) for name in dict.fromkeys(channels)]


def senders_for(
    mode: str,
    url: str | None,
    state_dir: Path,
    environ: Mapping[str, str],
    ntfy_url: str | None = None,
    push: Sequence[str] = (),
    telegram_chat: str | None = None,
) -> list[Sender]:
    """The channels the owner chose: `--notify` (desktop, the webhook) and, beside them,
    push to the phone through ntfy (`--ntfy-url`) and `--push` (Pushover, Telegram, Slack)."""
    senders: list[Sender] = []
    if mode in ("desktop", "both"):
        senders.append(DesktopSender(environ))
    if mode in ("webhook", "both") and url:
        senders.append(WebhookSender(url, webhook_secret(state_dir)))
    if ntfy_url:
        senders.append(NtfySender(ntfy_url, environ))
    senders.extend(push_senders(push, environ, telegram_chat))
    return senders


def note_words(record: NoticeRecord) -> str:
    return f"The {record.channel} notice failed ({record.code}) at {record.at}."


class NoticeWatcher:
    """Watches the service's status and tells the owner; `notes()` feeds the cards."""

    def __init__(
        self,
        *,
        status: Callable[[], tuple[dict[str, Any], bytes]],
        actions: Callable[[Mapping[str, Any]], Mapping[str, GoalActions]],
        senders: list[Sender],
        state_dir: Path,
        page_url: str,
        notifier_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._status = status
        self._actions = actions
        self.page_url = page_url
        self.log = NoticeLog(state_dir)
        self.control = ControlLog(state_dir)
        records = self.log.records()
        self._failures = {
            (r.goal_id, r.channel): r for rs in NoticeLog.failures(records).values() for r in rs
        }
        self._lock = threading.Lock()
        self.notifier = Notifier(
            senders,
            page_url=page_url,
            on_outcome=self._record,
            seen={r.key for r in records},
            **dict(notifier_options or {}),
        )
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="notify-watch", daemon=True)

    def start(self) -> NoticeWatcher:
        if self.notifier.has_channels:  # `--notify none`: nothing to watch for
            self._thread.start()
        return self

    def _record(self, notice: Notice, outcome: Outcome) -> None:
        at = utc_now()
        if notice.goal_id and outcome.code != "held":
            with self._lock:
                if outcome.ok:
                    self._failures.pop((notice.goal_id, outcome.channel), None)
                elif outcome.code != "unavailable":
                    self._failures[(notice.goal_id, outcome.channel)] = NoticeRecord(
                        notice.key,
                        notice.goal_id,
                        notice.kind,
                        outcome.channel,
                        False,
                        outcome.code,
                        at,
                    )
        if outcome.code != "unavailable":  # no notifier on this system: nothing happened
            self.log.record(notice, outcome, at)
        if outcome.ok and notice.blocker_ref:
            self.control.record(
                "blocker_notified",
                goal_id=notice.goal_id,
                blocker_ref=notice.blocker_ref,
                channel=outcome.channel,
            )

    def notes(self) -> dict[str, tuple[str, ...]]:
        with self._lock:
            out: dict[str, list[str]] = {}
            for (goal_id, _), record in sorted(self._failures.items()):
                out.setdefault(goal_id, []).append(note_words(record))
        return {k: tuple(v) for k, v in out.items()}

    def _watch(self) -> None:
        last: bytes | None = None
        while not self._stop.is_set():
            # Cleared before the look, so a wake that comes during it is kept for the next.
            self._wake.clear()
            try:
                status, raw = self._status()
                if raw != last:
                    last = raw
                    for notice in wanted_notices(status, self._actions(status), self.page_url):
                        self.notifier.submit(notice)
            except Exception:
                pass
            self._wake.wait(POLL_SEC)

    def wake(self) -> None:
        """Look now (codex just asked something in this process), not at the next poll."""
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(2)
        self.notifier.close()

"""The notice log: what was sent to the owner, through which channel, and how it went.

Owns `notify/notices.jsonl` in the state dir (append-only, 0600): one compact record per
notice and channel (key, goal id, gate kind, channel, ok, a code, the time). It is the
dedup memory across restarts (a key in it is never notified again), the source of the
card's note when a notice failed, and of the sixth metric's "notified" time. It never holds
notice text beyond the kind, and never a URL or a secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopx_chat.notify.desktop import Outcome
from loopx_chat.notify.notice import Notice
from loopx_chat.state.jsonl import append_record, read_records

LOG_SCHEMA = "loopx_chat_notice_v1"


@dataclass(frozen=True)
class NoticeRecord:
    key: str
    goal_id: str
    kind: str
    channel: str
    ok: bool
    code: str
    at: str

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> NoticeRecord:
        return cls(
            key=str(doc.get("key", "")),
            goal_id=str(doc.get("goal_id", "")),
            kind=str(doc.get("kind", "")),
            channel=str(doc.get("channel", "")),
            ok=bool(doc.get("ok")),
            code=str(doc.get("code", "")),
            at=str(doc.get("at", "")),
        )


class NoticeLog:
    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir
        self.path = state_dir / "notify" / "notices.jsonl"

    def record(self, notice: Notice, outcome: Outcome, at: str) -> None:
        append_record(
            self.path,
            {
                "schema_version": LOG_SCHEMA,
                "key": notice.key,
                "goal_id": notice.goal_id,
                "kind": notice.kind,
                "channel": outcome.channel,
                "ok": outcome.ok,
                "code": outcome.code,
                "at": at,
            },
            durable=False,
            within=self.root,
        )

    def records(self) -> list[NoticeRecord]:
        return [NoticeRecord.from_dict(d) for d in read_records(self.path, LOG_SCHEMA)]

    @staticmethod
    def failures(records: list[NoticeRecord]) -> dict[str, list[NoticeRecord]]:
        """Per goal, the channels whose latest notice failed (a later success clears it)."""
        latest: dict[tuple[str, str], NoticeRecord] = {}
        for r in records:
            if r.goal_id and r.code != "held":
                latest[(r.goal_id, r.channel)] = r
        out: dict[str, list[NoticeRecord]] = {}
        for (goal_id, _), r in sorted(latest.items()):
            if not r.ok and r.code != "unavailable":
                out.setdefault(goal_id, []).append(r)
        return out

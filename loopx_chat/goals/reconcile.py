"""Why the host and the goal state disagree: staleness and the spec's reconcile reasons. Pure.

The host's rollouts are the raw fact source; our compact turn records are what the goal's
projection was built from, so the host position they account for is the number of host turns
they record per thread. When the host has started more turns than that, the projection is
stale. When host and goal disagree, the reason comes from the spec's closed set:

- `human_decision_pending`: the host's last turn completed, the goal waits on an open gate;
- `missing_gate`: the host's last turn completed, the goal shows a blocker, and no open gate
  exists through which a person could clear it;
- `failed_outcome`: the host's last turn failed, was interrupted or never finished, and the
  goal shows no blocker;
- `missing_validation`: the host completed turns our records never saw, so no validation of
  them was recorded;
- `stale_artifact`: the projection is behind the host and nothing more specific applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from loopx_chat.state.session_records import epoch_seconds

if TYPE_CHECKING:
    from loopx_chat.codex.rollouts import ThreadFacts

# The spec's closed set, as the type `reconcile_reason` returns (a type checker holds it).
ReconcileReason = Literal[
    "missing_gate",
    "missing_validation",
    "failed_outcome",
    "stale_artifact",
    "human_decision_pending",
]


@dataclass(frozen=True)
class Staleness:
    stale: bool
    behind_turns: int
    behind_seconds: float | None
    host_last_outcome: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stale": self.stale,
            "behind_turns": self.behind_turns,
            "behind_seconds": self.behind_seconds,
            "host_last_outcome": self.host_last_outcome,
        }


def staleness(
    thread_ids: Sequence[str],
    recorded_turns: Mapping[str, int],
    last_recorded_at: str | None,
    host: Mapping[str, ThreadFacts],
) -> Staleness:
    """Compare what our records cover per thread with what the host has now."""
    behind = 0
    latest_host: ThreadFacts | None = None
    for thread_id in thread_ids:
        facts = host.get(thread_id)
        if facts is None:
            continue
        behind += max(0, facts.turns.started - recorded_turns.get(thread_id, 0))
        if latest_host is None or (facts.latest_event_at or "") > (
            latest_host.latest_event_at or ""
        ):
            latest_host = facts
    seconds = None
    if behind and latest_host is not None:
        host_t = epoch_seconds(latest_host.latest_event_at)
        ours_t = epoch_seconds(last_recorded_at)
        if host_t is not None:
            seconds = round(max(0.0, host_t - ours_t), 3) if ours_t is not None else None
    outcome = latest_host.last_turn.outcome if latest_host and latest_host.last_turn else None
    return Staleness(behind > 0, behind, seconds, outcome)


def reconcile_reason(stale: Staleness, first_screen: Mapping[str, Any]) -> ReconcileReason | None:
    outcome = stale.host_last_outcome
    if outcome == "completed":
        if first_screen.get("user_action_required"):
            return "human_decision_pending"
        if first_screen.get("latest_blocker"):
            return "missing_gate"
        if stale.stale:
            return "missing_validation"
    elif outcome in ("failed", "interrupted", "unfinished") and not first_screen.get(
        "latest_blocker"
    ):
        return "failed_outcome"
    return "stale_artifact" if stale.stale else None

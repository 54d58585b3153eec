"""The spec's six goal-control metrics, from the control-event log. Pure: events in, dict out.

Each metric reports its numerator and denominator, not only a ratio, so a reader can tell
"1 of 1" from "90 of 100". Definitions (events are those of `control_events.EVENT_FIELDS`):

- interrupted_task_recovery: interrupted turns that a later completed turn on the same thread
  followed / interrupted turns;
- duplicate_compute_avoided: idempotent submit replays + thread_busy refusals (each kept a
  second turn or a second writer from running) / those + turns that ran;
- owner_gates_preserved: gates open at a controller start that afterwards are still open, or
  were closed only by an explicit decision / gates open at controller starts;
- cross_session_handoff_success: handoffs followed by a completed turn in a session created
  after the handoff / handoffs;
- stale_projection_detection: stale detections, with mean lag in turns and seconds;
- time_to_owner_sees_blocker: blockers (failed or timed-out turns, blocking gates) that a
  status, page or API read displayed / blockers, with mean and max seconds in between.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from loopx_chat.state.session_records import epoch_seconds, turn_is_blocker


def _t(value: object) -> float:
    return epoch_seconds(value) or 0.0


def _ratio(numerator: int, denominator: int, **extra: Any) -> dict[str, Any]:
    return {
        "numerator": numerator,
        "denominator": denominator,
        "ratio": round(numerator / denominator, 4) if denominator else None,
        **extra,
    }


def compute_metrics(
    events: Iterable[Mapping[str, Any]],
    gate_status: Mapping[str, str],
    goal_id: str | None = None,
) -> dict[str, Any]:
    """`gate_status` maps gate id → current status (`pending|approved|rejected`)."""
    all_events = sorted(events, key=lambda e: _t(e.get("at")))
    gate_goal = {
        e["gate_id"]: e.get("goal_id") for e in all_events if e.get("kind") == "gate_requested"
    }

    def mine(e: Mapping[str, Any]) -> bool:
        if goal_id is None:
            return True
        if "goal_id" in e:
            return e["goal_id"] == goal_id
        return True  # controller_started: filtered per gate below

    evs = [e for e in all_events if mine(e)]
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for e in evs:
        by_kind.setdefault(str(e.get("kind")), []).append(e)
    turns = by_kind.get("turn_finished", [])
    completed = [t for t in turns if t.get("status") == "completed"]

    interrupted = [t for t in turns if t.get("status") == "interrupted"]
    recovered = sum(
        1
        for i in interrupted
        if any(
            c.get("thread_id") == i.get("thread_id") and _t(c.get("at")) > _t(i.get("at"))
            for c in completed
        )
    )

    replays = len(by_kind.get("submit_replayed", []))
    refusals = len(by_kind.get("thread_busy_refused", []))

    resolved_after: dict[str, list[float]] = {}
    for e in by_kind.get("gate_resolved", []):
        resolved_after.setdefault(str(e.get("gate_id")), []).append(_t(e.get("at")))
    open_at_restart = preserved = 0
    for start in by_kind.get("controller_started", []):
        for gid in start.get("open_gate_ids") or []:
            if goal_id is not None and gate_goal.get(gid) != goal_id:
                continue
            open_at_restart += 1
            status = gate_status.get(gid)
            explicit = any(t >= _t(start.get("at")) for t in resolved_after.get(gid, []))
            if status == "pending" or (status in ("approved", "rejected") and explicit):
                preserved += 1

    handoffs = by_kind.get("handoff_recorded", [])
    handoff_ok = sum(
        1
        for h in handoffs
        if any(
            c.get("goal_id") == h.get("goal_id")
            and _t(c.get("at")) > _t(h.get("at"))
            and _t(c.get("session_created_at")) > _t(h.get("at"))
            for c in completed
        )
    )

    stale = by_kind.get("stale_detected", [])
    lag_s = [float(e.get("lag_seconds") or 0) for e in stale]
    lag_t = [float(e.get("lag_turns") or 0) for e in stale]

    blockers: list[tuple[str, float]] = [
        (str(t.get("turn_id")), _t(t.get("at")))
        for t in turns
        if turn_is_blocker(t.get("status"), t.get("code"))
    ]
    blockers += [
        (str(g.get("gate_id")), _t(g.get("at")))
        for g in by_kind.get("gate_requested", [])
        if g.get("blocking", True)
    ]
    shown: dict[str, float] = {}
    for d in by_kind.get("blocker_displayed", []):
        shown.setdefault(str(d.get("blocker_ref")), _t(d.get("at")))
    delays = [shown[ref] - at for ref, at in blockers if ref in shown and shown[ref] >= at]

    return {
        "goal_id": goal_id,
        "interrupted_task_recovery": _ratio(recovered, len(interrupted)),
        "duplicate_compute_avoided": _ratio(
            replays + refusals,
            replays + refusals + len(turns),
            submit_replays=replays,
            thread_busy_refusals=refusals,
        ),
        "owner_gates_preserved": _ratio(preserved, open_at_restart),
        "cross_session_handoff_success": _ratio(handoff_ok, len(handoffs)),
        "stale_projection_detection": {
            "detections": len(stale),
            "mean_lag_seconds": round(sum(lag_s) / len(lag_s), 3) if lag_s else None,
            "mean_lag_turns": round(sum(lag_t) / len(lag_t), 3) if lag_t else None,
        },
        "time_to_owner_sees_blocker": _ratio(
            len(delays),
            len(blockers),
            mean_seconds=round(sum(delays) / len(delays), 3) if delays else None,
            max_seconds=round(max(delays), 3) if delays else None,
        ),
    }

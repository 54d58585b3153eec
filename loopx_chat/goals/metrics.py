"""The spec's six goal-control metrics, from the control-event log. Pure: events in, dict out.

Each metric reports its numerator and denominator, not only a ratio, so a reader can tell
"1 of 1" from "90 of 100". Each is defined so that it can fall (docs/metrics.md, one line per
numerator and denominator; events are those of `control_events.EVENT_FIELDS`):

- interrupted_task_recovery: interruptions nobody asked for (a failed turn, an idle or hard
  timeout, an app-server exit, a killed controller) later followed by a completed turn that
  addresses the same todo (it consumes a handoff pending at the interruption; with none
  pending, the goal's next completed turn) / those interruptions. A person's interrupt is
  reported beside it (`person_interrupts`), never in it;
- duplicate_compute_avoided: replays of a recorded client_turn_id + busy refusals of the
  same work (the running turn's client_turn_id, or its message text's digest while it runs)
  / those + turns that ran;
- owner_gates_preserved: gates open (per this log) when a new session of the goal started
  that the session's first screen showed as holding the goal / gates open at new sessions;
- cross_session_handoff_success: handoffs consumed by a completed turn of a session created
  after the handoff / handoffs (consumed = the first completed turn of the goal that started
  after the handoff, the rule `handoff list` shows);
- stale_projection_detection: stale detections, with mean lag in turns and seconds;
- time_to_owner_sees_blocker: blockers (failed or timed-out turns, blocking gates) that an
  owner's view (the page, `status` on a terminal, `?viewer=owner`) displayed / blockers,
  with mean and max seconds in between;
- time_to_notice: blockers a notice reached the owner about (a desktop notifier exited 0,
  or the webhook answered 2xx) / blockers, with mean and max seconds in between;
- time_to_decision: blocking gates (owner gates and host gates) decided / blocking gates
  requested, with mean and max seconds from request to decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class EventLog:
    """The log one computation reads: events by kind, in time order, and the facts more than
    one metric needs (the finished turns, the completed ones, each handoff's consumer)."""

    by_kind: Mapping[str, list[Mapping[str, Any]]]
    turns: list[Mapping[str, Any]]
    completed: list[Mapping[str, Any]]
    handoffs: list[Mapping[str, Any]]
    consumed_by: Mapping[str, Mapping[str, Any] | None]

    @classmethod
    def of(cls, events: Iterable[Mapping[str, Any]], goal_id: str | None) -> EventLog:
        ordered = sorted(events, key=lambda e: _t(e.get("at")))
        by_kind: dict[str, list[Mapping[str, Any]]] = {}
        for e in ordered:
            if goal_id is None or e.get("goal_id") == goal_id:
                by_kind.setdefault(str(e.get("kind")), []).append(e)
        turns = by_kind.get("turn_finished", [])
        completed = [t for t in turns if t.get("status") == "completed"]
        handoffs = by_kind.get("handoff_recorded", [])
        consumed_by = {str(h.get("handoff_id")): _consumer(h, completed) for h in handoffs}
        return cls(by_kind, turns, completed, handoffs, consumed_by)

    def kind(self, name: str) -> list[Mapping[str, Any]]:
        return self.by_kind.get(name, [])


def _consumer(
    handoff: Mapping[str, Any], completed: list[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The first completed turn of the goal that started after the handoff."""
    return next(
        (
            c
            for c in completed
            if c.get("goal_id") == handoff.get("goal_id")
            and _t(c.get("started_at") or c.get("at")) >= _t(handoff.get("at"))
        ),
        None,
    )


def interrupted_task_recovery(log: EventLog) -> dict[str, Any]:
    unasked = [t for t in log.turns if turn_is_blocker(t.get("status"), t.get("code"))]
    person = [t for t in log.turns if t.get("status") == "interrupted" and not t.get("code")]
    recovered = 0
    for i in unasked:
        when = _t(i.get("at"))
        pending = [
            log.consumed_by[str(h.get("handoff_id"))]
            for h in log.handoffs
            if h.get("goal_id") == i.get("goal_id") and _t(h.get("at")) <= when
        ]
        open_todos = [c for c in pending if c is None or _t(c.get("at")) > when]
        if open_todos:
            ok = any(c is not None for c in open_todos)
        else:
            ok = any(
                c.get("goal_id") == i.get("goal_id") and _t(c.get("at")) > when
                for c in log.completed
            )
        recovered += ok
    return _ratio(recovered, len(unasked), person_interrupts=len(person))


def duplicate_compute_avoided(log: EventLog) -> dict[str, Any]:
    replays = len(log.kind("submit_replayed"))
    busy = log.kind("thread_busy_refused")
    refusals = sum(1 for e in busy if e.get("same_work"))
    return _ratio(
        replays + refusals,
        replays + refusals + len(log.turns),
        submit_replays=replays,
        thread_busy_refusals=refusals,
        same_text_refusals=sum(1 for e in busy if e.get("same_by") == "text_digest"),
        other_work_refusals=len(busy) - refusals,
    )


def owner_gates_preserved(log: EventLog) -> dict[str, Any]:
    open_at_session = preserved = 0
    for start in log.kind("session_opened"):
        at_start = _t(start.get("at"))
        requested = {
            str(g.get("gate_id"))
            for g in log.kind("gate_requested")
            if g.get("goal_id") == start.get("goal_id")
            and g.get("blocking", True)
            and _t(g.get("at")) <= at_start
        }
        resolved = {
            str(g.get("gate_id")) for g in log.kind("gate_resolved") if _t(g.get("at")) <= at_start
        }
        shown = set(start.get("shown_gate_ids") or ())
        for gid in requested - resolved:
            open_at_session += 1
            preserved += gid in shown
    return _ratio(preserved, open_at_session)


def cross_session_handoff_success(log: EventLog) -> dict[str, Any]:
    handoff_ok = 0
    for h in log.handoffs:
        c = log.consumed_by[str(h.get("handoff_id"))]
        handoff_ok += c is not None and _t(c.get("session_created_at")) > _t(h.get("at"))
    return _ratio(handoff_ok, len(log.handoffs))


def stale_projection_detection(log: EventLog) -> dict[str, Any]:
    stale = log.kind("stale_detected")
    lag_s = [float(e.get("lag_seconds") or 0) for e in stale]
    lag_t = [float(e.get("lag_turns") or 0) for e in stale]
    return {
        "detections": len(stale),
        "mean_lag_seconds": round(sum(lag_s) / len(lag_s), 3) if lag_s else None,
        "mean_lag_turns": round(sum(lag_t) / len(lag_t), 3) if lag_t else None,
    }


def _blockers(log: EventLog) -> list[tuple[str, float]]:
    """Failed or timed-out turns and blocking gates, each with the time it blocked."""
    blockers: list[tuple[str, float]] = [
        (str(t.get("turn_id")), _t(t.get("at")))
        for t in log.turns
        if turn_is_blocker(t.get("status"), t.get("code"))
    ]
    blockers += [
        (str(g.get("gate_id")), _t(g.get("at")))
        for g in log.kind("gate_requested")
        if g.get("blocking", True)
    ]
    return blockers


def _first_at(events: Iterable[Mapping[str, Any]], key: str) -> dict[str, float]:
    first: dict[str, float] = {}
    for e in events:
        first.setdefault(str(e.get(key)), _t(e.get("at")))
    return first


def _delays_ratio(
    blockers: list[tuple[str, float]], reached: Mapping[str, float]
) -> dict[str, Any]:
    delays = [reached[ref] - at for ref, at in blockers if ref in reached and reached[ref] >= at]
    return _ratio(
        len(delays),
        len(blockers),
        mean_seconds=round(sum(delays) / len(delays), 3) if delays else None,
        max_seconds=round(max(delays), 3) if delays else None,
    )


def time_to_owner_sees_blocker(log: EventLog) -> dict[str, Any]:
    return _delays_ratio(_blockers(log), _first_at(log.kind("blocker_displayed"), "blocker_ref"))


def time_to_notice(log: EventLog) -> dict[str, Any]:
    """Blockers a notice reached the owner about (the first channel counts) / blockers."""
    return _delays_ratio(_blockers(log), _first_at(log.kind("blocker_notified"), "blocker_ref"))


def time_to_decision(log: EventLog) -> dict[str, Any]:
    """Blocking gates (owner and host gates) decided / blocking gates requested."""
    asked = [
        (str(g.get("gate_id")), _t(g.get("at")))
        for g in log.kind("gate_requested")
        if g.get("blocking", True)
    ]
    return _delays_ratio(asked, _first_at(log.kind("gate_resolved"), "gate_id"))


# The six metrics, in the order the spec and docs/metrics.md list them: name -> rule.
METRICS: Mapping[str, Callable[[EventLog], dict[str, Any]]] = {
    "interrupted_task_recovery": interrupted_task_recovery,
    "duplicate_compute_avoided": duplicate_compute_avoided,
    "owner_gates_preserved": owner_gates_preserved,
    "cross_session_handoff_success": cross_session_handoff_success,
    "stale_projection_detection": stale_projection_detection,
    "time_to_owner_sees_blocker": time_to_owner_sees_blocker,
    # The sixth metric split by where the clock stops: a notice sent, a decision made.
    "time_to_notice": time_to_notice,
    "time_to_decision": time_to_decision,
}


def compute_metrics(
    events: Iterable[Mapping[str, Any]], goal_id: str | None = None
) -> dict[str, Any]:
    """The six metrics over the whole log, or over one goal's events."""
    log = EventLog.of(events, goal_id)
    return {"goal_id": goal_id, **{name: rule(log) for name, rule in METRICS.items()}}

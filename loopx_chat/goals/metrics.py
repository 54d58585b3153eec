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
    events: Iterable[Mapping[str, Any]], goal_id: str | None = None
) -> dict[str, Any]:
    """The six metrics over the whole log, or over one goal's events."""
    all_events = sorted(events, key=lambda e: _t(e.get("at")))
    evs = [e for e in all_events if goal_id is None or e.get("goal_id") == goal_id]
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for e in evs:
        by_kind.setdefault(str(e.get("kind")), []).append(e)
    turns = by_kind.get("turn_finished", [])
    completed = [t for t in turns if t.get("status") == "completed"]

    def consumer(handoff: Mapping[str, Any]) -> Mapping[str, Any] | None:
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

    handoffs = by_kind.get("handoff_recorded", [])
    consumed_by = {str(h.get("handoff_id")): consumer(h) for h in handoffs}

    unasked = [t for t in turns if turn_is_blocker(t.get("status"), t.get("code"))]
    person = [t for t in turns if t.get("status") == "interrupted" and not t.get("code")]
    recovered = 0
    for i in unasked:
        when = _t(i.get("at"))
        pending = [
            consumed_by[str(h.get("handoff_id"))]
            for h in handoffs
            if h.get("goal_id") == i.get("goal_id") and _t(h.get("at")) <= when
        ]
        open_todos = [c for c in pending if c is None or _t(c.get("at")) > when]
        if open_todos:
            ok = any(c is not None for c in open_todos)
        else:
            ok = any(
                c.get("goal_id") == i.get("goal_id") and _t(c.get("at")) > when for c in completed
            )
        recovered += ok

    replays = len(by_kind.get("submit_replayed", []))
    refusals = sum(1 for e in by_kind.get("thread_busy_refused", []) if e.get("same_work"))
    same_text = sum(
        1 for e in by_kind.get("thread_busy_refused", []) if e.get("same_by") == "text_digest"
    )
    other_refusals = len(by_kind.get("thread_busy_refused", [])) - refusals

    open_at_session = preserved = 0
    for start in by_kind.get("session_opened", []):
        at_start = _t(start.get("at"))
        requested = {
            str(g.get("gate_id"))
            for g in by_kind.get("gate_requested", [])
            if g.get("goal_id") == start.get("goal_id")
            and g.get("blocking", True)
            and _t(g.get("at")) <= at_start
        }
        resolved = {
            str(g.get("gate_id"))
            for g in by_kind.get("gate_resolved", [])
            if _t(g.get("at")) <= at_start
        }
        shown = set(start.get("shown_gate_ids") or ())
        for gid in requested - resolved:
            open_at_session += 1
            preserved += gid in shown

    handoff_ok = 0
    for h in handoffs:
        c = consumed_by[str(h.get("handoff_id"))]
        handoff_ok += c is not None and _t(c.get("session_created_at")) > _t(h.get("at"))

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
    notified: dict[str, float] = {}
    for n in by_kind.get("blocker_notified", []):
        notified.setdefault(str(n.get("blocker_ref")), _t(n.get("at")))
    notice_delays = [
        notified[ref] - at for ref, at in blockers if ref in notified and notified[ref] >= at
    ]
    gates_asked = {
        str(g.get("gate_id")): _t(g.get("at"))
        for g in by_kind.get("gate_requested", [])
        if g.get("blocking", True)
    }
    decided: dict[str, float] = {}
    for r in by_kind.get("gate_resolved", []):
        decided.setdefault(str(r.get("gate_id")), _t(r.get("at")))
    decision_delays = [
        decided[g] - at for g, at in gates_asked.items() if g in decided and decided[g] >= at
    ]

    return {
        "goal_id": goal_id,
        "interrupted_task_recovery": _ratio(recovered, len(unasked), person_interrupts=len(person)),
        "duplicate_compute_avoided": _ratio(
            replays + refusals,
            replays + refusals + len(turns),
            submit_replays=replays,
            thread_busy_refusals=refusals,
            same_text_refusals=same_text,
            other_work_refusals=other_refusals,
        ),
        "owner_gates_preserved": _ratio(preserved, open_at_session),
        "cross_session_handoff_success": _ratio(handoff_ok, len(handoffs)),
        "stale_projection_detection": {
            "detections": len(stale),
            "mean_lag_seconds": round(sum(lag_s) / len(lag_s), 3) if lag_s else None,
            "mean_lag_turns": round(sum(lag_t) / len(lag_t), 3) if lag_t else None,
        },
        "time_to_owner_sees_blocker": _ratio(len(delays), len(blockers), **_spread(delays)),
        "time_to_notice": _ratio(len(notice_delays), len(blockers), **_spread(notice_delays)),
        "time_to_decision": _ratio(
            len(decision_delays), len(gates_asked), **_spread(decision_delays)
        ),
    }


def _spread(delays: list[float]) -> dict[str, float | None]:
    return {
        "mean_seconds": round(sum(delays) / len(delays), 3) if delays else None,
        "max_seconds": round(max(delays), 3) if delays else None,
    }

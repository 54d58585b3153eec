"""The sixth metric, measured for real: time to notice and time to decision, each with its
numerator and denominator, both able to fall."""

from __future__ import annotations

from loopx_chat.goals.metrics import compute_metrics


def _ev(kind: str, second: int, **fields: object) -> dict[str, object]:
    return {"kind": kind, "at": f"2026-01-01T00:00:{second:02d}Z", "goal_id": "g", **fields}


def test_time_to_notice_and_to_decision_count_what_reached_the_owner() -> None:
    events = [
        _ev("gate_requested", 0, gate_id="host-a", blocking=True),
        _ev("gate_requested", 1, gate_id="gate-b", blocking=True),
        _ev("gate_requested", 2, gate_id="gate-advisory", blocking=False),
        _ev("blocker_notified", 3, blocker_ref="host-a", channel="desktop"),
        _ev("blocker_notified", 4, blocker_ref="host-a", channel="webhook"),  # first one counts
        _ev("blocker_displayed", 6, blocker_ref="host-a", surface="page"),
        _ev("gate_resolved", 10, gate_id="host-a", decision="approve", actor="owner-page"),
    ]
    doc = compute_metrics(events, "g")
    notice = doc["time_to_notice"]
    assert (notice["numerator"], notice["denominator"]) == (1, 2)
    assert notice["mean_seconds"] == 3.0 and notice["ratio"] == 0.5
    decision = doc["time_to_decision"]
    assert (decision["numerator"], decision["denominator"]) == (1, 2)
    assert decision["max_seconds"] == 10.0
    seen = doc["time_to_owner_sees_blocker"]
    assert (seen["numerator"], seen["denominator"]) == (1, 2) and seen["mean_seconds"] == 6.0


def test_nothing_asked_is_no_ratio() -> None:
    doc = compute_metrics([], None)
    assert doc["time_to_notice"] == {
        "numerator": 0,
        "denominator": 0,
        "ratio": None,
        "mean_seconds": None,
        "max_seconds": None,
    }

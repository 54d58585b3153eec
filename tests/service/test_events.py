"""The per-session event fan-out: what it keeps per session is bounded."""

from __future__ import annotations

from loopx_chat.service.events import LAST_STATUS_KEPT, EventHub


def test_the_event_hub_keeps_nothing_per_session_forever() -> None:
    hub = EventHub()
    for n in range(LAST_STATUS_KEPT * 3):
        sid = f"s{n}"
        q = hub.subscribe(sid)
        hub.publish(sid, {"type": "status", "status": "busy"})
        hub.end(sid)
        hub.unsubscribe(sid, q)
    assert not hub._listeners
    assert len(hub._last_status) == LAST_STATUS_KEPT
    assert hub.last_status(f"s{LAST_STATUS_KEPT * 3 - 1}") == {"type": "status", "status": "busy"}

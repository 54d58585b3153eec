"""A long-running service keeps nothing per session forever (issue 37).

Sessions are opened, given a turn and left, through the service's own handler, on the pinned
codex against the loopback mock, with a cap of two loaded threads (so each new session lets
an older one go, as `serve --max-warm` does). Afterwards what the service holds per session
or per thread is bounded by the cap and the idle sessions' lock table, not by how many
sessions it has seen; the rows that grow with the sessions are one per session (or rollout
file) on disk.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from loopx_chat.codex.thread import ThreadOptions
from loopx_chat.controller.chat_controller import ControllerConfig
from loopx_chat.goals.gate_store import GateStore
from loopx_chat.service.app import ServiceApp
from loopx_chat.state.session_store import IDLE_LOCKS
from tests.helpers.real_codex import make_controller
from tests.helpers.row_size import own_bytes
from tests.helpers.waiting import wait_for

MAX_WARM = 2
CYCLES = IDLE_LOCKS + 8  # more sessions than any table may keep
# The most one (key, row) pair of the status index's sessions and of the rollout scanner may
# hold on its own (`tests/helpers/row_size.own_bytes`), measured 385 (535 before the row was
# flat) and 1,083 (1,235 while a finished rollout kept its accumulator) (issue 37).
SESSION_ROW_BYTES = 420
ROLLOUT_ROW_BYTES = 1150


def test_open_turn_close_cycles_leave_no_table_growing_with_sessions(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> None:
    state = tmp_path / "state"
    # A policy that lets codex ask: each turn's thread is bound to the host-request desk.
    config = ControllerConfig(max_warm=MAX_WARM, options=ThreadOptions(approval_policy="untrusted"))
    controller = make_controller(state, bound_home, base_env, codex_bin, config)
    secret = secrets.token_urlsafe(32)
    app = ServiceApp(controller, GateStore(state), port=1, work_dir=tmp_path, secret=secret)
    headers = {"host": "127.0.0.1:1", "authorization": f"Bearer {secret}"}

    def call(method: str, path: str, body: Any = None) -> Any:
        raw = b"" if body is None else json.dumps(body).encode()
        reply = app.handle(method, path, {**headers, "content-type": "application/json"}, raw)
        return json.loads(reply.body)

    def turn_over(sid: str) -> bool:
        return not call("GET", f"/api/chat/sessions/{sid}")["session"]["active_turn_id"]

    try:
        seen: list[str] = []
        for _ in range(CYCLES):
            opened = call(
                "POST",
                "/api/chat/sessions",
                {"goal_id": "long", "work_dir": str(tmp_path), "create_goal": True},
            )
            sid = opened["session"]["session_id"]
            seen.append(sid)
            assert call("POST", f"/api/chat/sessions/{sid}/turns", {"text": "hi"})["ok"]
            wait_for(lambda sid=sid: turn_over(sid))
            call("GET", "/status.json")
        for sid in seen:
            turns = call("GET", f"/api/chat/sessions/{sid}")["turns"]
            assert [t["status"] for t in turns] == ["completed"], sid
        desk = controller.host_requests
        warm = controller._warm
        sizes = {
            "loaded threads": len(warm.pids()),
            "desk bindings": len(desk._bindings),
            "asking threads": len(controller._asking),
            "warm session locks": len(warm._locks),
            "store session locks": len(controller.store._locks),
        }
        assert sizes["loaded threads"] <= MAX_WARM, sizes
        assert sizes["desk bindings"] <= MAX_WARM, sizes
        assert sizes["asking threads"] <= MAX_WARM, sizes
        assert sizes["warm session locks"] <= IDLE_LOCKS + MAX_WARM, sizes
        assert sizes["store session locks"] <= IDLE_LOCKS + MAX_WARM, sizes
        # What does grow with the sessions is data on disk, one compact row each: the status
        # index's row per session (its stat, goal and creation time) and the rollout
        # scanner's row per rollout file; never a row per request or per turn.
        assert set(app._status_cache.index._sessions) == set(seen)
        rollouts = list(bound_home.rglob("rollout-*.jsonl"))
        assert app._scanner._cached is not None
        # (It looks at most every 2 s, so it may not have seen the newest ones yet.)
        assert 0 < len(app._scanner._cached[1]) <= len(rollouts)
        # Each of those rows is compact (issue 37): a few hundred bytes a session, about a
        # kilobyte a rollout, not counting what rows share (the goal's name, kinds, models).
        # Before, 588 and 2,208 bytes; then 535 and 1,235.
        sessions = list(app._status_cache.index._sessions.items())
        files = list(app._scanner._cached[1].items())
        session_rows = [
            own_bytes(row, sessions[:i] + sessions[i + 1 :]) for i, row in enumerate(sessions)
        ]
        file_rows = [own_bytes(row, files[:i] + files[i + 1 :]) for i, row in enumerate(files)]
        print(f"row bytes: session {max(session_rows)}, rollout {max(file_rows)}")
        assert max(session_rows) <= SESSION_ROW_BYTES, session_rows
        assert max(file_rows) <= ROLLOUT_ROW_BYTES, file_rows
        # The first session was forgotten everywhere, and still takes a turn as before.
        first = seen[0]
        assert first not in warm.pids()
        assert call("POST", f"/api/chat/sessions/{first}/turns", {"text": "again"})["ok"]
        wait_for(lambda: turn_over(first))
        turns = call("GET", f"/api/chat/sessions/{first}")["turns"]
        assert [t["status"] for t in turns] == ["completed", "completed"]
        thread_id = controller.store.load(first).upstream_thread_id
        assert thread_id in controller._asking
        assert desk._bindings[thread_id].session_id == first
    finally:
        controller.close()

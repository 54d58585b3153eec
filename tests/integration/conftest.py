"""Fixtures of the integration suites, and the `codex` marker on those that need the real codex.

The suites here drive real processes end to end: the pinned codex against the loopback mock,
the real shells, Chromium. Every test here that uses `codex_bin` (directly or through a fixture
such as `service`) is marked `codex`, so `-m "not codex"` deselects it; the fixture itself fails
under CI when the binary is missing (tests/conftest.py), so CI never counts it as a skip.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopx_chat.goals.gate_store import GateStore
from loopx_chat.service.app import ServiceApp
from loopx_chat.service.server import LoopbackServer
from tests.helpers.markers import in_integration, mark_real_codex
from tests.helpers.real_codex import make_controller
from tests.helpers.service import Service


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_real_codex(item for item in items if in_integration(item))


@pytest.fixture
def service(
    tmp_path: Path, codex_bin: str, bound_home: Path, base_env: dict[str, str]
) -> Iterator[Service]:
    state = tmp_path / "state"
    controller = make_controller(state, bound_home, base_env, codex_bin)
    goals = GateStore(state)
    secret = secrets.token_urlsafe(32)
    server = LoopbackServer(
        "127.0.0.1",
        0,
        lambda port: ServiceApp(controller, goals, port=port, work_dir=tmp_path, secret=secret),
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    svc = Service(server.port, controller, state, bound_home, [], secret, app=server.app)
    try:
        yield svc
    finally:
        server.shutdown()
        controller.close()
        server.server_close()
        thread.join(timeout=10)

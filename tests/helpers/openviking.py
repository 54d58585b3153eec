"""The OpenViking adapter's reference fixture and smoke (examples/), and the smallest inputs
its builder accepts, shared by the adapter, contract and builder-rule tests."""

from __future__ import annotations

import json
from typing import Any

from loopx_chat.session_runtime import build_openviking_session_memory_adapter
from tests.helpers.paths import ROOT

FIXTURE = ROOT / "examples" / "fixtures" / "openviking-session-memory-adapter.public.json"
SMOKE = ROOT / "examples" / "openviking-session-memory-adapter-smoke.py"

Doc = dict[str, Any]


def fixture_adapter() -> Doc:
    """The adapter document of the reference fixture's first attention item."""
    payload = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return payload["attention_queue"]["items"][0]["openviking_session_memory_adapter"]


def minimal_inputs(**overrides: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "goal_id": "goal-r",
        "issue": {"repo": "o/r", "issue_number": 7},
        "sessions": [],
        "memory": {"namespace": "ns"},
        "status": {},
        "evidence": {},
    }
    inputs.update(overrides)
    return inputs


def build(**overrides: Any) -> Doc:
    return build_openviking_session_memory_adapter(**minimal_inputs(**overrides))

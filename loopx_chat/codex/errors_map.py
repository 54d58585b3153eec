"""Map upstream app-server failures to loopx-chat error codes.

Every upstream error arrives as -32600, so classification is by message text. Upstream text
is used only to pick a code: it is never copied into our messages, logs or state, because it
can quote config values or paths from the user's home.
"""

from __future__ import annotations

from loopx_chat.errors import CodexError, Gate

HOST_GATE = Gate(
    summary="The Codex app-server refused a request from loopx-chat.",
    next_action="Check the Codex app-server host capability, then retry the session.",
)
CONFIG_GATE = Gate(
    summary="Codex could not load its configuration for this home.",
    next_action="Fix config.toml in the bound Codex home (run `codex` there to see the error), "
    "then retry.",
)
BUSY_GATE = Gate(
    summary="Another client is driving this Codex thread right now.",
    next_action="Wait for the other client to finish or close it; two clients never drive one "
    "thread at once.",
)
RESUME_GATE = Gate(
    summary="Codex has no conversation with this thread id in the bound home.",
    next_action="Start loopx-chat with the Codex home this session was created in, or open a "
    "new session.",
)
CATALOG_GATE = Gate(
    summary="Codex app-server could not load a compatible model catalog for loopx-chat.",
    next_action="Update the Codex CLI model catalog or remove its legacy override, then retry "
    "the session.",
)

CATALOG_MARKERS = ("model_catalog_json", "missing field", "base_instructions")


def is_legacy_catalog_error(message: str) -> bool:
    lowered = message.lower()
    return all(marker in lowered for marker in CATALOG_MARKERS)


def classify_rpc_error(method: str, message: str) -> CodexError:
    lowered = message.lower()
    if "no rollout found" in lowered or "invalid session id" in lowered:
        return CodexError(
            f"Codex could not restore the thread ({method})",
            error_code="resume_failed",
            gate=RESUME_GATE,
        )
    if "already has an active writer" in lowered or (
        method == "turn/start" and "thread not found" in lowered
    ):
        return CodexError(
            "This Codex thread already has an active writer",
            error_code="thread_busy",
            gate=BUSY_GATE,
        )
    if lowered.startswith("failed to load configuration:"):
        return CodexError(
            f"Codex rejected its configuration on {method}",
            error_code="codex_config_invalid",
            gate=CONFIG_GATE,
        )
    return CodexError(
        f"Codex app-server rejected {method}.", error_code="app_server_rejected", gate=HOST_GATE
    )

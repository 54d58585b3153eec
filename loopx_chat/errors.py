"""The one error hierarchy of loopx-chat.

Every expected failure is a `LoopxChatError` carrying a stable snake_case `error_code`, a
message a person can act on, and, where the user must do something, a `Gate` with a summary
and the next action. The CLI and HTTP layers render these; nothing else decides exit codes.

Messages must never carry transcript text, credentials or raw tool output: callers pass
ids, codes and paths the user already owns, never upstream payloads.

    LoopxChatError
    ├── StateError       owner-local state: ids, corrupt files, schema, binding rules
    ├── CodexError       the codex binary and its app-server processes
    └── UsageError       a request that is well-formed but not allowed (bad host, bad id)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Gate:
    """What the user must do before the refused action can succeed."""

    summary: str
    next_action: str

    def to_dict(self) -> dict[str, str]:
        return {"summary": self.summary, "next_action": self.next_action}


class LoopxChatError(Exception):
    """Base of every expected failure; `error_code` is the stable contract."""

    default_code = "loopx_chat_error"

    def __init__(self, message: str, *, error_code: str | None = None, gate: Gate | None = None):
        super().__init__(message)
        self.message = message
        self.error_code = error_code or self.default_code
        self.gate = gate

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": False,
            "error_code": self.error_code,
            "error": self.message,
            "gate": self.gate.to_dict() if self.gate else None,
        }


class StateError(LoopxChatError):
    default_code = "state_error"


class CodexError(LoopxChatError):
    default_code = "host_gate"


class UsageError(LoopxChatError):
    default_code = "usage_error"


# Every code the package raises, so docs and tests can check there is no drift.
ERROR_CODES: frozenset[str] = frozenset(
    {
        # state
        "invalid_session_id",
        "session_not_found",
        "session_exists",
        "state_corrupt",
        "state_schema_unsupported",
        "state_unwritable",
        "state_unreadable",
        "state_unsafe",
        "codex_home_invalid",
        "codex_home_rebind_refused",
        "unsupported_session_fields",
        # codex host
        "host_tool_unavailable",
        "app_server_start_failed",
        "app_server_exited",
        "app_server_rejected",
        "app_server_protocol",
        "codex_home_mismatch",
        "codex_home_host_mismatch",
        "codex_config_invalid",
        "catalog_incompatible",
        "resume_failed",
        "thread_busy",
        # the service
        "unauthorized",
        "busy",
        "too_many_streams",
        "too_many_connections",
        "service_not_running",
        "browser_unavailable",
        "turn_not_active",
        "idle_timeout",
        "hard_timeout",
        "startup_timeout",
        "request_timeout",
        "agent_unsupported",
        "codex_home_missing",
        "work_dir_missing",
        "host_unreadable",
        "home_exclusive_hold",
        "home_in_use",
        "controller_stopped",
        "turn_failed",
        # output
        "output_unwritable",
        # goals
        "invalid_goal_id",
        "unsafe_text",
        "gate_not_found",
        "goal_not_found",
        "gate_already_resolved",
        "input_invalid",
        "raw_material_refused",
        "goal_state_missing",
        "proposal_not_found",
        "proposal_already_closed",
        "writeback_refused",
        "writeback_no_source",
        "writeback_not_applied",
        "writeback_conflict",
        "session_goal_mismatch",
        "turn_not_found",
        "acceptance_required",
        # launchagent
        "platform_unsupported",
        "plist_malformed",
        "plist_unsafe",
        "plist_unreadable",
        "plist_unwritable",
        "legacy_binding_ambiguous",
        "codex_home_not_absolute",
        "launchctl_unavailable",
        "launchctl_failed",
        "bootstrap_failed",
        "not_installed",
        # service (HTTP)
        "forbidden_host",
        "forbidden_request",
        "body_too_large",
        "not_found",
        "method_not_allowed",
        "bad_json",
        "bad_request",
        "internal_error",
        "turn_not_accepted",
        "listen_failed",
        "non_loopback_host",
        # the CLI through the running service
        "service_lost",
        # usage
        "usage_error",
    }
)

"""The one error hierarchy of loopx-chat.

Every expected failure is a `LoopxChatError` carrying a stable snake_case `error_code`, a
message a person can act on, and, where the user must do something, a `Remedy` with a summary
and the next action. The CLI and HTTP layers render these. `ERRORS` is the one table of
codes: each code's exit code and its `Outcome` kind (the service alone turns a kind into an
HTTP status; nothing here knows HTTP).

Messages must never carry transcript text, credentials or raw tool output: callers pass
ids, codes and paths the user already owns, never upstream payloads.

    LoopxChatError
    ├── StateError       owner-local state: ids, corrupt files, schema, binding rules
    ├── CodexError       the codex binary and its app-server processes
    └── UsageError       a request that is well-formed but not allowed (bad host, bad id)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Remedy:
    """What the user must do before the refused action can succeed.

    Not an owner gate (`goals.gate_store.Gate`): a remedy is advice attached to an error. The
    JSON documents still carry it under the key `gate` (`to_dict` below, the service's error
    bodies); that key is a contract and changes only with a schema bump.
    """

    summary: str
    next_action: str

    def to_dict(self) -> dict[str, str]:
        return {"summary": self.summary, "next_action": self.next_action}


class LoopxChatError(Exception):
    """Base of every expected failure; `error_code` is the stable contract."""

    default_code = "loopx_chat_error"

    def __init__(
        self, message: str, *, error_code: str | None = None, remedy: Remedy | None = None
    ):
        super().__init__(message)
        self.message = message
        self.error_code = error_code or self.default_code
        self.remedy = remedy

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": False,
            "error_code": self.error_code,
            "error": self.message,
            # The key is still `gate` (see `Remedy`).
            "gate": self.remedy.to_dict() if self.remedy else None,
        }


class StateError(LoopxChatError):
    default_code = "state_error"


class CodexError(LoopxChatError):
    # Every raise names its own code; this fallback is never emitted (no document, test or
    # spec names it). It was `host_gate`, which read like an owner gate.
    default_code = "codex_error"


class UsageError(LoopxChatError):
    default_code = "usage_error"


class Outcome(StrEnum):
    """What kind of refusal a code is, for a caller that answers in its own terms: the
    service maps each kind onto one HTTP status (`service/app.py`), and only the service
    knows HTTP. The kinds are today's statuses, one kind per status."""

    INVALID = "invalid"  # the request itself is wrong: fix it and send it again
    UNAUTHORIZED = "unauthorized"  # no owner's secret with it
    FORBIDDEN = "forbidden"  # refused for who or where it came from
    NOT_FOUND = "not_found"
    NOT_ALLOWED = "not_allowed"  # the method is not allowed on this resource
    CONFLICT = "conflict"  # the request collides with the state something is in now
    TOO_LARGE = "too_large"
    DEPENDENCY = "dependency"  # something the request depends on refused (the host, a record)
    INTERNAL = "internal"  # our own state or code is broken: nothing the request did
    UNAVAILABLE = "unavailable"  # the disk, the controller or a bound is full now: retry later
    TIMEOUT = "timeout"  # codex did not answer, start or finish in time


EXIT_FAILURE = 1


@dataclass(frozen=True)
class ErrorSpec:
    """How a code ends a CLI command (its exit code) and what kind of refusal it is."""

    outcome: Outcome
    exit_code: int = EXIT_FAILURE


# Every code the package can raise, with its exit code and outcome: the one table the CLI,
# the service, the docs and the tests read. A test fails for a raised code missing here.
ERRORS: Mapping[str, ErrorSpec] = MappingProxyType(
    {
        # each class's `default_code`: no raise relies on one today
        "loopx_chat_error": ErrorSpec(Outcome.DEPENDENCY),
        "state_error": ErrorSpec(Outcome.INTERNAL),
        "codex_error": ErrorSpec(Outcome.DEPENDENCY),
        "launchagent_error": ErrorSpec(Outcome.DEPENDENCY),
        # state
        "invalid_session_id": ErrorSpec(Outcome.INVALID),
        "session_not_found": ErrorSpec(Outcome.NOT_FOUND),
        "session_exists": ErrorSpec(Outcome.CONFLICT),
        "state_corrupt": ErrorSpec(Outcome.INTERNAL),
        "state_schema_unsupported": ErrorSpec(Outcome.INTERNAL),
        "state_unwritable": ErrorSpec(Outcome.UNAVAILABLE),
        "state_unreadable": ErrorSpec(Outcome.UNAVAILABLE),
        "state_unsafe": ErrorSpec(Outcome.UNAVAILABLE),
        "foreign_owner": ErrorSpec(Outcome.FORBIDDEN),
        "codex_home_invalid": ErrorSpec(Outcome.DEPENDENCY),
        "codex_home_rebind_refused": ErrorSpec(Outcome.DEPENDENCY),
        "unsupported_session_fields": ErrorSpec(Outcome.INTERNAL),
        "illegal_status_transition": ErrorSpec(Outcome.INTERNAL),
        # codex host
        "host_tool_unavailable": ErrorSpec(Outcome.DEPENDENCY),
        "codex_not_runnable": ErrorSpec(Outcome.DEPENDENCY),
        "codex_protocol_missing": ErrorSpec(Outcome.DEPENDENCY),
        "codex_not_signed_in": ErrorSpec(Outcome.DEPENDENCY),
        "app_server_start_failed": ErrorSpec(Outcome.DEPENDENCY),
        "app_server_exited": ErrorSpec(Outcome.DEPENDENCY),
        "app_server_rejected": ErrorSpec(Outcome.DEPENDENCY),
        "app_server_protocol": ErrorSpec(Outcome.DEPENDENCY),
        "codex_home_mismatch": ErrorSpec(Outcome.DEPENDENCY),
        "codex_home_host_mismatch": ErrorSpec(Outcome.DEPENDENCY),
        "codex_config_invalid": ErrorSpec(Outcome.DEPENDENCY),
        "catalog_incompatible": ErrorSpec(Outcome.DEPENDENCY),
        "resume_failed": ErrorSpec(Outcome.DEPENDENCY),
        "thread_busy": ErrorSpec(Outcome.CONFLICT),
        # the service
        "unauthorized": ErrorSpec(Outcome.UNAUTHORIZED),
        "busy": ErrorSpec(Outcome.UNAVAILABLE),
        "too_many_streams": ErrorSpec(Outcome.UNAVAILABLE),
        "too_many_connections": ErrorSpec(Outcome.UNAVAILABLE),
        "service_not_running": ErrorSpec(Outcome.DEPENDENCY),
        # the owner's browsers and devices (state/devices.py, service/device_auth.py)
        "login_code_invalid": ErrorSpec(Outcome.UNAUTHORIZED),
        "invalid_device_name": ErrorSpec(Outcome.INVALID),
        "device_name_taken": ErrorSpec(Outcome.CONFLICT),
        "device_not_found": ErrorSpec(Outcome.NOT_FOUND),
        "device_not_full": ErrorSpec(Outcome.FORBIDDEN),
        "pairing_not_allowed": ErrorSpec(Outcome.FORBIDDEN),
        "too_many_login_codes": ErrorSpec(Outcome.UNAVAILABLE),
        "public_url_invalid": ErrorSpec(Outcome.INVALID),
        "browser_unavailable": ErrorSpec(Outcome.DEPENDENCY),
        "turn_not_active": ErrorSpec(Outcome.CONFLICT),
        # `chat interrupt` of a goal run's turn: the run's process did not record its end
        "interrupt_not_acknowledged": ErrorSpec(Outcome.TIMEOUT),
        "idle_timeout": ErrorSpec(Outcome.TIMEOUT),
        "hard_timeout": ErrorSpec(Outcome.TIMEOUT),
        "first_output_timeout": ErrorSpec(Outcome.TIMEOUT),
        "startup_timeout": ErrorSpec(Outcome.TIMEOUT),
        "request_timeout": ErrorSpec(Outcome.TIMEOUT),
        "agent_unsupported": ErrorSpec(Outcome.CONFLICT),
        "codex_home_missing": ErrorSpec(Outcome.DEPENDENCY),
        "work_dir_missing": ErrorSpec(Outcome.DEPENDENCY),
        "host_unreadable": ErrorSpec(Outcome.DEPENDENCY),
        "home_exclusive_hold": ErrorSpec(Outcome.DEPENDENCY),
        "home_in_use": ErrorSpec(Outcome.DEPENDENCY),
        "controller_stopped": ErrorSpec(Outcome.UNAVAILABLE),
        "turn_failed": ErrorSpec(Outcome.DEPENDENCY),
        # output
        "output_unwritable": ErrorSpec(Outcome.DEPENDENCY),
        # goals
        "invalid_goal_id": ErrorSpec(Outcome.INVALID),
        "unsafe_text": ErrorSpec(Outcome.INVALID),
        "invalid_text": ErrorSpec(Outcome.INVALID),
        "gate_not_found": ErrorSpec(Outcome.NOT_FOUND),
        "goal_not_found": ErrorSpec(Outcome.NOT_FOUND),
        "gate_already_resolved": ErrorSpec(Outcome.CONFLICT),
        # a host gate's answers (several questions, an MCP server's fields)
        "answer_needs_question_id": ErrorSpec(Outcome.INVALID),
        "unknown_question_id": ErrorSpec(Outcome.INVALID),
        "answer_missing": ErrorSpec(Outcome.INVALID),
        "secret_answer_on_argv": ErrorSpec(Outcome.INVALID),
        "elicitation_not_held": ErrorSpec(Outcome.CONFLICT),
        "input_invalid": ErrorSpec(Outcome.INVALID),
        "raw_material_refused": ErrorSpec(Outcome.INVALID),
        "goal_state_missing": ErrorSpec(Outcome.CONFLICT),
        "proposal_not_found": ErrorSpec(Outcome.NOT_FOUND),
        "proposal_already_closed": ErrorSpec(Outcome.CONFLICT),
        "writeback_refused": ErrorSpec(Outcome.DEPENDENCY),
        "writeback_no_source": ErrorSpec(Outcome.DEPENDENCY),
        "writeback_not_applied": ErrorSpec(Outcome.DEPENDENCY),
        "writeback_conflict": ErrorSpec(Outcome.CONFLICT),
        "session_goal_mismatch": ErrorSpec(Outcome.INVALID),
        "turn_not_found": ErrorSpec(Outcome.NOT_FOUND),
        "acceptance_required": ErrorSpec(Outcome.INVALID),
        # goal runs (Codex's own loop)
        "gate_open": ErrorSpec(Outcome.CONFLICT),
        "goal_stopped": ErrorSpec(Outcome.CONFLICT),
        "no_session": ErrorSpec(Outcome.CONFLICT),
        "budget_required": ErrorSpec(Outcome.INVALID),
        "approval_policy_unknown": ErrorSpec(Outcome.INVALID),
        "plan_not_in_run": ErrorSpec(Outcome.INVALID),
        "raw_material_detected": ErrorSpec(Outcome.CONFLICT),
        "objective_required": ErrorSpec(Outcome.CONFLICT),
        "run_not_found": ErrorSpec(Outcome.NOT_FOUND),
        "run_not_complete": ErrorSpec(Outcome.CONFLICT),
        "too_many_running": ErrorSpec(Outcome.UNAVAILABLE),
        # launchagent
        "platform_unsupported": ErrorSpec(Outcome.DEPENDENCY),
        "plist_malformed": ErrorSpec(Outcome.DEPENDENCY),
        "plist_unsafe": ErrorSpec(Outcome.DEPENDENCY),
        "plist_unreadable": ErrorSpec(Outcome.DEPENDENCY),
        "plist_unwritable": ErrorSpec(Outcome.DEPENDENCY),
        "legacy_binding_ambiguous": ErrorSpec(Outcome.DEPENDENCY),
        "codex_home_not_absolute": ErrorSpec(Outcome.DEPENDENCY),
        "launchctl_unavailable": ErrorSpec(Outcome.DEPENDENCY),
        "launchctl_failed": ErrorSpec(Outcome.DEPENDENCY),
        "bootstrap_failed": ErrorSpec(Outcome.DEPENDENCY),
        "not_installed": ErrorSpec(Outcome.DEPENDENCY),
        # the systemd user service (`service` on Linux)
        "service_error": ErrorSpec(Outcome.DEPENDENCY),
        "unit_malformed": ErrorSpec(Outcome.DEPENDENCY),
        "program_path_unsupported": ErrorSpec(Outcome.DEPENDENCY),
        "unit_unsafe": ErrorSpec(Outcome.DEPENDENCY),
        "unit_unreadable": ErrorSpec(Outcome.DEPENDENCY),
        "unit_unwritable": ErrorSpec(Outcome.DEPENDENCY),
        "binding_overridden": ErrorSpec(Outcome.DEPENDENCY),
        "systemctl_unavailable": ErrorSpec(Outcome.DEPENDENCY),
        "systemctl_failed": ErrorSpec(Outcome.DEPENDENCY),
        "systemd_user_unavailable": ErrorSpec(Outcome.DEPENDENCY),
        "inherited_socket_invalid": ErrorSpec(Outcome.DEPENDENCY),
        # service (HTTP)
        "forbidden_host": ErrorSpec(Outcome.FORBIDDEN),
        "forbidden_request": ErrorSpec(Outcome.FORBIDDEN),
        "body_too_large": ErrorSpec(Outcome.TOO_LARGE),
        "not_found": ErrorSpec(Outcome.NOT_FOUND),
        "method_not_allowed": ErrorSpec(Outcome.NOT_ALLOWED),
        "bad_json": ErrorSpec(Outcome.INVALID),
        "bad_request": ErrorSpec(Outcome.INVALID),
        "internal_error": ErrorSpec(Outcome.INTERNAL),
        "turn_not_accepted": ErrorSpec(Outcome.TIMEOUT),
        "listen_failed": ErrorSpec(Outcome.DEPENDENCY),
        "service_already_running": ErrorSpec(Outcome.CONFLICT),
        "non_loopback_host": ErrorSpec(Outcome.DEPENDENCY),
        # the CLI through the running service: it stopped answering mid-command
        "service_lost": ErrorSpec(Outcome.UNAVAILABLE),
        # usage
        "usage_error": ErrorSpec(Outcome.INVALID),
    }
)

ERROR_CODES: frozenset[str] = frozenset(ERRORS)

# What an unregistered code means at run time: a bug (a test fails for it), answered as our
# own internal failure rather than passed off as some other kind.
UNREGISTERED = ErrorSpec(Outcome.INTERNAL)


def spec_for(code: str) -> ErrorSpec:
    """The table's entry for `code`; `UNREGISTERED` for a code the table lacks."""
    return ERRORS.get(code, UNREGISTERED)

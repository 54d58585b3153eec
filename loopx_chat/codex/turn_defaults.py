"""The defaults of a turn's sandbox, timeouts and approval policy, and the bounds of its
message, defined once and importing nothing.

`codex.thread.Timeouts` and `ThreadOptions` take their defaults from here, and so do the
`chat` group's options, so a CLI command can show and compare them without loading the codex
adapter or the controller (a command the running service runs loads neither).
"""

SANDBOX = "read-only"
IDLE_TIMEOUT_SEC = 180.0  # no notification at all for this long during a turn
HARD_TIMEOUT_SEC = 900.0  # the whole turn
# A turn that has produced nothing (no reply, no reasoning, no tool call, no token count) for
# this long is stopped (`first_output_timeout`): codex retries an unreachable model for ever.
FIRST_OUTPUT_TIMEOUT_SEC = 120.0
FIRST_OUTPUT_ENV = "LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT"
# What codex may ask the owner before it acts (`approvalPolicy`): never asks (the default);
# asks only when the model requests more than the sandbox allows; asks before every command
# that is not known to be safe.
APPROVAL_POLICIES = ("never", "on-request", "untrusted")
APPROVAL = "never"
DECISION_TIMEOUT_SEC = 15 * 60.0  # how long an approval or question waits for the owner
# A message is read whole into memory and sent as one JSON-RPC line: bounded, and stated in
# --help. 8 MiB is far above any prompt a person types and far below the app-server's line cap.
MESSAGE_LIMIT_BYTES = 8 << 20
# The largest turn request the owner's service reads: the largest message with every byte
# escaped as `\uXXXX` in JSON (6 bytes each), plus room for the turn's ids and options. So
# every message the CLI takes fits, and a turn never has to leave the service for its size.
TURN_BODY_LIMIT = 6 * MESSAGE_LIMIT_BYTES + (64 << 10)

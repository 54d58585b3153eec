"""The defaults of a turn's sandbox and timeouts, defined once and importing nothing.

`codex.thread.Timeouts` and `ThreadOptions` take their defaults from here, and so do the
`chat` group's options, so a CLI command can show and compare them without loading the codex
adapter or the controller (a command the running service runs loads neither).
"""

SANDBOX = "read-only"
IDLE_TIMEOUT_SEC = 180.0  # no notification at all for this long during a turn
HARD_TIMEOUT_SEC = 900.0  # the whole turn

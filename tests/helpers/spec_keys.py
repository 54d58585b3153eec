"""Key words written from the spec (reference §3.3-§3.5), never from the module's tables:
the raw-material words of each category and the source id keys in their order. Shared by
the key, corpus and projection tests."""

from __future__ import annotations

SPEC_RAW_WORDS: dict[str, tuple[str, ...]] = {
    "credential": (
        "credential",
        "credentials",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
    ),
    "transcript": ("transcript", "transcripts", "messages", "prompt", "prompts", "conversation"),
    "log": ("log", "logs", "trace", "traces", "stacktrace", "traceback"),
    "local_path": ("path", "paths", "cwd", "workdir", "filename", "filepath"),
    "raw_output": ("raw", "stdout", "stderr", "diff", "patch", "dump"),
}
SPEC_ID_KEYS = (
    "session_id",
    "event_id",
    "outcome_id",
    "gate_id",
    "approval_id",
    "artifact_id",
    "tool_call_id",
    "run_id",
    "ref_id",
)

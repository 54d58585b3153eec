"""Owner-local storage: where state lives, how it is written, and the session/turn records.

`private_files` writes atomically with explicit modes, `jsonl` is the one append-only
JSON-lines helper, `session_records` holds the session and compact-turn records (no I/O),
`session_store` keeps them on disk under locks, `control_events` is the compact
control-event log. Nothing here spawns a process or talks to Codex.
"""

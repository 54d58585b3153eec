"""Where a Codex home keeps its rollouts: the two folders the scanner walks.

One definition for the scanner and for `host_facts`, which checks them without loading the
scanner. It does no I/O and holds nothing else.
"""

from __future__ import annotations

ACTIVE_FOLDER = "sessions"
ARCHIVED_FOLDER = "archived_sessions"
ROLLOUT_FOLDERS = (ACTIVE_FOLDER, ARCHIVED_FOLDER)

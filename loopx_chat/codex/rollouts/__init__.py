"""Compact host facts from Codex rollout files, read incrementally.

What this package owns:
  * Finding `<home>/sessions/**/rollout-*.jsonl` and `<home>/archived_sessions/**/rollout-*.jsonl`
    (no symlinks followed) and reducing them to per-thread `ThreadFacts`: turn counts by outcome,
    the last turn, token totals, models, history mode, archived, and the latest event time.
  * The rollout index (`loopx_chat_rollout_index_v2`, owner-local JSON, 0600 in a 0700 folder),
    so a rescan reads only the bytes appended since the last one.
  * `HostPosition`: how far the host has got, so a consumer can compare what it saw with now.

Its modules, each with one job: `records` (the public frozen records), `fields` (the pickers
that decide what of an untrusted value may be kept), `accumulator` (one file's running state
and its index form), `parse` (reading a file's complete lines: the fast byte-level path and
the exact line-by-line path), `index` (the on-disk index: entries, load, save) and `scanner`
(walking the home and orchestrating the incremental scan), `layout` (the home's two rollout
folders), `render` (the `codex facts --json`
document as text); `host_facts` says where the bound home's index lives in owner-local state
and turns a scan failure into a note. This module only re-exports, each name on first use.

What it must never do:
  * keep message text, tool output, `cwd`, `base_instructions`, `last_agent_message` or any
    path in facts (or in the index's per-file state): only ids, enum-like kinds, numbers and
    timestamps are picked, each checked against a narrow pattern, and the rest of a line is
    dropped at once. Rollout paths live only in the index, relative to the home;
  * consume a trailing partial line (a turn still being written): the offset stops before it;
  * fail on a corrupt line (it is counted), hold a whole file in memory, or write to the home.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopx_chat.codex.rollouts.records import ScanResult, ThreadFacts
    from loopx_chat.codex.rollouts.scanner import RolloutScanner

# Each name loads its module on first use (PEP 562): `host_facts` is imported by every
# `status`, and a home with nothing to scan must not pay for the scanner (issue 18).
_EXPORTS = {
    "ScanResult": "records",
    "ThreadFacts": "records",
    "RolloutScanner": "scanner",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "RolloutScanner",
    "ScanResult",
    "ThreadFacts",
]

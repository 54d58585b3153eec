"""Scan the bound Codex home's rollouts into compact facts, keeping progress in owner-local state.

Owns where the scan index lives (`<state>/host/rollouts-<home key>.json`, one per home),
turning a scan failure into "no host facts" with a code, so `status` never fails because
the host's files are unreadable, and the summary `status` prints of a scan. The facts
themselves come from `codex.rollouts`, which this module loads only when there is something
to read: a home never scanned that has neither rollout folder (a first run) loads no
scanner, reads nothing and writes no index.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopx_chat.codex.rollouts.layout import ROLLOUT_FOLDERS
from loopx_chat.errors import LoopxChatError
from loopx_chat.home import home_key

if TYPE_CHECKING:
    from loopx_chat.codex.rollouts import RolloutScanner, ScanResult, ThreadFacts

INDEX_FOLDER = "host"


@dataclass(frozen=True)
class HostScan:
    """What `status` knows of the host: every thread's facts, or None when the scan failed
    (`error_code` says why)."""

    threads: Mapping[str, ThreadFacts] | None
    bytes_read: int
    error_code: str | None

    def summary(self) -> dict[str, Any]:
        return {
            "threads": len(self.threads or {}),
            "bytes_read": self.bytes_read,
            "error_code": self.error_code,
        }


def index_path(state_root: Path, codex_home: Path) -> Path:
    return state_root / INDEX_FOLDER / f"rollouts-{home_key(codex_home)}.json"


def scanner_for(state_root: Path, codex_home: Path) -> RolloutScanner:
    from loopx_chat.codex.rollouts import RolloutScanner

    return RolloutScanner(codex_home, index_path(state_root, codex_home))


def scan_host(scanner: RolloutScanner) -> tuple[ScanResult | None, str | None]:
    """(result, None) or (None, error code) when the index or the home cannot be read."""
    try:
        return scanner.scan(), None
    except LoopxChatError as exc:
        return None, exc.error_code
    except OSError:
        return None, "host_unreadable"


def _absent(path: Path) -> bool:
    """True only for "no such file": anything else (unreadable, a loop) is left to the scan,
    which says what it is."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def scan_bound_home(state_root: Path, codex_home: Path) -> HostScan:
    """The host's threads for `status`: a full incremental scan, or nothing to scan."""
    if all(_absent(codex_home / name) for name in ROLLOUT_FOLDERS) and (
        # The folder first: the index's name needs the home key (hashlib, 3 ms).
        _absent(state_root / INDEX_FOLDER) or _absent(index_path(state_root, codex_home))
    ):
        return HostScan({}, 0, None)
    scan, error_code = scan_host(scanner_for(state_root, codex_home))
    if scan is None:
        return HostScan(None, 0, error_code)
    return HostScan(scan.threads, scan.bytes_read, None)

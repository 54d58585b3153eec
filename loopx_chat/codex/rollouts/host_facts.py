"""Scan the bound Codex home's rollouts into compact facts, keeping progress in owner-local state.

Owns where the scan index lives (`<state>/host/rollouts-<home key>.json`, one per home) and
turning a scan failure into "no host facts" with a note, so `status` never fails because the
host's files are unreadable. The facts themselves come from `codex.rollouts`.
"""

from __future__ import annotations

from pathlib import Path

from loopx_chat.codex.rollouts import RolloutScanner, ScanResult
from loopx_chat.errors import LoopxChatError
from loopx_chat.home import home_key


def index_path(state_root: Path, codex_home: Path) -> Path:
    return state_root / "host" / f"rollouts-{home_key(codex_home)}.json"


def scanner_for(state_root: Path, codex_home: Path) -> RolloutScanner:
    return RolloutScanner(codex_home, index_path(state_root, codex_home))


def scan_host(scanner: RolloutScanner) -> tuple[ScanResult | None, str | None]:
    """(result, None) or (None, error code) when the index or the home cannot be read."""
    try:
        return scanner.scan(), None
    except LoopxChatError as exc:
        return None, exc.error_code
    except OSError:
        return None, "host_unreadable"

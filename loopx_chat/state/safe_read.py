"""The one way loopx-chat reads a state file or a JSON input: bounded, regular files only.

Owns opening without following a symlink and without blocking (`O_NOFOLLOW|O_NONBLOCK`, so
a FIFO never hangs a reader), refusing anything that is not a regular file (`fstat`), a size
cap, and parsing JSON with a nesting-depth cap and Python's integer-digit limit caught. A
record read back is shown whatever text it holds (`repair=True`): bytes that are not UTF-8
and lone surrogates become U+FFFD (`valid_text`), so an older version's or another
process's record never breaks the page. A file that fails any of these is `state_corrupt`
naming the path (`state_unsafe` for a
symlink, `state_unreadable` when the OS refuses); it is never modified. It never writes.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from loopx_chat.errors import StateError
from loopx_chat.state.private_files import check_owner, state_read
from loopx_chat.valid_text import may_hold_invalid, repaired_tree

DOCUMENT_LIMIT = 64 << 20  # session.json, turn records, the rollout index, `project --input`
JOURNAL_LIMIT = 1 << 30  # an append-only jsonl file as a whole
MAX_DEPTH = 64  # no record we write nests deeper than a handful of levels

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


class JsonRefused(ValueError):
    """A JSON document we will not parse; `reason` says why in a few words."""

    def __init__(self, reason: str, *, too_large: bool = False, not_utf8: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large
        self.not_utf8 = not_utf8


def _too_deep(raw: bytes, max_depth: int) -> bool:
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return False  # cannot nest deeper than it has openers: the common case, no scan
    depth = 0
    for byte in _STRING.sub(b"", raw).translate(None, _NOT_BRACKET):
        depth = depth + 1 if byte in b"[{" else depth - 1
        if depth > max_depth:
            return True
    return False


def parse_json(raw: bytes | str, *, max_depth: int = MAX_DEPTH, repair: bool = False) -> object:
    """`json.loads` that refuses (JsonRefused) instead of recursing or hitting a limit.
    `repair`: a record read back, its invalid text shown as U+FFFD rather than refused."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if _too_deep(data, max_depth):
        raise JsonRefused(f"nested deeper than {max_depth} levels")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise JsonRefused(f"invalid JSON at byte {exc.pos}") from None
    except UnicodeDecodeError as exc:
        if not repair:
            raise JsonRefused(f"not UTF-8 at byte {exc.start}", not_utf8=True) from None
        return parse_json(data.decode("utf-8", "replace"), max_depth=max_depth, repair=True)
    except RecursionError:
        raise JsonRefused("nested too deeply") from None
    except ValueError as exc:  # Python's int-digit limit (sys.set_int_max_str_digits)
        raise JsonRefused(f"holds a number Python refuses to read ({exc})") from None
    return repaired_tree(doc) if repair and may_hold_invalid(data) else doc


def read_regular(path: Path | str, *, limit: int = DOCUMENT_LIMIT) -> bytes:
    """The bytes of a regular file; FileNotFoundError passes through for the caller."""
    with state_read(path):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StateError(
                    f"{path} is not a regular file; it was left untouched — move it aside",
                    error_code="state_corrupt",
                )
            check_owner(st, path)
            if st.st_size > limit:
                raise StateError(
                    f"{path} is larger than {limit >> 20} MiB; it was left untouched",
                    error_code="state_corrupt",
                )
            chunks = []
            remaining = limit + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
        finally:
            os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > limit:  # grew while we read it
        raise StateError(
            f"{path} is larger than {limit >> 20} MiB; it was left untouched",
            error_code="state_corrupt",
        )
    return raw


def load_state_json(raw: bytes, path: Path | str, where: str = "") -> object:
    """Parse owner-local JSON; a refusal is `state_corrupt` with the path, bytes untouched."""
    try:
        return parse_json(raw, repair=True)
    except JsonRefused as exc:
        at = f" {where}" if where else ""
        raise StateError(
            f"{path}{at} is not readable JSON ({exc.reason}); it was left untouched — "
            "restore it from a backup or move it aside",
            error_code="state_corrupt",
        ) from None

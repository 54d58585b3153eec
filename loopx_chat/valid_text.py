"""Text that is valid Unicode: the one check every entry point makes, and the one repair for
what was stored before.

Owns the rule. A Python string is valid text when it can be written as UTF-8, that is when
it holds no surrogate code point: what a byte that is not UTF-8 on the command line becomes
(Python decodes argv with `surrogateescape`: the byte 0xff arrives as U+DCFF), and what a
JSON `"\\ud800"` escape decodes to. Such a string breaks whatever writes it out later (the
page answered 500 with `UnicodeEncodeError`).

- `checked_text` / `checked_tree`: an entry point (a CLI argument, an API body, a secret
  answer read from stdin or a file) refuses invalid text with `invalid_text`, naming what it
  was and which character, and saying how to fix it.
- `repaired_text` / `repaired_tree`: a record read back that was written with such text (by
  an older version, or another process) is shown, never refused: each surrogate becomes
  U+FFFD, the replacement character.

It decides nothing about what text may say (`goals/gate_store.public_text` does) and never
logs or returns the text itself. It imports nothing of ours but the error hierarchy.
"""

from __future__ import annotations

import re

from loopx_chat.errors import UsageError

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON document can carry a surrogate only as a \\uD8xx-\\uDFxx escape or as the bytes
# UTF-8 would give one (0xED 0xA0-0xBF ..., which json.loads reads with surrogatepass).
_MAYBE_IN_JSON = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def invalid_at(text: str) -> int | None:
    """The index of the first character that is not valid text, or None."""
    found = _SURROGATE.search(text)
    return found.start() if found else None


def _described(code: int) -> str:
    if 0xDC80 <= code <= 0xDCFF:
        return f"the byte 0x{code - 0xDC00:02x}, which is not UTF-8"
    return f"U+{code:04X}, a lone surrogate (half of a pair, meaningless alone)"


def checked_text(text: str, what: str) -> str:
    """`text` when it is valid Unicode; else `invalid_text` naming `what` and the character."""
    at = invalid_at(text)
    if at is None:
        return text
    raise UsageError(
        f"{what} is not valid text: character {at + 1} is {_described(ord(text[at]))}; "
        "nothing was recorded. Send it as UTF-8 (convert a file or terminal in another "
        "encoding first, e.g. `iconv -t UTF-8`)",
        error_code="invalid_text",
    )


def checked_tree(value: object, what: str) -> object:
    """A decoded JSON document (or any nest of dicts, lists and strings) whose every string,
    key or value, is valid text; else `invalid_text` naming `what` and where."""
    stack: list[tuple[object, str]] = [(value, what)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            checked_text(item, where)
        elif isinstance(item, dict):
            for key, child in item.items():
                name = checked_text(str(key), f"a key in {where}")
                stack.append((child, f"{where}: {name[:40]}"))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{n}]") for n, child in enumerate(item))
    return value


def repaired_text(text: str) -> str:
    """`text` with each character that is not valid text shown as U+FFFD."""
    return _SURROGATE.sub(REPLACEMENT, text) if invalid_at(text) is not None else text


def repaired_tree(value: object) -> object:
    """A decoded record with every string (keys too) repaired; the same object when clean."""
    if isinstance(value, str):
        return repaired_text(value)
    if isinstance(value, dict):
        return {repaired_text(str(k)): repaired_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [repaired_tree(v) for v in value]
    return value


def may_hold_invalid(raw: bytes) -> bool:
    """Whether JSON bytes can decode to invalid text at all (cheap: most records cannot, and
    are then never walked)."""
    if b"\\u" not in raw and b"\xed" not in raw:  # two memchr-fast scans: the common case
        return False
    return _MAYBE_IN_JSON.search(raw) is not None

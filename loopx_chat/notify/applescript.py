"""The AppleScript string-literal rule, written once. Pure.

Inside an AppleScript string literal only the backslash and the double quote need an
escape (`\\` and `\"`); every other character, a line break or non-ASCII included, may
stand as it is. Doubling every backslash first also keeps AppleScript's own `\n`, `\t` and
`\r` sequences from ever being read into the text we did not write.
"""

from __future__ import annotations


def applescript_string(text: str) -> str:
    """`text` as an AppleScript string literal, quotes included. NUL (which no argv can
    carry) becomes a space."""
    body = text.replace("\0", " ").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{body}"'

"""Agent text made safe to print: control characters shown, never obeyed.

Owns the one mapping the CLI applies to text it did not write (the agent's streamed reply,
history read back from codex) before printing it in text mode. An escape sequence in a
model's reply would otherwise reach the user's terminal and be executed there: set the
window title, rewrite the clipboard (OSC 52), move the cursor to overwrite what was shown.
Every C0 control except tab and newline, DEL and the C1 controls become visible stand-ins;
everything else is printed as it came. It never touches JSON output (json.dumps escapes
control characters itself) and never decides what is shown, only how.
"""

from __future__ import annotations

# C0 controls as their Unicode "control pictures" (ESC -> U+241B), DEL -> U+2421, and the C1
# controls (which some terminals also obey) as U+FFFD: shown, so nothing silently vanishes.
_STAND_INS: dict[int, str] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)},
    0x7F: "\u2421",
    **{code: "\ufffd" for code in range(0x80, 0xA0)},
}
_TABLE = str.maketrans(_STAND_INS)


def printable(text: str) -> str:
    """`text` with every terminal control character replaced by a visible stand-in."""
    return text.translate(_TABLE)

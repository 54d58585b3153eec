"""Text we did not write, made safe to show: control characters shown, never obeyed.

Owns the one control-character filter, in two named modes, for the CLI and the service alike.
An escape sequence in a model's reply or in a record would otherwise reach a terminal and be
executed there (set the window title, rewrite the clipboard with OSC 52, move the cursor to
overwrite what was shown), and a control character in a request would forge a log line.

- `ControlMode.PICTURES`, for running text a person reads (the agent's streamed reply,
  history read back from codex): every C0 control except tab and newline, DEL and the C1
  controls become visible stand-ins; everything else is shown as it came, so the text keeps
  its length and its lines.
- `ControlMode.ESCAPES`, for one line (a record in a list, a request in the service's log):
  every character Python does not call printable (newlines, tabs and bidi overrides too)
  becomes its backslash escape, so one value stays one line.

It never touches JSON output (json.dumps escapes control characters itself) and never decides
what is shown, only how. It imports nothing of ours.
"""

from __future__ import annotations

from enum import Enum

# C0 controls as their Unicode "control pictures" (ESC -> U+241B), DEL -> U+2421, and the C1
# controls (which some terminals also obey) as U+FFFD: shown, so nothing silently vanishes.
_STAND_INS: dict[int, str] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)},
    0x7F: "\u2421",
    **{code: "\ufffd" for code in range(0x80, 0xA0)},
}
_PICTURES = str.maketrans(_STAND_INS)


class ControlMode(Enum):
    PICTURES = "pictures"  # controls as visible stand-ins; tab and newline kept
    ESCAPES = "escapes"  # every non-printable character as its backslash escape


def visible_text(text: str, mode: ControlMode) -> str:
    """`text` with its control characters shown the way `mode` says."""
    if mode is ControlMode.PICTURES:
        return text.translate(_PICTURES)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)

"""What `chat new|send` print: the turn's stream lines and its end, as text, not as I/O.

Owns the words and the JSON document of a chat turn's output, rendered through an `echo`
the caller gives: `click.echo` in the click commands (`chat_cmd`), a click-free writer that
behaves as `click.echo` in the served fast path (`served_send`). One renderer for both is
what keeps their output byte-identical. It never decides anything and loads no click.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from loopx_chat.errors import Remedy

FIRST_OUTPUT_HINT = (
    "codex produced nothing within the first-output timeout: it could not reach its model. "
    "`loopx-chat home check` checks the home's model provider and sign-in; a slow model "
    "needs a larger --first-output-timeout (or LOOPX_CHAT_FIRST_OUTPUT_TIMEOUT)"
)
HOST_LOOP_LINE = "Codex is running a goal loopx-chat did not start (no budget set here)"
SERVED_HOST_LOOP = "the service follows it; Pause it on the goal's card"


class Echo(Protocol):
    def __call__(self, message: str | None = None, *, nl: bool = True, err: bool = False) -> Any:
        """Write `message` (and a newline unless `nl` is False) to stdout, or stderr."""


def json_document(data: Any) -> str:
    """A command's one JSON document, as every `--json` prints it."""
    return json.dumps(data, indent=2, sort_keys=True, default=str)


def started_line(turn_id: str) -> str:
    return f"[loopx-chat] turn {turn_id} running, waiting for codex…"


def host_loop_line(pause: str) -> str:
    return (
        f"[loopx-chat] {HOST_LOOP_LINE}: {pause}, or adopt it with a budget through "
        "`loopx-chat goal run GOAL --token-budget N`"
    )


def finish(
    echo: Echo, result: dict[str, Any], as_json: bool, streamed: bool, hint: Remedy | None = None
) -> bool:
    """Print a turn's end (the JSON document, or the status lines on stderr); whether the
    turn is ok (completed, queued or running): the command exits 1 when it is not."""
    turn = result["turn"]
    ok = turn["status"] in ("completed", "queued", "running")
    if as_json:
        doc = {
            "ok": ok,
            "session_id": result["session_id"],
            "thread_id": result["thread_id"],
            "created": result["created"],
            "turn": turn,
            "error_code": None if ok else turn["error_code"],
        }
        echo(json_document(doc | ({"hint": hint.to_dict()} if hint and ok else {})))
        return ok
    if streamed:
        echo()
    note = "" if result["created"] else " (already submitted; not run again)"
    code = turn["error_code"]
    echo(
        f"[loopx-chat] session {result['session_id']} turn {turn['id']}: "
        f"{turn['status']}{f' [{code}]' if code else ''} "
        f"tokens={turn['total_tokens']}{note}",
        err=True,
    )
    if hint and ok:
        echo(f"[loopx-chat] {hint.summary}", err=True)
        echo(f"[loopx-chat] next: {hint.next_action}", err=True)
    if code == "first_output_timeout":
        echo(f"[loopx-chat] {FIRST_OUTPUT_HINT}", err=True)
    return ok

"""The `codex facts --json` document as text, without the standard library's slow path.

What this module owns:
  * `facts_document(result)`: exactly the text `json.dumps({"ok": True, **result.to_dict()},
    indent=2, sort_keys=True)` gives. With an indent, `json.dumps` falls back to its pure-Python
    encoder, which costs about as much as a warm scan itself on a home of 2,000 threads; here
    every record's shape is known, so each thread is one format string, and every string goes
    through the C escaper `json.dumps` itself uses. Tests compare the two byte for byte.

What it must never do:
  * decide what a fact holds (that is `records`' `to_dict`): it only lays out the same values;
  * write anywhere: the caller prints the text.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii as _quote

from loopx_chat.codex.rollouts.records import HostPosition, ScanResult, ThreadFacts


def _value(value: str | int | None) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return _quote(value)
    return str(int(value))


def _strings(values: tuple[str, ...] | list[str], pad: str) -> str:
    if not values:
        return "[]"
    inner = f",\n{pad}  ".join(map(_quote, values))
    return f"[\n{pad}  {inner}\n{pad}]"


# One thread under "threads" (its key at 4 spaces), keys in sorted order as `sort_keys` puts them.
_THREAD = (
    '    %s: {\n      "archived": %s,\n      "history_mode": %s,\n      "last_turn": %s,\n'
    '      "latest_event_at": %s,\n      "models": %s,\n      "thread_id": %s,\n'
    '      "tokens": %s,\n      "turns": {\n        "completed": %d,\n        "failed": %d,\n'
    '        "interrupted": %d,\n        "started": %d,\n        "unfinished": %d\n      }\n    }'
)
_LAST = (
    '{\n        "completed_at": %s,\n        "error_code": %s,\n        "outcome": %s,\n'
    '        "turn_id": %s\n      }'
)
_TOKENS = (
    '{\n        "cached_input_tokens": %d,\n        "input_tokens": %d,\n'
    '        "output_tokens": %d,\n        "reasoning_output_tokens": %d,\n'
    '        "total_tokens": %d\n      }'
)


def _thread(key: str, facts: ThreadFacts) -> str:
    last = facts.last_turn
    tokens = facts.tokens
    turns = facts.turns
    return _THREAD % (
        _quote(key),
        "true" if facts.archived else "false",
        _value(facts.history_mode),
        "null"
        if last is None
        else _LAST
        % (
            _value(last.completed_at),
            _value(last.error_code),
            _quote(last.outcome),
            _quote(last.turn_id),
        ),
        _value(facts.latest_event_at),
        _strings(facts.models, "      "),
        _quote(facts.thread_id),
        "null"
        if tokens is None
        else _TOKENS
        % (
            tokens.cached_input_tokens,
            tokens.input_tokens,
            tokens.output_tokens,
            tokens.reasoning_output_tokens,
            tokens.total_tokens,
        ),
        turns.completed,
        turns.failed,
        turns.interrupted,
        turns.started,
        turns.unfinished,
    )


def _position(position: HostPosition) -> str:
    started = sorted(position.turns_started.items())
    turns = (
        "{\n" + ",\n".join(f"      {_quote(tid)}: {int(n)}" for tid, n in started) + "\n    }"
        if started
        else "{}"
    )
    return (
        f'{{\n    "files": {int(position.files)},\n'
        f'    "latest_event_at": {_value(position.latest_event_at)},\n'
        f'    "total_offset": {int(position.total_offset)},\n'
        f'    "turns_started": {turns}\n  }}'
    )


def facts_document(result: ScanResult) -> str:
    """`json.dumps({"ok": True, **result.to_dict()}, indent=2, sort_keys=True)`, faster."""
    threads = [_thread(tid, result.threads[tid]) for tid in sorted(result.threads)]
    body = "{\n" + ",\n".join(threads) + "\n  }" if threads else "{}"
    return (
        f'{{\n  "bytes_read": {int(result.bytes_read)},\n'
        f'  "corrupt_lines": {int(result.corrupt_lines)},\n'
        f'  "files": {int(result.files)},\n'
        f'  "files_reread": {int(result.files_reread)},\n'
        f'  "notes": {_strings(result.notes, "  ")},\n'
        f'  "ok": true,\n'
        f'  "position": {_position(result.position)},\n'
        f'  "threads": {body}\n}}'
    )

"""The status document as `--json` prints it, each goal's row laid out once per change.

Owns one thing: exactly the text `json.dumps(doc, indent=2, sort_keys=True, default=str)`
gives, built from each row's own text. With an indent, `json.dumps` runs its pure-Python
encoder (about 0.7 ms a goal here, most of a warm `status --json` at thousands of goals), so
a row's text is kept beside its entry (`RowTexts`, persisted with the status index) and
reused while the goal's signature and the row's host part are the same. Tests compare the
two byte for byte.

It never decides what a row holds and never writes: the caller prints the text and saves
the texts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# goal id -> (the signature the row was folded from, as JSON; what this look added to the
# row (its host part) as JSON; the row's text)
RowTexts = dict[str, tuple[str, str, str]]
_PLACEHOLDER = "\x00rows"
_PAD = "    "  # a row sits in "attention_queue" at the second level


def _indented(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _row_text(row: Mapping[str, Any]) -> str:
    return _PAD + _indented(row).replace("\n", "\n" + _PAD)


def status_text(
    doc: Mapping[str, Any],
    bare_rows: Mapping[str, tuple[str, Mapping[str, Any]]],
    texts: RowTexts,
) -> tuple[str, RowTexts]:
    """(the document's text, the row texts to keep). `bare_rows`: goal id -> (its
    signature as JSON, the row as folded, before this look added its host part)."""
    rows = doc.get("attention_queue") or []
    if not rows:
        return _indented(doc), {}
    kept: RowTexts = {}
    parts: list[str] = []
    for row in rows:
        goal_id = str(row.get("goal_id"))
        signature, bare = bare_rows.get(goal_id, ("", None))
        extra = None
        if bare is not None and all(row[k] is bare[k] for k in bare if k in row):
            extra = json.dumps(
                {k: v for k, v in row.items() if k not in bare}, sort_keys=True, default=str
            )
        known = texts.get(goal_id)
        if extra is not None and known is not None and known[0] == signature and known[1] == extra:
            text = known[2]
        else:
            text = _row_text(row)
        if extra is not None:
            kept[goal_id] = (signature, extra, text)
        parts.append(text)
    shell = _indented({**doc, "attention_queue": [_PLACEHOLDER]})
    slot = _PAD + json.dumps(_PLACEHOLDER)
    return shell.replace(slot, ",\n".join(parts), 1), kept

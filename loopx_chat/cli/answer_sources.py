"""Where `gate resolve` takes the answers to what Codex asked: the command line, stdin, a
file, or the terminal, and which of those a secret question may use.

Every local user can read another's command line (`ps`, `/proc/PID/cmdline`), so an answer to
a question Codex marked secret (`isSecret` in `item/tool/requestUserInput`; the gate records
it per question) never comes from `--answer`: that is `secret_answer_on_argv`, refused before
anything is sent. It comes from a prompt that does not echo (stdin a terminal), from stdin
(`--answer-stdin`: one answer word per line, `TEXT` or `ID=TEXT` as `--answer` takes them),
or from a file (`--answer-file PATH`, the same lines; 0600 advised, a note says when others
may read it). codex 0.171.0's MCP elicitation schema marks no field secret (a string field's
`format` is email, uri, date or date-time, and nothing else is allowed), so an MCP server's
fields take any source. Every answer is checked as text (`valid_text`).

It owns only where an answer comes from. It never prints, logs or stores an answer and never
puts one on a command line; what an answer means is `host_gate_resolve.host_choice`'s job.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from loopx_chat.errors import UsageError
from loopx_chat.valid_text import checked_text

ANSWER_INPUT_LIMIT = 64 << 10


def _questions(host: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if host.get("kind") != "question":
        return []
    found = host.get("questions")
    return [q for q in found if isinstance(q, Mapping)] if isinstance(found, list) else []


def secret_ids(host: Mapping[str, Any]) -> set[str]:
    """The ids of the gate's questions marked secret (an older gate, with one flag for the
    whole request and no per-question record, counts every question secret)."""
    questions = _questions(host)
    if host.get("kind") != "question":
        return set()
    if not questions:
        return {"*"} if host.get("secret") else set()
    return {str(q.get("id")) for q in questions if q.get("secret")}


def _named(word: str, host: Mapping[str, Any]) -> str:
    """The question id an answer word is for: `ID=TEXT` names it; a bare word is for the one
    question ("*" when the gate does not say which)."""
    ids = [str(q.get("id")) for q in _questions(host)]
    name, sep, _ = word.partition("=")
    if sep and name in ids:
        return name
    return ids[0] if len(ids) == 1 else "*"


def refuse_secret_on_argv(words: Sequence[str], host: Mapping[str, Any]) -> None:
    """`secret_answer_on_argv` when any `--answer` word answers a question marked secret."""
    secret = secret_ids(host)
    for word in words:
        qid = _named(word, host)
        if qid in secret or "*" in secret:
            shown = "" if qid == "*" else f" ({qid})"
            raise UsageError(
                f"the question{shown} is marked secret, and --answer puts its answer on the "
                "command line, which every local user can read (ps, /proc); nothing was sent. "
                "Give it at the prompt (leave it out on a terminal), with --answer-stdin, or "
                "with --answer-file PATH (mode 0600); change the secret if it matters, since "
                "it was visible while this command ran",
                error_code="secret_answer_on_argv",
            )


def answer_lines(raw: bytes, what: str) -> list[str]:
    """Answer words from stdin or a file: one per non-empty line, valid UTF-8 text."""
    if len(raw) > ANSWER_INPUT_LIMIT:
        raise UsageError(
            f"{what} is larger than {ANSWER_INPUT_LIMIT >> 10} KiB", error_code="input_invalid"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{what} is not valid text: the byte at {exc.start} is not UTF-8; nothing was sent",
            error_code="invalid_text",
        ) from None
    return [checked_text(line, what) for line in text.splitlines() if line.strip()]


def read_stdin() -> list[str]:
    return answer_lines(sys.stdin.buffer.read(ANSWER_INPUT_LIMIT + 1), "--answer-stdin")


def read_file(path: Path, note: Callable[[str], None]) -> list[str]:
    """The answer words in `path` (a regular file of yours); a note when others may read it."""
    from loopx_chat.state.safe_read import read_regular

    what = f"--answer-file {path}"
    try:
        raw = read_regular(path, limit=ANSWER_INPUT_LIMIT)
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UsageError(f"{what}: no such file", error_code="input_invalid") from None
    if stat.S_IMODE(mode) & 0o077:
        note(
            f"{path} may be read by other users (mode {stat.S_IMODE(mode):04o}); "
            "keep answer files 0600 (chmod 600)"
        )
    return answer_lines(raw, what)


def prompted(
    host: Mapping[str, Any],
    given: Sequence[str],
    ask: Callable[[str, bool], str],
) -> list[str]:
    """`ID=TEXT` for each of the gate's questions no word in `given` answers, asked in turn
    (a secret one without echo); an empty line leaves it unanswered."""
    answered = {_named(word, host) for word in given}
    out: list[str] = []
    secret = secret_ids(host)
    for q in _questions(host):
        qid = str(q.get("id"))
        if qid in answered:
            continue
        hidden = qid in secret or "*" in secret
        label = str(q.get("header") or qid)
        text = ask(f"{label}{' (secret, not shown)' if hidden else ''}", hidden)
        if text.strip():
            out.append(f"{qid}={checked_text(text.strip(), label)}")
    return out

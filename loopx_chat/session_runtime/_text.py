"""Text rules shared by the projection builder and the compactor.

Owns how a fact value becomes display text: scalars only, whitespace collapsed, capped, and
(for compaction) withheld when it looks like a local path or a secret. It must never
stringify a container: ``str()`` of a dict or list would copy whatever nested raw material
it holds into the output, and a deeply nested one raises RecursionError.
"""

from __future__ import annotations

import re

ELLIPSIS = "..."

# A text that matches any of these is dropped from a compact projection, not redacted in
# place: a half-masked secret or path is still a leak and still a false "safe" signal.
LOCAL_PATH_PATTERNS: tuple[str, ...] = (
    r"(?:^|[\s'\"(=:,\[])/(?:Users|home|root|private|var/folders|var/log|tmp|Volumes|mnt|opt"
    r"|etc|srv|workspace)/",
    r"(?:^|[\s'\"(=:,\[])~[/\\]",
    r"\b[A-Za-z]:\\",
    r"\\\\[A-Za-z0-9._$-]+\\",
    r"\bfile://",
)
SECRET_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_-]{16,}",
    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bAIza[0-9A-Za-z_-]{30,}",
    r"(?i:\bbearer\s+[A-Za-z0-9._~+/=-]{12,})",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.",
    # A credential-named key with a value, also as the tail of a longer name (client_secret=).
    r"(?i:(?:\b|_)(?:password|passwd|secret|api[_-]?key|access[_-]?(?:token|key)|token|ak|sk)"
    r"\s*[:=]\s*\S)",
    r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{8,}",
    r"(?i:\bauthorization\s*[:=]\s*\S)",
    r"(?i:\bbasic\s+[A-Za-z0-9+/]{8,}={0,2})",
    r"(?i:\b[a-z][a-z0-9+.-]*://[^\s/@:]+:[^\s/@]+@)",  # user:password@ in a URL
)

# Compiled on first use, not at import: the three patterns take about 5 ms to compile, and
# most commands (a status with no goals, a chat turn) import this module and never check a
# text.
_unsafe_text: re.Pattern[str] | None = None
# The same patterns by class, so a refusal can say which kind of text it saw (never the text).
_unsafe_text_classes: tuple[tuple[str, re.Pattern[str]], ...] | None = None


def _any_unsafe() -> re.Pattern[str]:
    global _unsafe_text
    if _unsafe_text is None:
        _unsafe_text = re.compile(
            "|".join(f"(?:{p})" for p in (*LOCAL_PATH_PATTERNS, *SECRET_PATTERNS))
        )
    return _unsafe_text


def _unsafe_classes() -> tuple[tuple[str, re.Pattern[str]], ...]:
    global _unsafe_text_classes
    if _unsafe_text_classes is None:
        _unsafe_text_classes = (
            ("secret", re.compile("|".join(f"(?:{p})" for p in SECRET_PATTERNS))),
            ("local_path", re.compile("|".join(f"(?:{p})" for p in LOCAL_PATH_PATTERNS))),
        )
    return _unsafe_text_classes


def scalar_str(value: object) -> str | None:
    """The text of a JSON scalar (str, int, float, bool); None for anything else."""
    kind = type(value)
    if isinstance(value, str):
        # A str subclass may override __str__; its characters are what the fact says.
        return value if kind is str else str.__str__(value)
    if kind is bool:
        return "True" if value else "False"
    # bool cannot be subclassed, so every other int or float, subclasses included, gets the
    # base type's own repr (a subclass's __str__ or __repr__ may say anything).
    if isinstance(value, float):
        return float.__repr__(value)
    if isinstance(value, int):
        try:
            return int.__repr__(value)
        except ValueError:  # an int beyond the interpreter's digit limit
            pass
    return None


def collapse(value: object) -> str | None:
    """Scalar text with whitespace runs collapsed and ends trimmed; None when empty."""
    raw = scalar_str(value)
    if raw is None:
        return None
    collapsed = " ".join(raw.split())
    return collapsed or None


# A free-text field a projection or adapter writes (a summary, a reason, a next action) is cut
# to this many characters: the one length for that meaning across the projection core.
PROJECTED_TEXT_LIMIT = 180


def truncate(text: str, limit: int) -> str:
    # The contract's rule, kept exactly: limit-1 chars, right-stripped, then "...". A capped
    # text can therefore be up to limit+2 chars long (other tools already read that shape).
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


def text(value: object, limit: int = PROJECTED_TEXT_LIMIT) -> str | None:
    # The plain-str branch is inlined because this runs for every id of every item.
    if type(value) is str:
        collapsed = " ".join(value.split())
    else:
        raw = scalar_str(value)
        if raw is None:
            return None
        collapsed = " ".join(raw.split())
    if not collapsed:
        return None
    return collapsed if len(collapsed) <= limit else truncate(collapsed, limit)


def is_public_safe(collapsed: str) -> bool:
    return (_unsafe_text or _any_unsafe()).search(collapsed) is None


def unsafe_text_class(collapsed: str) -> str | None:
    """`secret` or `local_path` when the compact filter would drop this text, else None."""
    if is_public_safe(collapsed):
        return None
    return next(name for name, pattern in _unsafe_classes() if pattern.search(collapsed))


def public_safe_text(value: object, limit: int) -> str | None:
    """Compact text, or None when it looks like a local path or a secret.

    The check runs before truncation, so a cap cannot cut a secret into an unrecognizable
    but still leaking prefix.
    """
    collapsed = collapse(value)
    if collapsed is None or not is_public_safe(collapsed):
        return None
    return truncate(collapsed, limit)


def public_safe_list(values: object, *, item_limit: int, max_items: int) -> list[str]:
    """Up to ``max_items`` public-safe texts from a list; unsafe and empty entries dropped."""
    if not isinstance(values, list | tuple):
        return []
    kept: list[str] = []
    for value in values:
        safe = public_safe_text(value, item_limit)
        if safe is not None:
            kept.append(safe)
            if len(kept) >= max_items:
                break
    return kept

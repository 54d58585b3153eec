"""What codex says while a turn cannot go on (`error` with `willRetry`), as one line of ours.

Owns the table of codex's `codexErrorInfo` kinds a retry names and the few words the owner
reads for each, and the line itself: "codex cannot reach its model
(responseStreamDisconnected); retrying, attempt 2". PURE: no I/O.

It must never pass on codex's own message or details (they can carry a URL, a path or a
provider's answer): only the kind, checked to be a bare identifier, and the attempt count.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# codexErrorInfo kind -> what the owner reads (seen on codex 0.160.0-0.171.0 with the model
# provider's port closed: responseStreamDisconnected; with it refusing: the HTTP kinds).
RETRY_REASONS: Mapping[str, str] = {
    "responseStreamDisconnected": "cannot reach its model",
    "responseStreamConnectionFailed": "cannot reach its model",
    "httpConnectionFailed": "cannot reach its model",
    "unauthorized": "is not signed in for its model provider",
    "usageLimitExceeded": "has hit a usage limit",
    "serverOverloaded": "finds its model provider overloaded",
    "internalServerError": "gets server errors from its model provider",
    "responseTooManyFailedAttempts": "cannot get an answer from its model",
}
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")


def error_kind(params: Mapping[str, Any]) -> str | None:
    """The `codexErrorInfo` kind of an `error` notification, if it is a bare identifier."""
    error = params.get("error")
    info = error.get("codexErrorInfo") if isinstance(error, Mapping) else None
    kind = next(iter(info), None) if isinstance(info, Mapping) else info
    return kind if isinstance(kind, str) and _KIND.match(kind) else None


def retry_notice(params: Mapping[str, Any], attempt: int) -> str | None:
    """The owner's line for an `error` notification codex will retry after; None otherwise."""
    if params.get("willRetry") is not True:
        return None
    kind = error_kind(params)
    reason = RETRY_REASONS.get(kind or "", "reports an error")
    named = f" ({kind})" if kind else ""
    return f"codex {reason}{named}; retrying, attempt {attempt}"

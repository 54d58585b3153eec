"""Who may use the service: the owner's secret, as a bearer token or as the page's cookie.

Pure: a request's method, path, query and headers and the secret in; a decision out. Loopback
is shared by every local user and process, so everything but a bare `GET /healthz` needs the
secret: `Authorization: Bearer <secret>` from programs, or the `HttpOnly; SameSite=Strict`
cookie that the login URL (`/?token=<secret>`) sets before it redirects to `/` without the
token. Comparisons are constant-time. The secret is never part of a decision's text, so no
refusal, log line or page can carry it.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import parse_qsl

COOKIE_NAME = "loopx_chat_owner"
HEALTH_PATH = "/healthz"
# A program may say which of the owner's surfaces it speaks for (the CLI delegating to the
# service says `cli`); a page, authenticated by its cookie, is always the page.
SURFACE_HEADER = "x-loopx-surface"
PROGRAM_SURFACES = frozenset({"api", "cli"})


class Access(StrEnum):
    HEALTH = "health"  # the bare health check: says only that the service is up
    LOGIN = "login"  # the login URL with the right secret: set the cookie, redirect to /
    OWNER = "owner"  # the secret came with the request
    REFUSED = "refused"


@dataclass(frozen=True)
class AccessDecision:
    access: Access
    # Through which of the owner's surfaces: `page` (the cookie), `api` or `cli` (a bearer).
    surface: str | None = None
    reason: str = ""

    @property
    def actor(self) -> str | None:
        """Who made a decision sent this way, as gate records name it."""
        return f"owner-{self.surface}" if self.surface else None


def _same(sent: str, secret: str) -> bool:
    return hmac.compare_digest(sent.encode("utf-8", "replace"), secret.encode("ascii"))


def bearer(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def cookie(headers: Mapping[str, str]) -> str | None:
    for part in (headers.get("cookie") or "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == COOKIE_NAME:
            return value.strip()
    return None


def login_token(query: str) -> str | None:
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "token":
            return value
    return None


def decide(
    method: str, path: str, query: str, headers: Mapping[str, str], secret: str
) -> AccessDecision:
    """Whether this request may go on, and as whom. Checked before any routing."""
    if path == HEALTH_PATH and method in ("GET", "HEAD") and not query:
        return AccessDecision(Access.HEALTH)
    sent_bearer = bearer(headers)
    if sent_bearer is not None:
        if sent_bearer and _same(sent_bearer, secret):
            surface = (headers.get(SURFACE_HEADER) or "api").strip().lower()
            return AccessDecision(
                Access.OWNER, surface=surface if surface in PROGRAM_SURFACES else "api"
            )
        return AccessDecision(Access.REFUSED, reason="the bearer token is not this service's")
    if path == "/" and method in ("GET", "HEAD"):
        token = login_token(query)
        if token is not None:
            if _same(token, secret):
                return AccessDecision(Access.LOGIN, surface="page")
            return AccessDecision(Access.REFUSED, reason="the login link is not this service's")
    sent_cookie = cookie(headers)
    if sent_cookie and _same(sent_cookie, secret):
        return AccessDecision(Access.OWNER, surface="page")
    return AccessDecision(
        Access.REFUSED,
        reason="this service answers its owner only: open it with `loopx-chat open`",
    )


def login_cookie(secret: str) -> str:
    """The Set-Cookie value the login URL answers with: the browser sends it back only to
    this origin's own pages (SameSite=Strict), and no script can read it (HttpOnly)."""
    return f"{COOKIE_NAME}={secret}; HttpOnly; SameSite=Strict; Path=/"


def wants_html(headers: Mapping[str, str], path: str) -> bool:
    return path == "/" or "text/html" in (headers.get("accept") or "")

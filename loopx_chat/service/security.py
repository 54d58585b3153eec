"""Request checks for a loopback-only service. Pure: headers in, a refusal reason or None out.

DNS rebinding: a browser on a hostile page can reach 127.0.0.1 under the attacker's hostname,
so the `Host` header must name a loopback name (and our port, when it names one). Cross-site
writes: a state-changing request must be JSON (a form post cannot set that type without a
CORS preflight, which we never answer) and carry no Origin or a loopback one. Cross-site
reads: a page elsewhere can still make a browser GET our page (an `<img>`), which would
count as the owner seeing a blocker; browsers say so in `Sec-Fetch-Site`, and anything but
`none` (typed, bookmarked) or `same-origin` is refused. Clients that are not browsers do not
send it.

A public origin (`serve --public-url`, service/public_url.py: the owner's own reverse proxy)
is accepted besides loopback, exactly: its scheme, host and port, nothing else.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from loopx_chat.service.public_url import LOOPBACK_NAMES, PublicOrigin

LOOPBACK_BIND_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _split_host(value: str) -> tuple[str, str | None]:
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, _, port = value.partition(":")
    return host, port or None


def host_refusal(
    host_header: str | None, port: int, public: PublicOrigin | None = None
) -> str | None:
    if not host_header:
        return "a Host header is required"
    host, host_port = _split_host(host_header)
    if public is not None and public.host_matches(host, host_port):
        return None
    if host not in LOOPBACK_NAMES:
        return "the Host header must name localhost, 127.0.0.1 or [::1]"
    if host_port is not None and host_port != str(port):
        return "the Host header names another port"
    return None


def origin_refusal(origin: str | None, port: int, public: PublicOrigin | None = None) -> str | None:
    if origin is None:
        return None
    if public is not None and origin.strip().lower().rstrip("/") == public.origin:
        return None
    parts = urlsplit(origin.strip())
    if parts.scheme != "http" or not parts.hostname:
        return "cross-site requests are refused"
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    try:
        origin_port = parts.port or 80
    except ValueError:
        return "cross-site requests are refused"
    if name.lower() not in LOOPBACK_NAMES or origin_port != port:
        return "cross-site requests are refused"
    return None


def content_type_refusal(content_type: str | None) -> str | None:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        return "state-changing requests must be Content-Type: application/json"
    return None


def fetch_site_refusal(sec_fetch_site: str | None) -> str | None:
    if sec_fetch_site is None:
        return None
    if sec_fetch_site.strip().lower() in ("none", "same-origin"):
        return None
    return "requests started by another site are refused"

"""The origin the owner's own reverse proxy serves the page on (`serve --public-url`). Pure.

The service itself listens on loopback only; a proxy the owner runs (`tailscale serve`,
Caddy) terminates TLS and forwards to it. `--public-url https://HOST[:PORT]` names that one
origin, which the Host and Origin checks then accept besides loopback (service/security.py).
Only `https` is taken (a phone's browser gives WebCrypto to a secure context only, and the
device's signatures must not cross a network in the clear); a plain `http` URL is accepted
for a loopback host only. No path, query, fragment or user info: an origin and nothing else.
It never resolves, connects to or trusts anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from loopx_chat.errors import UsageError

# The names a Host or Origin header may give the loopback interface (security.py checks them).
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})

DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True)
class PublicOrigin:
    scheme: str
    host: str  # lower case; an IPv6 literal in brackets
    port: int

    @property
    def origin(self) -> str:
        """`scheme://host[:port]` as a browser sends it in `Origin` (default port left out)."""
        if self.port == DEFAULT_PORTS[self.scheme]:
            return f"{self.scheme}://{self.host}"
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.origin

    def host_matches(self, host: str, port: str | None) -> bool:
        """A `Host` header's name and port name this origin (no port: the default one)."""
        wanted = None if self.port == DEFAULT_PORTS[self.scheme] else str(self.port)
        return host == self.host and (port == wanted or port == str(self.port))


def _invalid(why: str) -> UsageError:
    return UsageError(
        f"--public-url {why}; give the origin your reverse proxy serves, e.g. "
        "https://mac.tailnet-name.ts.net or https://loopx.home.example:8443",
        error_code="public_url_invalid",
    )


def parse_public_url(text: str) -> PublicOrigin:
    """`https://HOST[:PORT]` (a trailing `/` allowed) as an origin, or `public_url_invalid`."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        raise _invalid("is not a URL with a valid port") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise _invalid("must be an https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _invalid("must not carry a user name or password")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise _invalid("must be an origin only (no path, query or fragment)")
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    if scheme == "http" and host not in LOOPBACK_NAMES:
        raise _invalid(
            "must be https (the phone's browser signs only in a secure context, and its "
            "requests must not cross the network in the clear)"
        )
    return PublicOrigin(scheme, host, port or DEFAULT_PORTS[scheme])

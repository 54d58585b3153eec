"""Ask a running loopx-chat service who it is (`GET /api/chat/capabilities`).

Loopback only, 1 s to connect and 5 s in all, so `status` never hangs on a stuck service.
It reads only the identity fields it reports; it never follows redirects.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass

CONNECT_TIMEOUT_SEC = 1.0
TOTAL_TIMEOUT_SEC = 5.0


@dataclass(frozen=True)
class ServiceProbe:
    answering: bool
    package_version: str | None = None
    detail: str | None = None


def probe_capabilities(host: str, port: int) -> ServiceProbe:
    started = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT_SEC)
    try:
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(max(0.1, TOTAL_TIMEOUT_SEC - (time.monotonic() - started)))
        conn.request("GET", "/api/chat/capabilities", headers={"Host": f"127.0.0.1:{port}"})
        response = conn.getresponse()
        body = response.read(1 << 20)
    except (OSError, http.client.HTTPException) as exc:
        return ServiceProbe(answering=False, detail=type(exc).__name__)
    finally:
        conn.close()
    if response.status != 200:
        return ServiceProbe(answering=False, detail=f"HTTP {response.status}")
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return ServiceProbe(answering=False, detail="not JSON")
    identity = doc.get("runtime_identity") if isinstance(doc, dict) else None
    version = identity.get("package_version") if isinstance(identity, dict) else None
    if not (isinstance(doc, dict) and doc.get("schema_version") == "loopx_chat_capabilities_v1"):
        return ServiceProbe(answering=False, detail="not a loopx-chat capabilities document")
    return ServiceProbe(
        answering=True, package_version=version if isinstance(version, str) else None
    )

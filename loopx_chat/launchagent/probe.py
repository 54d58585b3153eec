"""Ask a running loopx-chat service who it is: `GET /api/chat/capabilities` and `/status.json`.

Loopback only, 1 s to connect and 5 s in all per request, so `status` never hangs on a stuck
service; it sends the owner's secret, which the service asks of every caller. It reads only
identity fields: the package version and bound home (capabilities),
and the status contract (`schema_version`, `contract_version`); it never follows redirects
and never reports anything else the documents hold.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from loopx_chat import __version__

CONNECT_TIMEOUT_SEC = 1.0
TOTAL_TIMEOUT_SEC = 5.0


@dataclass(frozen=True)
class ServiceProbe:
    answering: bool
    package_version: str | None = None
    detail: str | None = None
    contract: str | None = None  # e.g. "loopx_chat_status_v1 (contract 2)"
    codex_home: str | None = None


def _get_json(
    host: str, port: int, path: str, secret: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    started = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT_SEC)
    try:
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(max(0.1, TOTAL_TIMEOUT_SEC - (time.monotonic() - started)))
        headers = {"Host": f"127.0.0.1:{port}"}
        if secret:
            headers["Authorization"] = f"Bearer {secret}"
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read(1 << 20)
    except (OSError, http.client.HTTPException) as exc:
        return None, type(exc).__name__
    finally:
        conn.close()
    if response.status != HTTPStatus.OK:
        return None, f"HTTP {response.status}"
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None, "not JSON"
    return (doc, None) if isinstance(doc, dict) else (None, "not a JSON object")


def probe_capabilities(host: str, port: int, secret: str | None = None) -> ServiceProbe:
    """Who answers on `port`, asked with the owner's secret (without it, a loopx-chat service
    refuses us, reported as such)."""
    doc, problem = _get_json(host, port, "/api/chat/capabilities", secret)
    if doc is None:
        return ServiceProbe(answering=False, detail=problem)
    if doc.get("schema_version") != "loopx_chat_capabilities_v1":
        return ServiceProbe(answering=False, detail="not a loopx-chat capabilities document")
    identity = doc.get("runtime_identity")
    version = identity.get("package_version") if isinstance(identity, dict) else None
    home = doc.get("codex_home")
    home_path = home.get("path") if isinstance(home, dict) else None
    status, _ = _get_json(host, port, "/status.json", secret)
    contract = None
    if status is not None and isinstance(status.get("schema_version"), str):
        contract = str(status["schema_version"])
        if isinstance(status.get("contract_version"), int):
            contract += f" (contract {status['contract_version']})"
    return ServiceProbe(
        answering=True,
        package_version=version if isinstance(version, str) else None,
        contract=contract,
        codex_home=home_path if isinstance(home_path, str) else None,
    )


def service_facts(
    probe: ServiceProbe, bound: str | None, *, unit: str, restart: str
) -> tuple[dict[str, Any], list[str]]:
    """(the `service` block of a status report, its warnings): who answers, and whether its
    version and home are the installed ones (`unit` names what binds the home, `restart` the
    command that fixes a difference). Shared by the LaunchAgent and the systemd service."""
    facts = {
        "answering": probe.answering,
        "package_version": probe.package_version,
        "installed_version": __version__,
        "version_matches": probe.package_version == __version__ if probe.answering else None,
        "contract": probe.contract,
        "codex_home": probe.codex_home,
        "detail": probe.detail,
    }
    warnings = []
    if probe.answering and probe.package_version != __version__:
        warnings.append(
            f"the running service is version {probe.package_version}, the installed "
            f"package is {__version__}: run `{restart}`"
        )
    if probe.answering and probe.codex_home and bound and probe.codex_home != bound:
        warnings.append(
            f"the running service uses Codex home {probe.codex_home}, the {unit} binds "
            f"{bound}: run `{restart}`"
        )
    return facts, warnings

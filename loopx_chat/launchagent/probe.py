"""Ask a running loopx-chat service who it is: `GET /api/chat/capabilities` and `/status.json`.

Over the owner's Unix socket in the service's state dir, whose peer must prove it runs as
this user before anything is sent (state/owner_socket.py): no secret is sent at all, so a
squatter on the service's TCP port after a crash learns nothing. 1 s to connect and 5 s in
all per request, so `status` never hangs on a stuck service. It reads only
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
from pathlib import Path
from typing import Any

from loopx_chat import __version__
from loopx_chat.state import owner_socket

CONNECT_TIMEOUT_SEC = 1.0
TOTAL_TIMEOUT_SEC = 5.0


@dataclass(frozen=True)
class ServiceProbe:
    answering: bool
    package_version: str | None = None
    detail: str | None = None
    contract: str | None = None  # e.g. "loopx_chat_status_v1 (contract 2)"
    codex_home: str | None = None


def _get_json(state_dir: Path, path: str) -> tuple[dict[str, Any] | None, str | None]:
    started = time.monotonic()
    conn = http.client.HTTPConnection("localhost", timeout=CONNECT_TIMEOUT_SEC)
    try:
        conn.sock = owner_socket.connect(state_dir, CONNECT_TIMEOUT_SEC)
        conn.sock.settimeout(max(0.1, TOTAL_TIMEOUT_SEC - (time.monotonic() - started)))
        conn.request("GET", path, headers={"Host": "localhost"})
        response = conn.getresponse()
        body = response.read(1 << 20)
    except FileNotFoundError:
        return None, "no service socket in its state dir"
    except ConnectionRefusedError:
        return None, "its socket is stale (the service is gone)"
    except owner_socket.NotOwnerPeer:
        return None, "its socket is not this user's"
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


def probe_capabilities(state_dir: Path) -> ServiceProbe:
    """Who answers on the owner's socket of `state_dir` (nobody: not answering, and why)."""
    doc, problem = _get_json(state_dir, "/api/chat/capabilities")
    if doc is None:
        return ServiceProbe(answering=False, detail=problem)
    if doc.get("schema_version") != "loopx_chat_capabilities_v1":
        return ServiceProbe(answering=False, detail="not a loopx-chat capabilities document")
    identity = doc.get("runtime_identity")
    version = identity.get("package_version") if isinstance(identity, dict) else None
    home = doc.get("codex_home")
    home_path = home.get("path") if isinstance(home, dict) else None
    status, _ = _get_json(state_dir, "/status.json")
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

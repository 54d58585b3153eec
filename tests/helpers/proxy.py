"""The owner's reverse proxy with TLS, for tests: Debian's Caddy with its internal CA in front
of a loopback `serve --public-url`, and an HTTPS client that trusts that CA only.

Caddy serves `PUBLIC_HOST` (and `OTHER_HOST`, so that a request naming another host reaches
the service through the same proxy and can be seen refused there) on a free loopback port,
its storage, config and home in the test's folder; no admin endpoint, no redirects, nothing
installed into any trust store. Missing caddy: a skip locally, a failure under CI.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.serve_process import free_port

PUBLIC_HOST = "phone-test.example"
OTHER_HOST = "other.example"


def caddy() -> str:
    exe = shutil.which("caddy")
    if exe is None:
        message = "Debian caddy is missing; tools/ensure-system-tools.sh installs it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return exe


@dataclass
class Proxy:
    proc: subprocess.Popen[bytes]
    port: int
    folder: Path

    @property
    def origin(self) -> str:
        return f"https://{PUBLIC_HOST}:{self.port}"

    @property
    def root_ca(self) -> Path:
        return self.folder / "data" / "pki" / "authorities" / "local" / "root.crt"

    def request(
        self,
        method: str,
        path: str,
        *,
        host: str = PUBLIC_HOST,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> tuple[int, Any]:
        """One request through the proxy, TLS checked against Caddy's own CA, to `host`
        (its SNI and Host header) at 127.0.0.1."""
        context = ssl.create_default_context(cafile=str(self.root_ca))
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        conn = http.client.HTTPSConnection(host, self.port, timeout=30, context=context)
        conn.sock = context.wrap_socket(sock, server_hostname=host)
        data = None if body is None else json.dumps(body).encode()
        sent = {"Host": f"{host}:{self.port}", **(headers or {})}
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        conn.close()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(raw) if "json" in kind else raw.decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_caddy(folder: Path, upstream_port: int, port: int | None = None) -> Proxy:
    """Caddy on `port` (a free one) proxying both test hosts to 127.0.0.1:`upstream_port`."""
    exe = caddy()
    folder.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    config = folder / "Caddyfile"
    config.write_text(
        "{\n\tadmin off\n\tauto_https disable_redirects\n\tskip_install_trust\n"
        f"\tlocal_certs\n\thttp_port {free_port()}\n\thttps_port {port}\n"
        f"\tstorage file_system {folder / 'data'}\n}}\n"
        f"https://{PUBLIC_HOST}:{port}, https://{OTHER_HOST}:{port} {{\n"
        f"\ttls internal\n\treverse_proxy 127.0.0.1:{upstream_port}\n}}\n"
    )
    env = {
        "HOME": str(folder),
        "XDG_DATA_HOME": str(folder / "xdg"),
        "XDG_CONFIG_HOME": str(folder / "xdg"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    log = (folder / "caddy.log").open("wb")
    proc = subprocess.Popen(
        [exe, "run", "--config", str(config), "--adapter", "caddyfile"],
        env=env,
        stdout=log,
        stderr=log,
    )
    proxy = Proxy(proc, port, folder)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if proxy.root_ca.exists():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return proxy
            except OSError:
                pass
        time.sleep(0.1)
    proxy.stop()
    raise AssertionError(f"caddy did not start: {(folder / 'caddy.log').read_text()[-2000:]}")

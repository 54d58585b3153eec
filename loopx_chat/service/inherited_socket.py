"""A listening socket handed over by the service manager (systemd socket activation).

Owns the receiving side of sd_listen_fds(3): when `LISTEN_PID` is this process and
`LISTEN_FDS` is 1, file descriptor 3 is a socket systemd already bound and listens on
(`loopx-chat.socket`), and `serve` accepts on it instead of binding its own, so the port
stays held while the service restarts. The variables are removed from the environment
(as `sd_listen_fds(1)` does) and the descriptor is made close-on-exec, so no codex child
inherits either. A socket that is not a listening TCP socket on loopback is refused; it
never binds, listens or connects anything itself.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping, MutableMapping

from loopx_chat.errors import UsageError
from loopx_chat.service.server import LoopbackServer

SD_LISTEN_FDS_START = 3
LISTEN_VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def listen_fds(environ: Mapping[str, str], pid: int) -> list[int]:
    """The descriptors passed to `pid`, as sd_listen_fds(3) counts them ([] when none)."""
    count = environ.get("LISTEN_FDS", "")
    if environ.get("LISTEN_PID") != str(pid) or not (count.isascii() and count.isdigit()):
        return []
    return list(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + int(count)))


def _refused(detail: str) -> UsageError:
    return UsageError(
        f"the socket systemd passed cannot be served: {detail}. Fix ListenStream= in "
        "loopx-chat.socket (127.0.0.1:PORT), or run `loopx-chat service install` again",
        error_code="inherited_socket_invalid",
    )


def inherited_listener(*environs: MutableMapping[str, str]) -> socket.socket | None:
    """The one listening loopback socket systemd passed, or None. The LISTEN_* variables
    are removed from every environment given (the first is the one read)."""
    fds = listen_fds(environs[0], os.getpid()) if environs else []
    for environ in environs:
        for name in LISTEN_VARIABLES:
            environ.pop(name, None)
    if not fds:
        return None
    if len(fds) != 1:
        raise _refused(f"{len(fds)} sockets, loopx-chat serves one")
    try:
        sock = socket.socket(fileno=fds[0])
    except OSError as exc:
        raise _refused(f"descriptor {fds[0]} is not a socket ({exc.strerror})") from None
    return checked_listener(sock)


def checked_listener(sock: socket.socket, manager: str = "systemd") -> socket.socket:
    """`sock`, close-on-exec, when it is a listening stream socket on loopback; else it is
    closed and refused (launchd's socket is checked the same way)."""
    sock.set_inheritable(False)
    listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    if sock.type != socket.SOCK_STREAM or not listening:
        sock.close()
        raise _refused("it is not a listening stream socket")
    if (
        sock.family not in (socket.AF_INET, socket.AF_INET6)
        or not ipaddress.ip_address(sock.getsockname()[0]).is_loopback
    ):
        sock.close()
        where = "ListenStream=127.0.0.1:PORT" if manager == "systemd" else "SockNodeName 127.0.0.1"
        raise UsageError(
            f"refusing the socket {manager} passed: loopx-chat serves loopback only ({where})",
            error_code="non_loopback_host",
        )
    return sock


def server_class(listener: socket.socket | None) -> type[LoopbackServer]:
    """`LoopbackServer`, or one that serves `listener` instead of binding its own."""
    if listener is None:
        return LoopbackServer
    inherited: socket.socket = listener

    class InheritedServer(LoopbackServer):
        def server_bind(self) -> None:
            self.socket.close()
            self.socket = inherited
            self.server_address = inherited.getsockname()
            self.server_name, self.server_port = str(self.server_address[0]), self.port

        def server_activate(self) -> None:
            """systemd already listens on it (with its own backlog)."""

    return InheritedServer

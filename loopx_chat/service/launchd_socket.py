"""A listening socket handed over by launchd (the LaunchAgent's `Sockets` key).

Owns the receiving side of `launch_activate_socket(3)`: under launchd, with the plist's
`Sockets.Listeners` entry, launchd binds 127.0.0.1:PORT itself and keeps it bound while the
service restarts, so another user can never take the port between two runs; `serve` asks for
that socket and serves it instead of binding its own. Anywhere else (not macOS, not started by
launchd, no such entry) it answers None and `serve` binds as before. It never binds, listens
or connects anything itself; the socket it returns is checked as one systemd passes is
(`inherited_socket.checked_listener`). Tested here only off macOS (it answers None): the
call itself runs on macOS alone.
"""

from __future__ import annotations

import ctypes
import socket
import sys

from loopx_chat.service.inherited_socket import checked_listener

LISTENERS = b"Listeners"


def launchd_listener() -> socket.socket | None:
    """The socket launchd holds for this job's `Listeners`, or None."""
    if sys.platform != "darwin":
        return None
    try:
        libc = ctypes.CDLL(None)
        activate = libc.launch_activate_socket
    except (OSError, AttributeError):
        return None
    activate.argtypes = [
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_int)),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    activate.restype = ctypes.c_int
    fds = ctypes.POINTER(ctypes.c_int)()
    count = ctypes.c_size_t(0)
    # Non-zero: not started by launchd (ESRCH), or no such entry in the plist (ENOENT).
    if activate(LISTENERS, ctypes.byref(fds), ctypes.byref(count)) != 0 or count.value < 1:
        return None
    try:
        found = [fds[i] for i in range(count.value)]
    finally:
        libc.free(fds)
    for extra in found[1:]:  # one entry, one address: any other is closed, never served
        socket.socket(fileno=extra).close()
    return checked_listener(socket.socket(fileno=found[0]), "launchd")

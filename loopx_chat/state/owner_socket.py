"""The owner's own channel to the service: a Unix socket in the 0700 state dir.

Owns where the socket lives (`service.sock` beside `service.json`), reaching it when its path
is longer than `sun_path` allows (through `/proc/self/fd/N` of the directory on Linux), and
the peer check both ends make: the other end's uid must be this process's uid (`SO_PEERCRED`
on Linux, `LOCAL_PEERCRED` on macOS), else nothing is sent and nothing is answered.

The docker CLI reaches dockerd the same way: the folder's permissions say who may connect,
and the peer credentials say who answered. A stale `service.json`, a reused pid or a squatter
on the service's TCP port never gets a byte from the owner's CLI, because the CLI never speaks
TCP. Standard library only (the delegating CLI imports it before anything else).
It never sends or stores a secret: proving the uid is the whole of the authentication.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

SOCKET_FILE = "service.sock"
# Held (flock) for the life of the one service that serves this state dir: the kernel lets
# it go when that process dies, however it dies, so a second service can never start beside
# a live one, and two that start together cannot both replace a stale socket.
CLAIM_FILE = "service.lock"
_claims: dict[Path, int] = {}
# sun_path is 108 bytes on Linux and 104 on macOS, the terminating NUL included.
_SUN_PATH_MAX = 103


class NotOwnerPeer(OSError):
    """The process at the other end of the socket is not this user's."""


class AlreadyServed(OSError):
    """Another live service holds this state dir's claim."""


def _claim(state_dir: Path) -> None:
    key = state_dir.resolve()
    fd = os.open(
        state_dir / CLAIM_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
    )
    try:
        if os.fstat(fd).st_uid != os.getuid():
            raise NotOwnerPeer(f"{state_dir / CLAIM_FILE} is not this user's; remove it yourself")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise AlreadyServed(
                    errno.EADDRINUSE, "another loopx-chat service already serves this state dir"
                ) from None
            raise
    except BaseException:
        os.close(fd)
        raise
    _claims[key] = fd


def _release(state_dir: Path) -> None:
    fd = _claims.pop(state_dir.resolve(), None)
    if fd is not None:
        os.close(fd)  # closing the only descriptor lets the flock go


def socket_path(state_dir: Path) -> Path:
    return state_dir / SOCKET_FILE


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for `path` that fits in `sun_path`: the path itself, or on Linux the same file
    reached through an open descriptor of its folder (valid while the context is open)."""
    text = os.fsencode(path)
    if len(text) <= _SUN_PATH_MAX:
        yield str(path)
        return
    if not sys.platform.startswith("linux"):
        raise OSError(
            f"the state dir's path is too long for a Unix socket ({len(text)} bytes); "
            "set LOOPX_CHAT_STATE_DIR to a shorter one"
        )
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket."""
    if sys.platform.startswith("linux"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        return int(uid)
    # macOS: SOL_LOCAL (0) / LOCAL_PEERCRED (1) gives a struct xucred: version, uid, groups.
    raw = sock.getsockopt(0, 1, struct.calcsize("Ii16I") + 4)
    _version, uid = struct.unpack_from("Ii", raw)
    return int(uid)


def check_peer(sock: socket.socket) -> None:
    uid = peer_uid(sock)
    if uid != os.getuid():
        raise NotOwnerPeer(f"the socket's peer runs as uid {uid}, not this user")


def connect(state_dir: Path, timeout: float) -> socket.socket:
    """A connection to this state dir's service that has proven it runs as this user.
    OSError (FileNotFoundError: no service; ConnectionRefusedError: a stale socket;
    NotOwnerPeer) before anything is sent."""
    path = socket_path(state_dir)
    info = os.lstat(path)
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
        raise NotOwnerPeer("the service socket is not this user's")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        with reachable(path) as name:
            sock.connect(name)
        check_peer(sock)
        return sock
    except BaseException:
        sock.close()
        raise


def listen(state_dir: Path, backlog: int = 64) -> socket.socket:
    """The service's listening socket (0600 in the 0700 state dir), with the state dir's
    claim held until `remove`: `AlreadyServed` while another live service holds it. A socket
    left by a service that died is ours to replace; anything else at that name is refused,
    never removed."""
    _claim(state_dir)
    try:
        return _bind(state_dir, backlog)
    except BaseException:
        _release(state_dir)
        raise


def _bind(state_dir: Path, backlog: int) -> socket.socket:
    path = socket_path(state_dir)
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(path)
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
            raise NotOwnerPeer(f"{path} is not a socket of this user; remove it yourself")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with reachable(path) as name:
                probe.connect(name)
        except ConnectionRefusedError:
            os.unlink(path)  # nobody listens: the file of a service that died
        else:
            raise OSError(f"another service already listens on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            with reachable(path) as name:
                sock.bind(name)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(backlog)
        return sock
    except BaseException:
        sock.close()
        raise


def remove(state_dir: Path, sock: socket.socket) -> None:
    """Remove the socket file if it is still the one `sock` is bound to, and let the state
    dir's claim go."""
    try:
        _remove_file(state_dir, sock)
    finally:
        _release(state_dir)


def _remove_file(state_dir: Path, sock: socket.socket) -> None:
    path = socket_path(state_dir)
    with contextlib.suppress(OSError):
        mine = os.fstat(sock.fileno())
        there = os.lstat(path)
        # A bound socket's fstat does not give the file's inode everywhere; compare owner and
        # kind, and only remove while our socket is still open (a newer service's stays).
        if stat.S_ISSOCK(there.st_mode) and there.st_uid == mine.st_uid:
            os.unlink(path)

"""`serve` on a port in use: the refusal names `--port` and, when it can be seen, what holds
the port (a real bound socket; this state dir's own service from its `service.json`)."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopx_chat.service.port_holder import PortHolder, find_holder, listen_refusal
from loopx_chat.state.service_runtime import runtime_for_this_process, write_runtime


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def _bind_error(port: int) -> OSError:
    with socket.socket() as again:
        with pytest.raises(OSError) as caught:
            again.bind(("127.0.0.1", port))
    return caught.value


def test_a_port_held_by_a_process_names_it_and_the_flag(tmp_path: Path, taken_port: int) -> None:
    exc = _bind_error(taken_port)
    assert exc.errno == errno.EADDRINUSE
    holder = find_holder(taken_port, tmp_path / "state")
    assert holder is not None and holder.pid == os.getpid() and not holder.our_service
    refusal = listen_refusal("127.0.0.1", taken_port, exc, holder)
    assert refusal.error_code == "listen_failed"
    assert refusal.message.startswith(f"cannot listen on 127.0.0.1:{taken_port}: ")
    assert refusal.remedy is not None
    assert (
        refusal.remedy.summary
        == f"Port {taken_port} is in use by {holder.name} (pid {os.getpid()})."
    )
    assert f"`loopx-chat serve --port {taken_port + 1}`" in refusal.remedy.next_action
    assert "`--port 0`" in refusal.remedy.next_action
    assert str(tmp_path) not in str(refusal.to_dict())


def test_this_state_dirs_own_service_is_named_as_such(tmp_path: Path, taken_port: int) -> None:
    state = tmp_path / "state"
    write_runtime(state, runtime_for_this_process(taken_port, "0", tmp_path, "now"))
    holder = find_holder(taken_port, state)
    assert holder == PortHolder(pid=os.getpid(), name="loopx-chat", our_service=True)
    refusal = listen_refusal("127.0.0.1", taken_port, _bind_error(taken_port), holder)
    assert refusal.remedy is not None
    assert refusal.remedy.summary == "loopx-chat already serves this state dir on that port."
    assert "`loopx-chat open`" in refusal.remedy.next_action


def test_a_free_port_has_no_holder_and_an_unknown_holder_still_gets_the_flag(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = int(probe.getsockname()[1])  # bound, never listening: nobody holds it after
    assert find_holder(free, tmp_path) is None
    busy = OSError(errno.EADDRINUSE, "Address already in use")
    refusal = listen_refusal("127.0.0.1", 65535, busy, None)
    assert refusal.remedy is not None and "--port 8768" in refusal.remedy.next_action
    denied = listen_refusal("127.0.0.1", 80, OSError(errno.EACCES, "Permission denied"), None)
    assert denied.remedy is not None and "above 1023" in denied.remedy.next_action


def test_where_only_root_may_list_every_socket_our_own_processes_are_looked_at(
    tmp_path: Path, taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS answers `net_connections` with AccessDenied for a user who is not root (that
    refusal is the one fake here); each process of ours is then asked for its own sockets."""
    import psutil

    def refused(kind: str = "inet") -> list[object]:
        raise psutil.AccessDenied()

    monkeypatch.setattr(psutil, "net_connections", refused)
    holder = find_holder(taken_port, tmp_path / "state")
    assert holder is not None and holder.pid == os.getpid() and not holder.our_service

"""Waiting on work that runs elsewhere: a blocking call on a thread, a condition polled."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def run_in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, object]]:
    """Run `fn` (a blocking turn) on a thread; its result or exception lands in the box."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # reported through the box
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll `predicate` every 50 ms; fail the test when it is still false after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def wait_value(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "it") -> Any:
    """Poll `predicate` every 50 ms until it returns something truthy, and return that; fail
    the test, naming `what`, when it has not after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def joined(thread: threading.Thread, box: dict[str, object], timeout: float = 60.0) -> Any:
    """The result `run_in_thread` boxed, once its thread ended; its exception re-raised."""
    thread.join(timeout)
    assert not thread.is_alive(), "the call did not end in time"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"]

"""A per-key table that a long-running process never lets grow with every key it has seen.

Owns `UsedTable`: one value per key (a session's locks), made on first use, kept for as
long as any caller is inside `using(key)`, and afterwards among the `keep_idle` most
recently used idle keys; beyond those, the least recently used idle key's value is
forgotten, and made anew on its next use. This is the one eviction rule for what a process
keeps per session (the session store's locks, the warm threads' session locks).

It never forgets a value a caller is using, does no I/O and holds no lock while the caller
works.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

V = TypeVar("V")


class UsedTable(Generic[V]):
    """Values by key, kept while used and for the `keep_idle` most recently used idle keys."""

    def __init__(self, make: Callable[[], V], keep_idle: int) -> None:
        self._make = make
        self._keep_idle = keep_idle
        self._guard = threading.Lock()
        self._values: dict[str, V] = {}
        # Callers inside `using` per key, and the keys none is in, least recently used first.
        self._users: dict[str, int] = {}
        self._idle: OrderedDict[str, None] = OrderedDict()

    @contextmanager
    def using(self, key: str) -> Iterator[V]:
        """The key's value, kept for as long as the caller is inside."""
        with self._guard:
            value = self._values.get(key)
            if value is None:
                value = self._values[key] = self._make()
            self._users[key] = self._users.get(key, 0) + 1
            self._idle.pop(key, None)
        try:
            yield value
        finally:
            self._let_go(key)

    def _let_go(self, key: str) -> None:
        with self._guard:
            users = self._users[key] - 1
            if users:
                self._users[key] = users
                return
            del self._users[key]
            self._idle[key] = None
            while len(self._idle) > self._keep_idle:
                old, _ = self._idle.popitem(last=False)
                del self._values[old]

    def get(self, key: str) -> V | None:
        """The key's value if one is kept now (never makes one)."""
        with self._guard:
            return self._values.get(key)

    def __len__(self) -> int:
        with self._guard:
            return len(self._values)

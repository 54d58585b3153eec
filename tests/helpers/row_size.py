"""The bytes one in-memory row holds on its own: what a long-lived table pays per row.

`own_bytes(row, others)` is the `sys.getsizeof` of every object reachable from `row` that is
not also reachable from one of `others` (so a word every row shares, an interned kind or a
constant, is not counted against each row). It follows containers, `__dict__` and
`__slots__`; never classes, functions or modules. Used by tests that pin a table's row size.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable, Iterator

_LEAVES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def _children(obj: object) -> Iterator[object]:
    if isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
    elif isinstance(obj, (list, tuple, set, frozenset)):
        yield from obj
    elif isinstance(obj, types.MappingProxyType):
        yield from obj.items()
    elif not isinstance(obj, (str, bytes, int, float, bool)) and obj is not None:
        if hasattr(obj, "__dict__"):
            yield obj.__dict__
        for cls in type(obj).__mro__:
            for slot in cls.__dict__.get("__slots__", ()):
                if hasattr(obj, slot) and slot not in ("__dict__", "__weakref__"):
                    yield getattr(obj, slot)


def _reach(roots: Iterable[object]) -> dict[int, object]:
    seen: dict[int, object] = {}
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _LEAVES) or obj is None or type(obj) is bool:
            continue
        seen[id(obj)] = obj
        stack.extend(_children(obj))
    return seen


def own_bytes(row: object, others: Iterable[object] = ()) -> int:
    """Bytes reachable from `row` and from none of `others`."""
    shared = _reach(others)
    return sum(sys.getsizeof(o) for k, o in _reach([row]).items() if k not in shared)

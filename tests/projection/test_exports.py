"""The projection core's public names: each one `__all__` lists resolves, on first use, to the
object its defining module has; unknown names are an AttributeError; a resolved name is then
a plain attribute (no second lookup)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import loopx_chat.session_runtime as session_runtime

SUBMODULES = [
    importlib.import_module(f"{session_runtime.__name__}.{info.name}")
    for info in pkgutil.iter_modules(session_runtime.__path__)
]


@pytest.mark.parametrize("name", session_runtime.__all__)
def test_each_public_name_resolves_to_its_modules_object(name: str) -> None:
    vars(session_runtime).pop(name, None)  # resolved afresh, whatever ran before
    value = getattr(session_runtime, name)
    assert any(name in vars(m) and vars(m)[name] is value for m in SUBMODULES)
    assert vars(session_runtime)[name] is value  # the next use is a plain attribute read


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec(f"from {session_runtime.__name__} import *", namespace)
    assert set(session_runtime.__all__) <= set(namespace)


@pytest.mark.parametrize("name", ["no_such_rule", "__wrapped__", "_EXPORT", "Projection"])
def test_an_unknown_name_is_an_attribute_error(name: str) -> None:
    with pytest.raises(AttributeError, match=f"has no attribute '{name}'"):
        getattr(session_runtime, name)
    assert not hasattr(session_runtime, name)

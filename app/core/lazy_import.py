"""Factories imported on first use: a backend's spec names its client module's classes without importing the
module (and httpx, h11, …) until a client is made."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def attribute(module: str, name: str) -> Any:
    """module.name, the module imported now if it was not yet."""
    return getattr(importlib.import_module(module), name)


def lazy(module: str, name: str) -> Callable[..., Any]:
    """A callable that imports module on its first call and calls module.name with its arguments."""
    def make(*args: Any, **kwargs: Any) -> Any:
        return attribute(module, name)(*args, **kwargs)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"{module}.{name}, imported on first use."
    return make


__all__ = ["attribute", "lazy"]

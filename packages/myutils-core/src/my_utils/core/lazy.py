"""Lazy re-exports for package facades (PEP 562).

Each distribution's plugin module lives inside its package, so importing the plugin imports
the package ``__init__``: facades must stay light and resolve their public names on first use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` resolving ``name -> defining module``.

    Usage in a facade: ``__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)``.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__


class _LazyModule:
    """Stands for module ``name`` in ``owner``'s globals under ``alias`` until first used, then is replaced there."""

    def __init__(self, name: str, owner: str, alias: str) -> None:
        self._name, self._owner, self._alias = name, owner, alias

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        setattr(sys.modules[self._owner], self._alias, module)  # later lookups reach the module itself
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use by {self._owner}>"


def lazy_module(name: str, owner: str, alias: str) -> Any:
    """A stand-in for ``import name as alias`` in module ``owner`` that imports ``name`` on first attribute access.

    For modules whose functions need a heavy library but whose classes are imported where it
    is not (numpy in the Kineto analyses: a worker computes, the parent only merges rows).
    Usage: ``if TYPE_CHECKING: import numpy as np`` / ``else: np = lazy_module("numpy", __name__, "np")``.
    """
    return _LazyModule(name, owner, alias)

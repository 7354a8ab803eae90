"""What this folder's test modules share: ``nsys_real.py``, ``ops_recorded.py`` and ``history_support.py``,
registered as modules.

Tests run in importlib mode (pyproject.toml), where test modules cannot import each other; pytest
imports this conftest before them, so ``import nsys_real`` works in every one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _register(name: str) -> None:
    """Load ``<name>.py`` beside this file into ``sys.modules`` once."""
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_register("nsys_real")
_register("ops_recorded")
_register("history_support")

from history_support import postgres_server, store_url  # noqa: E402, F401  (the history's store fixtures)

"""A ``spawn`` context whose worker processes never run the caller's ``__main__`` again.

A spawned worker first re-imports the parent's main script (``multiprocessing.spawn`` calls
it ``__mp_main__``) so that functions defined there can be unpickled. A script that calls a
pool at its top level, without an ``if __name__ == "__main__":`` guard, then starts the pool
again inside each worker while that worker is still bootstrapping: every worker dies and the
caller gets ``BrokenProcessPool``. Our pools only ever run functions of installed modules,
named by import path, so they need nothing from the caller's script: :func:`mainless_context`
starts each worker while the parent's ``__main__`` is replaced, for that moment only, by an
empty module of the same name. Notebooks (whose ``__main__`` has no file) behave as before;
scripts with or without a guard both work, and a worker no longer pays for the script's own
imports.
"""

from __future__ import annotations

import sys
import threading
import types
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

__all__ = ["MainlessSpawnProcess", "mainless_context"]

# one worker at a time swaps ``__main__``: two pools starting workers in two threads must not restore each other's
_SWAP = threading.Lock()


class MainlessSpawnProcess(SpawnProcess):
    """A spawned process told that the parent's main module is empty (module docstring)."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # the name multiprocessing calls
        with _SWAP:
            real = sys.modules.get("__main__")
            if real is None or (getattr(real, "__file__", None) is None
                                and getattr(getattr(real, "__spec__", None), "name", None) is None):
                return SpawnProcess._Popen(process_obj)  # nothing would be re-imported: notebooks, `python -c`
            stand_in = types.ModuleType("__main__")
            sys.modules["__main__"] = stand_in
            try:
                return SpawnProcess._Popen(process_obj)
            finally:
                sys.modules["__main__"] = real


class _MainlessContext(SpawnContext):
    Process = MainlessSpawnProcess


_CONTEXT = _MainlessContext()


def mainless_context() -> SpawnContext:
    """The ``spawn`` context whose processes do not re-import ``__main__`` (module docstring)."""
    return _CONTEXT

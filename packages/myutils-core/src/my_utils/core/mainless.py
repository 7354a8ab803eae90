"""A ``spawn`` context whose workers do not run the caller's ``__main__`` again when the caller is unguarded.

A spawned worker first re-imports the parent's main script (``multiprocessing.spawn`` calls
it ``__mp_main__``) so that functions defined there can be unpickled. A script that starts a
pool at its top level, outside an ``if __name__ == "__main__":`` guard, then starts the pool
again inside each worker while that worker is still bootstrapping: every worker dies and the
caller gets ``BrokenProcessPool`` (a notebook-style script calling ``open_run`` did).

:class:`MainlessSpawnProcess` looks at what the main thread is running when a worker starts.
When it is the main script's top level outside such a guard, the worker starts while the
parent's ``__main__`` is replaced, for that moment only, by an empty module of the same name:
the worker imports nothing of the script (our pools run functions of installed modules, named
by import path). Otherwise (a guarded script, which may hand its own functions to the pool; a
notebook, whose ``__main__`` has no file) the worker starts exactly as multiprocessing's own.
"""

from __future__ import annotations

import ast
import sys
import threading
import types
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

__all__ = ["MainlessSpawnProcess", "mainless_context", "unguarded_main_call"]

# one worker at a time swaps ``__main__``: two pools starting workers in two threads must not restore each other's
_SWAP = threading.Lock()


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either side of the ``==``)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.comparators) != 1:
        return False
    sides = [node.test.left, node.test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    constants = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and constants == ["__main__"] and isinstance(node.test.ops[0], ast.Eq)


def unguarded_main_call() -> bool:
    """Whether the main thread is running the main script's top level outside an ``if __name__ == "__main__":``."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return False  # a notebook, `python -c`, an embedded interpreter: nothing would be re-imported
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:
        return False  # the script's top level is over (a callback, an atexit hook)
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return True  # cannot tell: starting without the script is the safe side for our own pools
    line = frame.f_lineno
    for node in tree.body:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return not _is_main_guard(node)
    return True


class MainlessSpawnProcess(SpawnProcess):
    """A spawned process told that the parent's main module is empty when the caller is unguarded (module doc)."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # the name multiprocessing calls
        if not unguarded_main_call():
            return SpawnProcess._Popen(process_obj)
        with _SWAP:
            real = sys.modules["__main__"]
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                return SpawnProcess._Popen(process_obj)
            finally:
                sys.modules["__main__"] = real


class _MainlessContext(SpawnContext):
    Process = MainlessSpawnProcess


_CONTEXT = _MainlessContext()


def mainless_context() -> SpawnContext:
    """The ``spawn`` context whose processes do not re-import an unguarded ``__main__`` (module docstring)."""
    return _CONTEXT

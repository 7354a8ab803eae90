"""Calling plugin code so that it cannot take the caller down (README rule 4).

Plugin code runs when an entry point is imported, when a hook is called, and when a
component (provider, rule, backend, sink) is built or used. Any of it may

- call ``sys.exit`` or raise another ``BaseException`` that ``except Exception`` lets through
  (``SystemExit``, ``GeneratorExit``, a class of its own): ``contained()`` turns it into
  ``PluginAbort``, an ordinary ``Exception`` that every per-plugin guard already handles.
  ``KeyboardInterrupt`` is not turned: a real Ctrl-C must still stop the command, and in the
  thread that received it, it cannot be told from one the plugin raised;
- print to stdout, where a command's output (``plugins list --json``) must be alone:
  ``plugin_output()`` sends what plugin code writes to stderr, at the Python level and at the
  file-descriptor level (a subprocess or C code writing to fd 1), once the CLI switched it
  on with ``send_plugin_output_to_stderr(True)`` (a library caller's stdout is left alone);
- hang while it is imported: ``call_bounded()`` runs the import in a daemon thread and gives
  up after ``import_timeout()`` seconds (``MYUTILS_PLUGIN_IMPORT_TIMEOUT``). The thread is
  abandoned, not killed (Python cannot kill a thread); ``abandoned()`` says whether one is
  left, so that the CLI ends the process without waiting for it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = [
    "IMPORT_TIMEOUT_ENV",
    "PluginAbort",
    "PluginTimeout",
    "abandoned",
    "call_bounded",
    "contained",
    "describe_failure",
    "import_timeout",
    "plugin_output",
    "send_plugin_output_to_stderr",
]

T = TypeVar("T")

IMPORT_TIMEOUT_ENV = "MYUTILS_PLUGIN_IMPORT_TIMEOUT"
DEFAULT_IMPORT_TIMEOUT_S = 30.0
#: the longest reason kept from a plugin's exception (a 100 MB message must not become a 100 MB row)
MAX_REASON_CHARS = 500


class PluginAbort(Exception):
    """Plugin code raised a ``BaseException`` that is not an ``Exception`` (``original``)."""

    def __init__(self, original: BaseException) -> None:
        self.original = original
        super().__init__(_base_message(original))


class PluginTimeout(Exception):
    """Plugin code did not finish within its bound (an import that hangs)."""


def _base_message(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return _short(f"the plugin called sys.exit({exc.code!r})")
    return _message(exc) or "raised with no message"


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception as inner:  # a __str__ that raises is one more plugin bug: say so, do not fail
        text = f"<str() of the exception raised {type(inner).__name__}>"
    return _short(text)


def _short(text: str) -> str:
    """``text`` on one line, cut to ``MAX_REASON_CHARS`` saying how long it was."""
    total = len(text)
    text = "; ".join(line.strip() for line in text[:MAX_REASON_CHARS].splitlines() if line.strip())
    if total > MAX_REASON_CHARS:
        text = text[:MAX_REASON_CHARS - 40] + f"... ({total} characters in all)"
    return text


def describe_failure(exc: BaseException) -> str:
    """``Type: message`` on one line, the message at most ``MAX_REASON_CHARS`` long; a ``PluginAbort`` shows the original type."""
    shown = exc.original if isinstance(exc, PluginAbort) else exc
    message = _base_message(shown) if isinstance(exc, PluginAbort) else _message(exc)
    return f"{type(shown).__name__}: {message}" if message else type(shown).__name__


@contextlib.contextmanager
def contained() -> Iterator[None]:
    """Re-raise a ``BaseException`` from the block as ``PluginAbort`` (``KeyboardInterrupt`` passes)."""
    try:
        yield
    except (Exception, KeyboardInterrupt):
        raise
    except BaseException as exc:  # SystemExit, GeneratorExit, a plugin's own subclass
        raise PluginAbort(exc) from exc


# -- stdout -------------------------------------------------------------------------------

_output = {"to_stderr": False, "depth": 0}
_output_lock = threading.RLock()


def send_plugin_output_to_stderr(on: bool) -> bool:
    """Switch ``plugin_output()`` on (the CLI, whose stdout is its result) or off (the default); return the old setting."""
    previous = bool(_output["to_stderr"])
    _output["to_stderr"] = bool(on)
    return previous


def _flush(*streams: object) -> None:
    for stream in streams:
        with contextlib.suppress(Exception):
            stream.flush()  # type: ignore[attr-defined]


@contextlib.contextmanager
def plugin_output() -> Iterator[None]:
    """While the block runs plugin code, what it writes to stdout goes to stderr (when switched on).

    Python-level writes (``print``, ``sys.stdout``) and writes to file descriptor 1 (C code,
    subprocesses) are both redirected; nested blocks redirect once.
    """
    if not _output["to_stderr"]:
        yield
        return
    with _output_lock:
        outer = _output["depth"] == 0
        _output["depth"] += 1
        saved_stdout = sys.stdout
        saved_fd: int | None = None
        if outer:
            _flush(sys.stdout, sys.__stdout__)
            try:
                saved_fd = os.dup(1)
                os.dup2(2, 1)
            except OSError:  # no fd 1 or 2 (a daemon): the Python-level redirect still works
                saved_fd = None
        sys.stdout = sys.stderr
        try:
            yield
        finally:
            # what the plugin left in the buffers is written while fd 1 still goes to stderr
            _flush(sys.stdout, sys.__stdout__, sys.stderr)
            sys.stdout = saved_stdout
            if saved_fd is not None:
                with contextlib.suppress(OSError):
                    os.dup2(saved_fd, 1)
                os.close(saved_fd)
            _output["depth"] -= 1


# -- bounded calls ------------------------------------------------------------------------

_abandoned: list[threading.Thread] = []


def import_timeout() -> float:
    """Seconds an entry point's import may take: ``MYUTILS_PLUGIN_IMPORT_TIMEOUT``, else 30; 0 or less: no bound."""
    raw = os.environ.get(IMPORT_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_IMPORT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_IMPORT_TIMEOUT_S
    return value if value == value else DEFAULT_IMPORT_TIMEOUT_S  # NaN: the default


def call_bounded(fn: Callable[[], T], timeout: float, what: str) -> T:
    """``fn()`` in a daemon thread; its result, or its exception, or ``PluginTimeout`` after ``timeout`` s.

    In that thread a ``KeyboardInterrupt`` can only come from ``fn`` itself (signals go to the
    main thread), so it becomes ``PluginAbort`` like any other ``BaseException``; a Ctrl-C
    while waiting interrupts the wait as usual. ``timeout <= 0`` calls ``fn`` here, unbounded.
    """
    if timeout <= 0 or timeout == float("inf"):
        with contained():
            return fn()
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the waiting thread, which decides
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=run, name=f"myutils-plugin:{what}", daemon=True)
    worker.start()
    if not done.wait(timeout):
        _abandoned.append(worker)
        raise PluginTimeout(f"{what} did not finish within {timeout:g} s (set {IMPORT_TIMEOUT_ENV} to wait longer)")
    error = box.get("error")
    if isinstance(error, BaseException):
        if isinstance(error, Exception):
            raise error
        raise PluginAbort(error) from error
    return box["value"]  # type: ignore[return-value]


def abandoned() -> bool:
    """True when a bounded call gave up on a thread that is still running."""
    return any(t.is_alive() for t in _abandoned)

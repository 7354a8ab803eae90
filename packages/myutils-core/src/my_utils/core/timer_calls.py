"""MyTimer's fast ``start``/``stop``: per-timer functions whose state lives in default arguments.

Why default arguments: in CPython a function reads its defaults as plain locals, while a
closure pays for copying its cells into every call's frame, and a method pays for binding
``self`` and for each attribute it reads (measured: a disabled closure costs ~1.2x an empty
method, a function like ``_off`` ~1.0x). Each timer gets its own function objects, built from
the templates below with ``types.FunctionType``; the templates' extra parameters are never
passed by callers.

Why retiring swaps the code: a caller may have fetched ``start = timer.start`` once (hot
loops do). When the timer changes mode (disabled, CUDA found, a labeler dropped), those very
function objects must change behaviour, so ``retire`` gives them the code of ``_forward``,
which calls the timer's generic method, and a new pair is installed on the instance.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

__all__ = ["Calls", "disabled_calls", "plain_calls", "retire"]

Calls = tuple[Callable[[str], None], Callable[[str], None]]


# Few defaults on purpose: each one is copied into the frame of every call.
def _start(name: Any, ev: Any = None, stack: Any = None) -> None:
    ev.append(name)
    ev.append(perf_counter_ns())
    stack.append(name)


def _stop(name: Any, ev: Any = None, stack: Any = None, misuse: Any = None) -> None:
    now = perf_counter_ns()
    try:
        top = stack.pop()  # pop first, put back on a mismatch: ~10 % cheaper than testing stack[-1]
    except IndexError:
        misuse(name)  # the generic stop raises the error that names the step and the fix
        return
    if top == name:
        ev.append("")
        ev.append(~now)  # negative: a stop
    else:
        stack.append(top)
        misuse(name)  # the generic stop raises the error that names both regions and the step


def _off(name: Any) -> None:
    pass


def _forward(name: Any, timer: Any = None, generic: Any = None) -> None:
    generic(timer, name)


def _make(template: Callable[..., None], name: str, defaults: tuple[Any, ...] | None, doc: str | None) -> Any:
    fn = types.FunctionType(template.__code__, template.__globals__, name, defaults)
    fn.__doc__ = doc
    fn.__qualname__ = f"MyTimer.{name}"
    return fn


def plain_calls(timer: Any, ev: list[Any], stack: list[str], generic_start: Callable[[Any, str], None],
                generic_stop: Callable[[Any, str], None]) -> Calls:
    """``start``/``stop`` recording into ``ev`` and ``stack`` (a plain timer: no CUDA, no NVTX)."""
    return (_make(_start, "start", (ev, stack), generic_start.__doc__),
            _make(_stop, "stop", (ev, stack, functools.partial(generic_stop, timer)), generic_stop.__doc__))


def disabled_calls(timer: Any, generic_start: Callable[[Any, str], None],
                   generic_stop: Callable[[Any, str], None]) -> Calls:
    """``start``/``stop`` that do nothing (a disabled timer)."""
    return (_make(_off, "start", None, generic_start.__doc__), _make(_off, "stop", None, generic_stop.__doc__))


def retire(calls: Calls, timer: Any, generic_start: Callable[[Any, str], None],
           generic_stop: Callable[[Any, str], None]) -> None:
    """Make ``calls`` forward to the timer's generic methods from now on."""
    for fn, generic in zip(calls, (generic_start, generic_stop), strict=True):
        fn.__code__ = _forward.__code__
        fn.__defaults__ = (timer, generic)

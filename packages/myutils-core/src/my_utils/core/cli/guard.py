"""Turn failures into one line on stderr and an exit code, never a traceback.

Exit 2: the input or the request is wrong (``InputError``, ``UsageError``, an unknown,
disabled or clashing plugin name, an ``OSError`` on a named file). Exit 1: a plugin broke
(it cannot be imported, or raised something unexpected); the line names the plugin and its
distribution. ``myutils --traceback ...`` or ``MYUTILS_TRACEBACK=1`` also prints the stack.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from my_utils.core.errors import MyUtilsError, ProviderError
from my_utils.core.plugin_errors import PluginLoadError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2
EXIT_PLUGIN_FAILED = 1
TRACEBACK_ENV = "MYUTILS_TRACEBACK"
_GUARDED = "__myutils_guarded__"


_state = {"traceback": False}


def set_traceback(show: bool) -> None:
    """Called by the root command for every invocation with the value of ``--traceback``."""
    _state["traceback"] = show


def want_traceback() -> bool:
    """True when ``--traceback`` was given to ``myutils`` or ``MYUTILS_TRACEBACK`` is set (not 0)."""
    return _state["traceback"] or os.environ.get(TRACEBACK_ENV, "").strip() not in ("", "0")


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__


def _fail(code: int, message: str) -> None:
    import typer

    if want_traceback():
        traceback.print_exc(file=sys.stderr)
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def plugin_guard(owner: str | None = None) -> Iterator[None]:
    """Run a command body: expected errors exit 2, a broken plugin exits 1, both on one line.

    ``owner`` (e.g. ``metrics provider 'x' from plugin 'ext_x' (myutils-ext-x 1.0)``) is
    named when anything unexpected escapes; without it unexpected errors propagate.
    """
    import typer

    try:
        yield
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise  # deliberate exits and usage errors: click already knows how to end them
    except PluginLoadError as exc:
        _fail(EXIT_PLUGIN_FAILED, _one_line(exc))
    except ProviderError as exc:  # the provider's own bug, already wrapped by run_provider_on_input
        cause = exc.cause
        _fail(EXIT_PLUGIN_FAILED, f"{owner} failed on {exc.where}: {type(cause).__name__}: {_one_line(cause)}"
              if owner else _one_line(exc))
    except (MyUtilsError, OSError) as exc:
        message = _one_line(exc)
        if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in message:
            message = f"{exc.filename}: {message}"
        _fail(EXIT_BAD_INPUT, message)
    except Exception as exc:
        if owner is None:
            raise
        _fail(EXIT_PLUGIN_FAILED, f"{owner} failed: {type(exc).__name__}: {_one_line(exc)}")


def exit_on_error(func: F) -> F:
    """Decorate a CLI command: InputError, UsageError, PluginError and OSError exit with 2.

    A plugin that cannot be imported exits with 1; other exceptions propagate.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with plugin_guard():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def guard_plugin_command(func: F, owner: str) -> F:
    """Wrap a command a plugin added: errors as ``plugin_guard(owner)`` (wrapped once only)."""
    if getattr(func, _GUARDED, False):
        return func

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with plugin_guard(owner):
            return func(*args, **kwargs)

    setattr(wrapper, _GUARDED, True)
    return wrapper  # type: ignore[return-value]

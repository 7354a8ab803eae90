"""Turn expected failures into one line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from my_utils.core.errors import MyUtilsError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2


def exit_on_error(func: F) -> F:
    """Decorate a CLI command: InputError, UsageError, PluginError and OSError exit with 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import typer

        try:
            return func(*args, **kwargs)
        except (MyUtilsError, OSError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in message:
                message = f"{exc.filename}: {message}"
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None

    return wrapper  # type: ignore[return-value]

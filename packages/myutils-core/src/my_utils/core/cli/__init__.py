"""The ``myutils`` command line: a typer app that plugins extend through ``myutils_cli``.

Names resolve on first use: the console script (``main``) answers ``--help`` and
``plugins list`` without importing typer when it can (``cli.entry``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "build_app": "my_utils.core.cli.app",
    "exit_on_error": "my_utils.core.cli.guard",
    "main": "my_utils.core.cli.entry",
}

__all__ = ["build_app", "exit_on_error", "main"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.core.cli.app import build_app as build_app
    from my_utils.core.cli.entry import main as main
    from my_utils.core.cli.guard import exit_on_error as exit_on_error

"""The built-in plugin of myutils-profiling, registered through the ``my_utils.plugins`` entry point.

Kept import-light: it only describes components (``"module:Class"`` strings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def myutils_cli(app: typer.Typer) -> None:
    """Mount the ``myutils-profile`` commands as ``myutils profile``."""
    from my_utils.profiling.cli import app as profile_app

    app.add_typer(profile_app, name="profile")

"""The built-in plugin of myutils-distributed, registered through the ``my_utils.plugins`` entry point.

Kept import-light: the command's module is imported when the CLI is built, its analysis
only when the command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def myutils_cli(app: typer.Typer) -> None:
    """Add ``myutils stragglers LOG_DIR`` (who is slow across ranks, from the profile CSVs)."""
    from my_utils.distributed.stragglers.cli import stragglers

    app.command("stragglers")(stragglers)

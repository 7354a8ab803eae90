"""Adds a command whose annotation names a module this file never imports (typer fails on it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def myutils_cli(app: typer.Typer) -> None:
    @app.command("broken-signature")
    def broken(path: typer.FileText) -> None:
        """Never runs."""

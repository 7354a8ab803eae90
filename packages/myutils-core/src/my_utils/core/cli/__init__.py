"""The ``myutils`` command line: a typer app that plugins extend through ``myutils_cli``."""

from my_utils.core.cli.app import build_app, main
from my_utils.core.cli.guard import exit_on_error

__all__ = ["build_app", "exit_on_error", "main"]

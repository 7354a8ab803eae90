"""Root of the ``myutils`` CLI: ``--version``, the ``plugins`` group, plugin commands."""

from __future__ import annotations

import importlib.metadata
import logging

import typer

from my_utils.core.cli.plugins_cmd import plugins_app
from my_utils.core.plugins import get_registry

DIST_PREFIX = "myutils-"


def installed_distributions() -> list[tuple[str, str]]:
    """(name, version) of every installed my_utils distribution, sorted by name."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith(DIST_PREFIX):
            found[name.lower()] = dist.version
    return sorted(found.items())


def _version_callback(value: bool) -> None:
    if value:
        for name, version in installed_distributions():
            typer.echo(f"{name} {version}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    """Create the root app with core's commands and every plugin's ``myutils_cli`` additions."""
    app = typer.Typer(
        name="myutils",
        help="my_utils: time, trace, profile and analyse PyTorch runs.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # plain click help: importing rich costs ~100 ms per start
        add_completion=False,
    )

    @app.callback()
    def root(
        version: bool = typer.Option(
            False, "--version", callback=_version_callback, is_eager=True,
            help="Print every installed my_utils distribution and its version.",
        ),
    ) -> None:
        """my_utils: time, trace, profile and analyse PyTorch runs."""

    app.add_typer(plugins_app, name="plugins")
    get_registry().extend_cli(app)
    return app


def quiet_plugin_warnings() -> None:
    """Keep broken-plugin warnings off the CLI's stderr; ``myutils plugins list`` shows them."""
    plugin_log = logging.getLogger("my_utils.plugins")
    plugin_log.addHandler(logging.NullHandler())
    plugin_log.propagate = False


def main() -> None:
    """Console-script entry point of ``myutils``."""
    quiet_plugin_warnings()
    build_app()(prog_name="myutils")

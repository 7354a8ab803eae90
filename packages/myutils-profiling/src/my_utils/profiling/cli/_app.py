"""The ``myutils-profile`` Typer app and the commands that belong to no single part (``providers``).

Command implementations import their heavy dependencies inside the command, so the
CLI starts fast and ``--help`` imports neither pandas nor plotly.
"""

from __future__ import annotations

import typer

from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import get_registry

app = typer.Typer(
    name="myutils-profile",
    help="Collect, analyse, diff and trace my_utils metric events.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(ctx: typer.Context) -> None:
    """Collect, analyse, diff and trace my_utils metric events."""
    from my_utils.core.cli.command_progress import start_command_progress

    start_command_progress(ctx, "myutils-profile")  # a command without a bar of its own still says it works


@app.command("providers")
def list_providers() -> None:
    """List the installed metrics providers and what each one reads."""
    for name, desc in sorted(get_registry().descriptions(PluginKind.METRICS_PROVIDER).items()):
        inputs = ", ".join(desc.inputs) or "-"
        options = ", ".join(o.name for o in desc.options) or "-"
        typer.echo(f"{name}: {desc.summary} [reads: {inputs}] [options: {options}]")


def main() -> None:
    """Console-script entry point of ``myutils-profile``."""
    app(prog_name="myutils-profile")

"""Root of the ``myutils`` CLI: ``--version``, the ``plugins`` group, plugin commands."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import sys
import typing

import typer

from my_utils.core.cli.guard import guard_plugin_command, set_traceback
from my_utils.core.cli.plugins_cmd import plugins_app
from my_utils.core.plugin_calls import abandoned, send_plugin_output_to_stderr
from my_utils.core.plugin_types import PluginRecord
from my_utils.core.plugins import get_registry, owner_label

DIST_PREFIX = "myutils-"


def installed_distributions() -> list[tuple[str, str]]:
    """(name, version) of every installed my_utils distribution, sorted by name."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith(DIST_PREFIX):
            found[name.lower()] = dist.version
    return sorted(found.items())


def _print_versions() -> None:
    for name, version in installed_distributions():
        typer.echo(f"{name} {version}")


def _version_callback(value: bool) -> None:
    if value:
        _print_versions()
        raise typer.Exit()


def asks_for_version(args: list[str]) -> bool:
    """True when ``--version`` is among the root options (before the first command word)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--version":
            return True
        if not arg.startswith("-"):
            return False  # a command: its own options follow
    return False


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
        traceback: bool = typer.Option(
            False, "--traceback", help="On failure, also print the stack (or set MYUTILS_TRACEBACK=1).",
        ),
    ) -> None:
        """my_utils: time, trace, profile and analyse PyTorch runs."""
        set_traceback(traceback)

    app.add_typer(plugins_app, name="plugins")
    get_registry().extend_cli(app, guard=_guard_added_commands)
    return app


def _guard_typer(app: typer.Typer, owner: str, first_command: int = 0, first_group: int = 0) -> None:
    for command in app.registered_commands[first_command:]:
        if command.callback is not None:
            typing.get_type_hints(command.callback, include_extras=True)  # what typer evaluates at start
            command.callback = guard_plugin_command(command.callback, owner)
    for group in app.registered_groups[first_group:]:
        if group.typer_instance is not None:
            _guard_typer(group.typer_instance, owner)


def _guard_added_commands(app: typer.Typer, n_commands: int, n_groups: int, plugin: PluginRecord) -> str | None:
    """Run every command a plugin added inside the guard, so its failures name the plugin.

    A command whose signature cannot be evaluated (e.g. an annotation naming a module it
    never imported) would stop every ``myutils`` invocation: the plugin's commands are
    dropped and the reason returned instead.
    """
    try:
        _guard_typer(app, f"command of {owner_label(plugin)}", n_commands, n_groups)
    except Exception as exc:
        del app.registered_commands[n_commands:]
        del app.registered_groups[n_groups:]
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return f"its commands were dropped: a signature cannot be evaluated: {type(exc).__name__}: {'; '.join(lines)}"
    return None


def quiet_plugin_warnings() -> None:
    """Keep broken-plugin warnings off the CLI's stderr; ``myutils plugins list`` shows them."""
    plugin_log = logging.getLogger("my_utils.plugins")
    plugin_log.addHandler(logging.NullHandler())
    plugin_log.propagate = False


def main() -> None:
    """Console-script entry point of ``myutils``.

    ``--version`` reads installed metadata only and imports no plugin (a plugin that hangs or
    exits at import cannot stop it). Elsewhere, what plugin code prints goes to stderr, and
    when a plugin import was abandoned (it did not finish within its bound) the process ends
    without waiting for that thread.
    """
    quiet_plugin_warnings()
    if asks_for_version(sys.argv[1:]):
        _print_versions()
        return
    send_plugin_output_to_stderr(True)
    try:
        build_app()(prog_name="myutils")
    except SystemExit as exc:
        if not abandoned():
            raise
        code = exc.code
    else:
        if not abandoned():
            return
        code = 0
    if not isinstance(code, int):  # sys.exit("message") or None, as the interpreter would end
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)

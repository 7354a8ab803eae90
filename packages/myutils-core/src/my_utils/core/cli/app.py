"""Root of the ``myutils`` CLI: ``--version``, the ``plugins`` group, plugin commands.

``cli.entry.main`` answers ``--help`` and ``plugins list`` without this module when it can
(``cli.start_cache``); everything else, and those two on a first start, runs here.
"""

from __future__ import annotations

import os
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from my_utils.core.cli.guard import guard_plugin_command, set_traceback
from my_utils.core.cli.plugins_cmd import plugins_app
from my_utils.core.plugin_calls import abandoned, send_plugin_output_to_stderr
from my_utils.core.plugin_types import PluginRecord, PluginStatus
from my_utils.core.plugins import get_registry, owner_label

if TYPE_CHECKING:
    from my_utils.core.cli.start_cache import StartRecord

DIST_PREFIX = "myutils-"


def installed_distributions() -> list[tuple[str, str]]:
    """(name, version) of every installed my_utils distribution, sorted by name."""
    import importlib.metadata

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


def build_app(plugin_commands: bool = True) -> typer.Typer:
    """Create the root app with core's commands and every plugin's ``myutils_cli`` additions.

    ``plugin_commands=False`` leaves the plugins' commands out (see :func:`needs_plugin_commands`).
    """
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
        ctx: typer.Context,
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
        from my_utils.core.cli.command_progress import start_command_progress

        start_command_progress(ctx, "myutils")  # a command without a bar of its own still says it works

    app.add_typer(plugins_app, name="plugins")
    if plugin_commands:
        get_registry().extend_cli(app, guard=_guard_added_commands)
    return app


#: the root options that take no value (they may come before the command)
_ROOT_FLAGS = frozenset({"--traceback"})


def needs_plugin_commands(argv: list[str]) -> bool:
    """False for ``myutils [--traceback] plugins run ...``: core's own command, which no plugin command serves.

    Building every plugin's commands (their modules imported, their signatures evaluated) is
    ~0.04 s of CPU that ``plugins run`` (a provider on one file, often in a loop over many) never
    uses. Every other command line, ``plugins list`` included (it shows a plugin whose commands
    failed), builds them all.
    """
    i = 0
    while i < len(argv) and argv[i] in _ROOT_FLAGS:
        i += 1
    return argv[i:i + 2] != ["plugins", "run"]


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


def light_help_options(command: Any) -> None:
    """Keep typer from importing pydantic (~300 ms) on every command that is not asked for ``--help``.

    typer 0.29 coerces each parameter's value through a pydantic ``TypeAdapter`` built on
    first use, bool flags excepted when their value is a bool; the ``--help`` flag that was
    not given has the value None, so every command paid for pydantic to learn that None stays
    None. Here an absent ``--help`` is handed to the option as False (not given, as the flag
    says): its callback ignores both, and the value is never exposed. Older typers, whose help
    option is click's own, behave the same with False. Recurses into groups.
    """
    get_help_option = command.get_help_option

    def light_get_help_option(ctx: Any) -> Any:
        option = get_help_option(ctx)
        if option is not None and not getattr(option, "_myutils_light", False):
            process_value = option.process_value

            def light_process_value(ctx: Any, value: Any) -> Any:
                return process_value(ctx, False if value is None else value)

            option.process_value = light_process_value
            option._myutils_light = True
        return option

    command.get_help_option = light_get_help_option
    for sub in (getattr(command, "commands", None) or {}).values():
        light_help_options(sub)


class _PlainCoercion:
    """typer's coercion of a ``str``, ``Path`` or ``list[str]`` parameter, for the values argv gives, without pydantic.

    typer 0.29 builds a pydantic ``TypeAdapter`` for every parameter it coerces: importing
    pydantic is ~0.1 s of CPU, a third of ``myutils plugins run``'s start. For these three
    annotations (no parser, no click type, no ``path_type``) and a value that is already text,
    the result is the adapter's: the text itself, the list of texts, or ``Path(text)`` checked by
    typer's own ``coerce_cli_path`` (exists, readable, ...) when ``Path`` keeps the text as it is
    and ``allow_dash`` is off. Any other value goes to typer's coercion, built then.
    """

    def __init__(self, param: Any) -> None:
        self.param = param
        self.full: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        """What typer's runtime parameter returns for ``value``."""
        many = param.multiple or param.nargs == -1
        if value is None:
            return () if many else None
        annotation = self.param.type_descriptor.annotation
        if annotation is str and value.__class__ is str:
            return value
        if annotation == list[str] and isinstance(value, (list, tuple)) and all(v.__class__ is str for v in value):
            return list(value)
        info = self.param.type_descriptor.parameter_info
        if (annotation is Path and value.__class__ is str and not getattr(info, "allow_dash", True)
                and str(Path(value)) == value):
            from typer._param_types import coerce_cli_path

            # text that Path leaves as it is ('a//b', '' and 'x/' are changed: typer's coercion checks those):
            # typer's checks see the same path and quote it as given; then Path, as pydantic makes it
            checked = coerce_cli_path(value, info, path_type=None, param=param, ctx=ctx)  # the text, or its realpath
            return Path(os.fsdecode(checked))
        if self.full is None:
            from typer._coercion import build_runtime_param

            self.full = build_runtime_param(self.param.type_descriptor)
        return self.full.coerce(value, param=param, ctx=ctx)


def light_parameters(command: Any) -> None:
    """Give the ``str``/``Path``/``list[str]`` parameters of ``command`` (and its subcommands) :class:`_PlainCoercion`.

    Only for a typer whose parameters carry the lazily built runtime coercion (0.29: a
    ``type_descriptor`` and a ``_runtime_param`` not built yet); others are left as they are.
    """
    for param in getattr(command, "params", ()):
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            continue
        info = descriptor.parameter_info
        if getattr(info, "parser", None) is not None or getattr(info, "click_type", None) is not None:
            continue
        annotation = descriptor.annotation
        plain = annotation is str or annotation == list[str] or (
            annotation is Path and getattr(info, "path_type", None) is None)
        if plain and descriptor.file_annotation is None:
            param._runtime_param = _PlainCoercion(param)
    for sub in (getattr(command, "commands", None) or {}).values():
        light_parameters(sub)


def help_text(command: Any) -> str:
    """The root help exactly as click prints it for ``myutils --help`` (its help callback's text)."""
    context_class: Callable[..., Any] = command.context_class
    with context_class(command, info_name="myutils") as ctx:
        return str(ctx.get_help())


def _clean_start() -> bool:
    """Every plugin loaded and added its commands (nothing BROKEN, no import abandoned)."""
    return not abandoned() and all(r.status is not PluginStatus.BROKEN for r in get_registry().plugin_problems())


def run(argv: list[str], record: StartRecord | None = None) -> None:
    """Build the app and run it on ``argv`` (``sys.argv[1:]``); ``record``: the ``StartRecord`` to update.

    ``myutils --help`` draws the help itself (the same text click's help callback prints) so
    that a clean start can record exactly what it printed.
    """
    send_plugin_output_to_stderr(True)
    try:
        command = typer.main.get_command(build_app(record is not None or needs_plugin_commands(argv)))
        light_help_options(command)
        light_parameters(command)
        if record is not None and _clean_start():
            if argv == ["--help"]:
                from my_utils.core.cli.start_cache import terminal_width

                text = help_text(command)
                typer.echo(text)
                record.save(text, terminal_width())
                return
            record.save()
        command(args=argv, prog_name="myutils")
    except SystemExit as exc:
        if not abandoned():
            raise
        code = exc.code
    else:
        if not abandoned():
            return
        code = 0
    exit_abandoned(code)


def exit_abandoned(code: object) -> None:
    """End the process now with ``code`` (as the interpreter would) without waiting for an abandoned import."""
    if not isinstance(code, int):  # sys.exit("message") or None, as the interpreter would end
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)

"""``myutils plugins``: list, show, check, run and scaffold plugins."""

from __future__ import annotations

import reprlib
from pathlib import Path

import typer

from my_utils.core.cli.guard import EXIT_BAD_INPUT, EXIT_PLUGIN_FAILED, exit_on_error
from my_utils.core.cli.listing import render_records
from my_utils.core.cli.plugins_run import parse_options, run_metrics_provider
from my_utils.core.plugin_types import PluginRecord, PluginStatus
from my_utils.core.plugins import get_registry

plugins_app = typer.Typer(
    help="List, inspect, check, run and scaffold my_utils plugins.", no_args_is_help=True,
    rich_markup_mode=None,
)

#: the name this module gave ``plugins_run.parse_options`` before the body moved there
_parse_options = parse_options

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 200


def _print_rows(records: list[PluginRecord], as_json: bool) -> None:
    typer.echo(render_records(records, as_json))


@plugins_app.command("list")
def list_plugins(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of objects instead of a table."),
) -> None:
    """List every plugin component with its kind, distribution, version and status.

    Nothing behind a component is imported; `myutils plugins check` imports every one.
    """
    _print_rows(get_registry().records(), as_json)


@plugins_app.command("check")
def check_plugins(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of objects instead of a table."),
) -> None:
    """Like `list`, but import every component's factory; exit 1 when anything is BROKEN."""
    records = get_registry().check()
    _print_rows(records, as_json)
    broken = [r for r in records if r.status is PluginStatus.BROKEN]
    if broken:
        typer.echo(f"error: {len(broken)} plugin problem(s): "
                   + "; ".join(f"{r.name} ({r.kind}, {r.distribution or '-'})" for r in broken), err=True)
        raise typer.Exit(EXIT_PLUGIN_FAILED)


def _option_lines(description: object) -> list[str]:
    # PluginDescription.options (OptionSpec: name, type, default, help) is optional for plugins
    lines = []
    for spec in getattr(description, "options", ()) or ():
        kind = getattr(spec, "type", None)
        kind_name = getattr(kind, "__name__", None) or str(kind or "any")
        default = _REPR.repr(getattr(spec, "default", None))  # bounded: a default may be any size
        lines.append(f"    {getattr(spec, 'name', '?')} ({kind_name}, default {default}): "
                     f"{getattr(spec, 'help', '')}".rstrip())
    return lines


@plugins_app.command("show")
def show_plugin(name: str = typer.Argument(..., help="Component or plugin name.")) -> None:
    """Show what a plugin component is, where it comes from, what it reads and its options."""
    records = get_registry().find(name)
    if not records:
        known = sorted({r.name for r in get_registry().records()})
        typer.echo(f"error: no plugin named {name!r}; installed: {', '.join(known) or 'none'}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    for rec in records:
        typer.echo(f"{rec.name}  ({rec.kind})")
        typer.echo(f"  plugin:       {rec.plugin}")
        typer.echo(f"  distribution: {rec.distribution or '-'} {rec.version or ''}".rstrip())
        typer.echo(f"  status:       {rec.status.value}{f' ({rec.reason})' if rec.reason else ''}")
        if rec.description is not None:
            d = rec.description
            typer.echo(f"  summary:      {d.summary}")
            typer.echo(f"  factory:      {d.factory}")
            typer.echo(f"  inputs:       {', '.join(d.inputs) or '-'}")
            typer.echo(f"  extras:       {', '.join(d.extras) or '-'}")
            options = _option_lines(d)
            typer.echo("  options:" + ("" if options else "      -"))
            for line in options:
                typer.echo(line)


@plugins_app.command("run")
def run_plugin(
    name: str = typer.Argument(..., help="Metrics provider name (see `myutils plugins list`)."),
    input_path: Path = typer.Option(..., "--input", help="File or folder the provider reads."),
    output_dir: Path = typer.Option(..., "--output-dir", help="Folder that receives metrics_events.jsonl."),
    option: list[str] = typer.Option(
        [], "--option", "-o", help="KEY=VALUE passed to the provider (repeatable); values are JSON or text."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Run a metrics provider on a file or folder and write its metric events.

    Bad input exits with 2; a provider that breaks exits with 1 naming its plugin.
    """
    # the body is typer-free: cli.run_fast runs the same one when it parses the line itself
    run_metrics_provider(name, input_path, output_dir, option, quiet, typer.echo)


@plugins_app.command("new")
@exit_on_error
def new_plugin(
    name: str = typer.Argument(..., help="Short name: the package becomes myutils-ext-NAME / my_utils_ext_NAME."),
    kind: str = typer.Option(..., "--kind", help="provider, backend, rule, sink or cli."),
    directory: Path = typer.Option(Path("."), "--dir", help="Folder in which the package folder is created."),
) -> None:
    """Write a ready plugin package: pyproject with the entry point, module, a passing test."""
    from my_utils.core.scaffold import write_plugin_package

    root = write_plugin_package(name, kind, directory)
    typer.echo(f"wrote {root}; next: pip install -e {root} && pytest {root / 'tests'}")

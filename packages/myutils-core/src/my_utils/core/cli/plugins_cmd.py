"""``myutils plugins``: list, show and run the installed plugins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from my_utils.core.cli.guard import EXIT_BAD_INPUT, exit_on_error
from my_utils.core.errors import InputError
from my_utils.core.plugin_types import PluginKind, PluginRecord
from my_utils.core.plugins import get_registry

plugins_app = typer.Typer(
    help="List, inspect and run my_utils plugins.", no_args_is_help=True, rich_markup_mode=None
)

_COLUMNS = ("name", "kind", "distribution", "version", "status")


def _table(records: list[PluginRecord]) -> str:
    rows = [_COLUMNS] + [
        (r.name, r.kind, r.distribution or "-", r.version or "-",
         f"{r.status.value} ({r.reason})" if r.reason else r.status.value)
        for r in records
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    )


@plugins_app.command("list")
def list_plugins(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of objects instead of a table."),
) -> None:
    """List every plugin component with its kind, distribution, version and status."""
    records = get_registry().records()
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in records], indent=2))
    else:
        typer.echo(_table(records))


@plugins_app.command("show")
def show_plugin(name: str = typer.Argument(..., help="Component or plugin name.")) -> None:
    """Show what a plugin component is, where it comes from and what it reads."""
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


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InputError("--option", None, f"expected KEY=VALUE with a Python identifier as KEY, got {pair!r}")
        try:
            options[key.strip()] = json.loads(raw)
        except ValueError:
            options[key.strip()] = raw  # plain text
    return options


@plugins_app.command("run")
@exit_on_error
def run_plugin(
    name: str = typer.Argument(..., help="Metrics provider name (see `myutils plugins list`)."),
    input_path: Path = typer.Option(..., "--input", help="File or folder the provider reads."),
    output_dir: Path = typer.Option(..., "--output-dir", help="Folder that receives metrics_events.jsonl."),
    option: list[str] = typer.Option(
        [], "--option", "-o", help="KEY=VALUE passed to the provider (repeatable); values are JSON or text."
    ),
) -> None:
    """Run a metrics provider on a file or folder and write its metric events."""
    from my_utils.core.providers import run_provider_on_input

    options = _parse_options(option)
    get_registry().get(PluginKind.METRICS_PROVIDER, name)  # unknown name: clear error first
    out, count = run_provider_on_input(name, input_path, output_dir, options)
    typer.echo(f"wrote {count} metric events to {out}")

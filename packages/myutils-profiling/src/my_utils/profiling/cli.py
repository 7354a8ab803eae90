"""``myutils-profile``: the profiling commands (also reachable as ``myutils profile``).

Command implementations import their heavy dependencies inside the command, so the
CLI starts fast and ``--help`` imports neither pandas nor plotly.
"""

from __future__ import annotations

from pathlib import Path

import typer

from my_utils.core.cli.guard import exit_on_error
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
def _root() -> None:
    """Collect, analyse, diff and trace my_utils metric events."""


@app.command("providers")
def list_providers() -> None:
    """List the installed metrics providers and what each one reads."""
    for name, desc in sorted(get_registry().descriptions(PluginKind.METRICS_PROVIDER).items()):
        inputs = ", ".join(desc.inputs) or "-"
        typer.echo(f"{name}: {desc.summary} [reads: {inputs}]")


@app.command("ingest")
@exit_on_error
def ingest(
    config: Path = typer.Option(..., "--config", help="Collector config (JSON or YAML) naming providers and inputs."),
    analyze: bool = typer.Option(False, "--analyze", help="Analyse the events after ingesting them."),
    output_dir: Path | None = typer.Option(None, "--output-dir", help="Overrides the config's output_dir."),
    ignore_provider_errors: bool = typer.Option(
        False, "--ignore-provider-errors", help="Skip providers whose input cannot be read (reported on stderr)."
    ),
) -> None:
    """Read every input named in the config and write <output_dir>/metrics_events.jsonl."""
    from my_utils.core.errors import UsageError
    from my_utils.core.events import write_events
    from my_utils.profiling.collector import MetricsCollector

    if analyze:
        # checked before any work so that a failing command leaves nothing behind
        raise UsageError(
            "--analyze: the analyzer is not available in this myutils-profiling version; "
            "run `myutils-profile ingest` without --analyze"
        )
    overrides = {"output_dir": output_dir} if output_dir is not None else {}
    collector = MetricsCollector.from_config(config, ignore_provider_errors=ignore_provider_errors, **overrides)
    for failure in collector.failures:
        typer.echo(f"warning: skipped {failure.place} ({failure.provider}): {failure.reason}", err=True)
    events = collector.gather(None)
    # one atomic file: a failing provider above leaves no partial output behind
    count = write_events(collector.events_path, events)
    sources = sorted({e.source for e in events})
    typer.echo(f"wrote {count} metric events from {len(collector.providers)} provider(s) "
               f"({', '.join(sources) or 'none'}) to {collector.events_path}")


def main() -> None:
    """Console-script entry point of ``myutils-profile``."""
    app(prog_name="myutils-profile")

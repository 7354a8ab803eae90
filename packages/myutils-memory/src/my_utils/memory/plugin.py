"""The built-in plugin of myutils-memory, registered through the ``my_utils.plugins`` entry point.

Kept import-light: it describes the monitor-samples provider as a ``"module:Class"`` string
and defines the ``memory`` commands inside the hook (typer needs their signatures), whose
bodies import the snapshot code only when they run.
"""

# No ``from __future__ import annotations``: typer reads the commands' annotations, which
# name things imported inside the hook, and only eager evaluation sees them.
from collections.abc import Sequence
from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import OptionSpec, PluginDescription, PluginKind

if TYPE_CHECKING:
    import typer


@hookimpl
def myutils_metrics_providers() -> Sequence[PluginDescription]:
    """The provider that reads ``GPU_Performance_Tracker`` samples files."""
    return [PluginDescription(
        name="memory_monitor", kind=PluginKind.METRICS_PROVIDER,
        factory="my_utils.memory.samples_provider:MonitorSamplesMetricsProvider",
        summary="GPU_Performance_Tracker samples: torch memory, NVML utilisation/power/energy, host RSS/CPU",
        inputs=("*_samples.jsonl",),
        options=(OptionSpec("rank", int, None, "rank for files whose header carries none"),),
    )]


@hookimpl
def myutils_cli(app: "typer.Typer") -> None:
    """Add ``myutils memory summarize SNAPSHOT`` and ``myutils memory cut SNAPSHOT --from --to -o OUT``."""
    from pathlib import Path
    from typing import Annotated

    import typer

    from my_utils.core.cli.guard import exit_on_error

    memory_app = typer.Typer(help="Memory snapshots without a browser: summarise, cut a time range.",
                             no_args_is_help=True, rich_markup_mode=None)

    @exit_on_error
    def summarize(
        snapshot: Annotated[Path, typer.Argument(help="a snapshot: snapshotter .pt or .pickle, _dump_snapshot")],
        top: Annotated[int, typer.Option(help="how many allocation stacks to list")] = 10,
        stack_depth: Annotated[int, typer.Option(help="frames that identify a stack (after --frames filters)")] = 4,
        windows: Annotated[int, typer.Option(help="time windows when the file records no regions")] = 10,
        frames: Annotated[str, typer.Option(
            help="what names a stack: user (the operation and the user's frames, skipping the allocator and "
                 "PyTorch), python (every Python frame), all (the frames as recorded)")] = "user",
        full_stacks: Annotated[bool, typer.Option(
            "--full-stacks", help="print every recorded frame under each listed stack")] = False,
        json_out: Annotated[Path | None, typer.Option(
            "--json", help="also write the summary as JSON (with each stack's full stack)")] = None,
        html_out: Annotated[Path | None, typer.Option(
            "--html", help="also write an offline page: memory over time, stacks, segments (needs plotly)")] = None,
    ) -> None:
        """Peak, top allocation stacks, per-region deltas, growth trend and allocator state of SNAPSHOT."""
        from my_utils.core.errors import UsageError
        from my_utils.core.safe_io import refuse_overwriting_inputs
        from my_utils.memory.snapshot_io import load_snapshot
        from my_utils.memory.snapshot_summary import FrameView, summarize_snapshot
        from my_utils.memory.summary_render import render_summary

        try:
            view = FrameView(frames)
        except ValueError:
            raise UsageError(f"--frames {frames!r}: expected one of user, python, all") from None
        outputs = [p for p in (json_out, html_out) if p is not None]
        refuse_overwriting_inputs(outputs, [snapshot])
        points = 0
        if html_out is not None:
            from my_utils.memory.charts import ChartUnavailable
            from my_utils.memory.summary_html import TIMELINE_POINTS, require_plotly

            try:
                require_plotly()  # before any work: a missing extra is said at once
            except ChartUnavailable as exc:
                raise UsageError(f"--html {html_out}: {exc}") from None
            points = TIMELINE_POINTS
        summary = summarize_snapshot(load_snapshot(snapshot), top=top, stack_depth=stack_depth, windows=windows,
                                     frames=view, timeline_points=points)
        typer.echo(render_summary(summary, str(snapshot), full_stacks=full_stacks))
        if json_out is not None:
            from my_utils.memory.summary_json import write_summary_json

            typer.echo(f"wrote {write_summary_json(json_out, summary, str(snapshot))}")
        if html_out is not None:
            from my_utils.memory.summary_html import write_summary_html

            typer.echo(f"wrote {write_summary_html(html_out, summary, str(snapshot))}")

    @exit_on_error
    def cut(
        snapshot: Annotated[Path, typer.Argument(help="a snapshot (.pt or .pickle)")],
        start: Annotated[float, typer.Option("--from", help="seconds since the first trace entry (entry number "
                                                               "for a snapshot that records no times)")],
        stop: Annotated[float, typer.Option("--to", help="seconds since the first trace entry (entry number "
                                                             "for a snapshot that records no times)")],
        output: Annotated[Path, typer.Option("--output", "-o", help="the smaller snapshot: NAME.pt writes NAME.pt (torch.load) and NAME.pickle (memory_viz); "
                                   "any other name, the pickle alone")],
    ) -> None:
        """Write the trace between --from and --to (and the allocator state at --to) to OUTPUT."""
        from my_utils.core.safe_io import refuse_overwriting_inputs
        from my_utils.memory.snapshot import TORCH_SUFFIX, viz_pickle_path
        from my_utils.memory.snapshot_cut import cut_snapshot, save_cut
        from my_utils.memory.snapshot_io import has_times, load_snapshot

        # every file the cut writes (a .pt also writes its .pickle sibling), before any work
        writes = [output, viz_pickle_path(output)] if output.suffix == TORCH_SUFFIX else [output]
        refuse_overwriting_inputs(writes, [snapshot])
        loaded = load_snapshot(snapshot)
        smaller = cut_snapshot(loaded, start, stop)
        save_cut(output, smaller, snapshot)
        kept = sum(len(t) for t in smaller["device_traces"])
        written = f"{output} and {viz_pickle_path(output)}" if output.suffix == TORCH_SUFFIX else str(output)
        # a snapshot without recorded times is numbered by entry: --from/--to count entries, not seconds
        span = f"between {start:g} s and {stop:g} s" if has_times(loaded) else \
            f"from entry {start:g} to entry {stop:g} (the snapshot records no times: entries are counted)"
        typer.echo(f"wrote {written}: {kept} trace entries {span}")

    memory_app.command("summarize")(summarize)
    memory_app.command("cut")(cut)
    app.add_typer(memory_app, name="memory")

"""``analyze_traces``: stream each rank's trace once, in parallel, and merge the small tables.

Each file is read by one worker (a local process by default, or a Dask cluster, through
the same ``run_many`` as ingest), which keeps numeric columns only and returns a
:class:`RankAnalysis` of a few kilobytes; memory therefore depends on the largest file,
not on the number of ranks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError
from my_utils.profiling.formats._files import check_distinct_ranks, find_inputs, rank_from_name
from my_utils.profiling.formats.parallel import Executor, run_many
from my_utils.profiling.kineto.model import KinetoAnalysis, RankAnalysis
from my_utils.profiling.kineto.read.provider import trace_rank

if TYPE_CHECKING:
    from my_utils.profiling.kineto.filters import TraceFilter
    from my_utils.profiling.kineto.rank_data import RankData
    from my_utils.profiling.kineto.read.stream import TraceStream

TOP_KERNELS = 10
_PATTERNS = ("*.json", "*.json.gz")


@dataclass
class ReadRank:
    """One trace read once: its columns, how its rank was found, the stream (metadata, event count)."""

    data: RankData
    rank_source: str
    stream: TraceStream
    host_events: int


def read_rank(path: str | Path, rank: int | None = None, keep_ops: bool = True) -> ReadRank:
    """Stream one trace file into :class:`RankData` (the single pass every analysis shares).

    ``keep_ops=False`` leaves the CPU operators out (the core analyses never read them).
    """
    from my_utils.profiling.kineto.read.stream import TraceStream

    p = Path(path)
    stream = TraceStream(p)
    analyses = KinetoPass(p, keep_ops=keep_ops)
    add = analyses.add
    for ev in stream.events():
        add(ev)
    d, source, host_events = analyses.columns(stream.metadata, rank)
    return ReadRank(d, source, stream, host_events)


def _needs_ops(analyses: Sequence[str] | None, trace_filter: TraceFilter | None) -> bool:
    """Whether CPU operators must be kept: a registered analysis reads them, or an "under operator" filter."""
    from my_utils.profiling.kineto.registry import select

    return bool(select(analyses)) or (trace_filter is not None and trace_filter.under is not None)


class KinetoPass:
    """The analyses of one trace, fed by whoever streams it: :func:`analyze_file`, or the Kineto
    provider's own pass (``kineto.read.provider.read_trace``), so that a command that also needs the
    provider's events reads the trace once (ARCHITECTURE.md §8).

    ``add`` every event, then ``finish`` gives the :class:`RankAnalysis`. ``trace_filter``,
    ``analyses`` and ``options`` as in :func:`analyze_file`; ``keep_ops`` None decides from them.
    Pass ``functools.partial(KinetoPass, trace_filter=...)`` where a factory of the path is wanted.
    """

    def __init__(self, path: str | Path, trace_filter: TraceFilter | None = None,
                 analyses: Sequence[str] | None = None, options: Mapping[str, Mapping[str, Any]] | None = None,
                 keep_ops: bool | None = None) -> None:
        from my_utils.profiling.kineto.collect import TraceCollector

        self.path = Path(path)
        self.trace_filter = trace_filter
        self.analyses = analyses
        self.options = options
        keep = _needs_ops(analyses, trace_filter) if keep_ops is None else keep_ops
        self.collector: Any = TraceCollector(self.path, keep)
        self.add = self.collector.add

    def columns(self, metadata: Mapping[str, Any], rank: int | None) -> tuple[RankData, str, int]:
        """The collected events as :class:`RankData` (with the trace's context), the rank's source, host events."""
        from my_utils.profiling.kineto.arrivals import host_from_file_name
        from my_utils.profiling.kineto.context import device_type, trace_context
        from my_utils.profiling.kineto.rank_data import build

        col = self.collector
        found, source = trace_rank(self.path, dict(metadata), rank)
        d = build(col, found)
        self.collector = None  # the columns now live in numpy arrays
        context = trace_context(dict(metadata), found, source, {lane[0] for lane in d.lanes})
        context["device_type"], context["device_type_source"] = device_type(
            metadata, {d.names[i] for i in set(d.rt_name.tolist())}, col.gpu_labels)
        if context.get("host") is not None:
            context["host_source"] = "trace metadata"
        elif (host := host_from_file_name(self.path)) is not None:
            context.update(host=host, host_source="file name (tensorboard_trace_handler)")
            context["missing"] = [k for k in context.get("missing", []) if k != "host"]
        d = replace(d, context=context)
        return d, source, col.host_events

    def finish(self, metadata: Mapping[str, Any], event_count: int, rank: int | None) -> RankAnalysis:
        """Every analysis, once every event was added; ``rank`` as in :func:`analyze_file`."""
        from my_utils.profiling.kineto.annotations import annotation_gpu_time
        from my_utils.profiling.kineto.capture_steps import capture_tables
        from my_utils.profiling.kineto.health import capture_health
        from my_utils.profiling.kineto.idle import device_idle, idle_breakdown
        from my_utils.profiling.kineto.kernels import kernel_stats, kind_breakdown
        from my_utils.profiling.kineto.launch import launch_stats
        from my_utils.profiling.kineto.overlap import comm_comp_overlap
        from my_utils.profiling.kineto.profiler_overhead import profiler_overhead
        from my_utils.profiling.kineto.sync import sync_rows
        from my_utils.profiling.kineto.temporal import temporal_breakdown

        p, trace_filter = self.path, self.trace_filter
        d, source, host_events = self.columns(metadata, rank)
        found = d.rank
        warnings: tuple[str, ...] = ()
        if found is None:
            warnings = (f"{p.name}: no rank found (no distributedInfo.rank in the trace, no rank in the file name, "
                        "none given): analysed as the one process of a single-rank run, its rank shown as unknown",)
        full = d
        if trace_filter is not None and trace_filter.active:
            d = trace_filter.apply(d)
        # the steps analysis compares what the filter kept with the whole trace (``step_scope``)
        steps = {"before_filter": full, "described": trace_filter.describe() if trace_filter is not None else ""}
        options = {**(self.options or {}), "steps": {**(self.options or {}).get("steps", {}), **steps}}
        tables, failed = run_registered(d, p.name, self.analyses, options)
        tables.update(capture_tables(metadata, found, p.name))  # a my_utils capture's step times, if recorded
        warnings += failed + _unsteady_warning(p.name, tables)
        launch, outliers = launch_stats(d)
        return RankAnalysis(
            file=str(p), rank=found, rank_source=source, events=event_count,
            temporal=temporal_breakdown(d), kernel_kinds=tuple(kind_breakdown(d)),
            kernel_stats=tuple(kernel_stats(d)), idle=tuple(idle_breakdown(d, d.lanes)),
            overlap=comm_comp_overlap(d) if len(d.gpu_ts) else None, launch=launch, launch_outliers=tuple(outliers),
            annotations=tuple(annotation_gpu_time(d)), health=tuple(capture_health(d)),
            idle_device=tuple(device_idle(d)), sync=tuple(sync_rows(d)),
            profiler_overhead=profiler_overhead(d, host_events),
            context=dict(d.context), warnings=warnings,
            tables=tables, trace_filter=trace_filter.describe() if trace_filter is not None else "",
        )


def _unsteady_warning(file: str, tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[str, ...]:
    """A warning naming the steps that hold compilation, autotuning or graph capture (``kineto.setup``)."""
    rows = [r for r in tables.get("setup", ()) if r.get("unsteady_steps")]
    kinds = [f"{k['kind']} ({k['steps']}, {float(k['us']) / 1e3:,.1f} ms)" for k in tables.get("setup_kinds", ())
             if k.get("kind") in ("compilation", "autotuning", "graph capture", "cuDNN benchmark") and k.get("steps")]
    return tuple(f"{file}: steps {r['unsteady_steps']} hold one-off work ({'; '.join(kinds)}): they are not steady "
                 "state, and a step time read from them overstates it" for r in rows)


def analyze_file(path: str | Path, rank: int | None = None, trace_filter: TraceFilter | None = None,
                 analyses: Sequence[str] | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None) -> RankAnalysis:
    """Every analysis of one trace file. Module-level so that worker processes can import it.

    The rank comes from ``distributedInfo.rank``, else from the file name, else ``rank``;
    without any of them the rank is None and a warning says so (and what was assumed).
    ``trace_filter`` keeps part of the trace before any analysis runs (``kineto.filters``);
    ``analyses`` names the registered analyses to run (``kineto.registry``; default all) and
    ``options`` gives each its keyword options (``{"critical_path": {"annotation": "ProfilerStep"}}``).
    """
    from my_utils.profiling.kineto.read.stream import TraceStream

    p = Path(path)
    stream = TraceStream(p)
    analyses_pass = KinetoPass(p, trace_filter, analyses, options)
    add = analyses_pass.add
    for ev in stream.events():
        add(ev)
    return analyses_pass.finish(stream.metadata, stream.event_count, rank)


def run_registered(d: Any, file: str, analyses: Sequence[str] | None,
                   options: Mapping[str, Mapping[str, Any]] | None) -> tuple[dict[str, tuple[dict[str, Any], ...]],
                                                                            tuple[str, ...]]:
    """Every registered analysis on one rank's data, each alone: (tables as row dicts, one warning per failure)."""
    from my_utils.profiling.kineto import call_stacks
    from my_utils.profiling.kineto.registry import select
    from my_utils.profiling.kineto.rows import Row

    tables: dict[str, tuple[dict[str, Any], ...]] = {}
    failed: list[str] = []
    for spec in select(analyses):
        try:
            produced = spec.load()(d, **dict((options or {}).get(spec.name, {})))
        except Exception as exc:  # one analysis' failure must not lose the others' tables
            failed.append(f"{file}: Kineto analysis {spec.name!r} failed ({type(exc).__name__}: {exc}); "
                          "its tables are missing")
            continue
        for name, rows in produced.items():
            tables[name] = tuple(r.to_row() if isinstance(r, Row) else dict(r) for r in rows)
    call_stacks.forget()  # the stacks several analyses shared: not kept past this rank
    return tables, tuple(failed)


def analyze_traces(paths: str | Path | Iterable[str | Path], ranks: Sequence[int] | None = None,
                   executor: Executor = "process", top: int = TOP_KERNELS, trace_filter: TraceFilter | None = None,
                   analyses: Sequence[str] | None = None,
                   options: Mapping[str, Mapping[str, Any]] | None = None) -> KinetoAnalysis:
    """The HTA-style analyses of every rank's Kineto trace under ``paths`` (files or folders).

    ``ranks`` keeps only those ranks (files whose name shows another rank are not even
    read); ``executor`` is ``"process"`` (local processes), ``"serial"``, a Dask scheduler
    address or a ``distributed.Client``; ``top`` kernels are listed per rank and kind.
    ``trace_filter``, ``analyses`` and ``options``: see :func:`analyze_file`.
    """
    from my_utils.core.paths import as_paths

    inputs = as_paths(paths)
    files: list[Path] = []
    for p in inputs:
        files.extend(find_inputs(p, _PATTERNS, "Kineto trace (.json/.json.gz)"))
    if ranks is not None:
        wanted = set(ranks)
        files = [f for f in files if (r := rank_from_name(f)) is None or r in wanted]
    if analyses is not None:
        from my_utils.profiling.kineto.registry import select

        select(analyses)  # an unknown name fails here, once, not in every worker
    results = run_many(analyze_file, [(str(f), None, trace_filter, analyses, options) for f in files], executor)
    check_distinct_ranks({Path(r.file): r.rank for r in results}, "trace")
    if ranks is not None:
        results = [r for r in results if r.rank in set(ranks)]
        if not results:
            raise InputError(", ".join(str(p) for p in inputs), None,
                             f"a trace of rank(s) {sorted(set(ranks))}; none of the files holds one")
    return combine(results, top, analyses)


def combine(results: Sequence[RankAnalysis], top: int = TOP_KERNELS,
            analyses: Sequence[str] | None = None) -> KinetoAnalysis:
    """Merge per-rank results (sorted by rank) and add the all-ranks rows (``rank`` None)."""
    from my_utils.profiling.kineto.annotations import merge_annotations
    from my_utils.profiling.kineto.kernels import merge_kind_rows, merge_stats, top_kernels
    from my_utils.profiling.kineto.overlap import merge_overlap
    from my_utils.profiling.kineto.temporal import merge_temporal

    results = sorted(results, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.file))
    kinds = [k for r in results for k in r.kernel_kinds]
    stats = [s for r in results for s in r.kernel_stats]
    anns = [a for r in results for a in r.annotations]
    temporal = [r.temporal for r in results if r.temporal is not None]
    idle = [i for r in results for i in r.idle]
    overlap = [r.overlap for r in results if r.overlap is not None]
    many = len(results) > 1
    tables, failed = _merge_tables(results, analyses)
    coverage = _coverage_warning(results)
    inputs: tuple[dict[str, Any], ...] = tuple(
        {"file": r.file, "rank": r.rank, "rank_source": r.rank_source, "events": r.events} for r in results)
    return KinetoAnalysis(
        ranks=tuple(r.rank for r in results), inputs=inputs,
        temporal=tuple(temporal + ([merge_temporal(temporal)] if many and temporal else [])),
        kernel_kinds=tuple(kinds + (merge_kind_rows(kinds) if many else [])),
        top_kernels=tuple(top_kernels(stats + (merge_stats(stats) if many else []), top)),
        idle=tuple(idle),
        overlap=tuple(overlap + ([merge_overlap(overlap)] if len(overlap) > 1 else [])),
        launch=tuple(r.launch for r in results if r.launch is not None),
        launch_outliers=tuple(o for r in results for o in r.launch_outliers),
        annotations=tuple(anns + (merge_annotations(anns) if many else [])),
        health=tuple(h for r in results for h in r.health),
        idle_device=tuple(i for r in results for i in r.idle_device),
        sync=tuple(x for r in results for x in r.sync),
        profiler_overhead=tuple(r.profiler_overhead for r in results if r.profiler_overhead is not None),
        context=tuple(r.context for r in results),
        warnings=tuple(w for r in results for w in r.warnings) + coverage + failed, tables=tables,
        trace_filter=next((r.trace_filter for r in results if r.trace_filter), ""),
    )


def _coverage_warning(results: Sequence[RankAnalysis]) -> tuple[str, ...]:
    """The missing-ranks warning when the traces declare a world larger than the ranks read (``rank_coverage``)."""
    from my_utils.profiling.model.rank_coverage import rank_coverage

    cov = rank_coverage((r.rank for r in results), (r.context.get("world_size") for r in results),
                        "the traces' distributedInfo.world_size")
    text = cov.warning("trace") if cov is not None else None
    return (text,) if text else ()


def _merge_tables(results: Sequence[RankAnalysis], analyses: Sequence[str] | None
                  ) -> tuple[dict[str, tuple[dict[str, Any], ...]], tuple[str, ...]]:
    """Every rank's registered tables concatenated (rank order), then each analysis' across-ranks rows."""
    from my_utils.profiling.kineto.registry import select
    from my_utils.profiling.kineto.rows import Row

    merged: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        for name, kept in r.tables.items():
            merged.setdefault(name, []).extend(kept)
    failed: list[str] = []
    for spec in select(analyses):
        if spec.across is None:
            continue
        try:
            produced = spec.load_across()(results)  # type: ignore[misc]
        except Exception as exc:  # the per-rank tables stand without the across-ranks rows
            failed.append(f"Kineto analysis {spec.name!r} across ranks failed ({type(exc).__name__}: {exc})")
            continue
        for name, rows in produced.items():
            merged.setdefault(name, []).extend(r.to_row() if isinstance(r, Row) else dict(r) for r in rows)
    return {k: tuple(v) for k, v in merged.items()}, tuple(failed)

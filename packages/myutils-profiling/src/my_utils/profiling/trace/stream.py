"""The streaming merge: each rank's regions and each torch trace laid out by its own task, then k-way merged.

Memory of the main process does not grow with the rank count. It makes one pass over the
metric events of an events file (:func:`~my_utils.profiling.trace.regions.distribute`): every
MyTimer region goes to its rank's spill file, the few ``clock_sync`` records stay in memory;
profile CSVs are read by tasks, one per file
(:func:`~my_utils.profiling.trace.regions.distribute_csv`), which make the same pass there. Then
one task per rank's regions and one per torch trace
(:func:`~my_utils.profiling.trace.regions.layout_regions`,
:func:`~my_utils.profiling.trace.torch_layout.layout_torch`) run on the same workers
(:func:`my_utils.profiling.formats.parallel.runner`, the local-process / Dask path of
ingest). A task holds one rank's regions or one trace's events: it packs them into lanes
(:func:`my_utils.profiling.trace.lanes.pack`) and writes them to its own spill file *sorted by
time* (the record format: :mod:`my_utils.profiling.trace.records`), with its lanes (and a
rank's step starts) in files beside it. A task returns small metadata only (rank, host, first
and last time, event counts and byte/duration histograms, which ``--overflow trim`` uses): the
main process adds the counts up as they come and keeps a few ints per unit.

The main process then assigns pids (rank + 1) and tids (unique, above every pid, in the
order of the in-memory layout) rank by rank, writing the metadata events, each unit's lane ids
and the per-rank parts of ``otherData`` to scratch files (:class:`~my_utils.profiling.trace.records.Spilled`:
the output copies them; 1,000 ranks' metadata, lanes and step starts held in memory were ~40-60 KB
a rank), picks the time origin and merges the sorted spill files,
shifted by each rank's clock offset, into the output with a bounded number of files open
(:mod:`my_utils.profiling.trace.spill_merge`): :meth:`Plan.records` yields each record's
finished JSON texts, writing ``ts`` (µs since ``time_origin_unix_s``, exact to the ns),
``pid`` and ``tid`` in front of the stored text without parsing it again. The open-file
limit and the scratch space are checked before the parallel work.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import resource
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.core.events import MetricEvent
from my_utils.core.lifecycle import remove_scratch
from my_utils.core.scratch import make_scratch
from my_utils.profiling.trace.clock import ClockSync, latest_per_rank, rebase, uncertainty_warnings
from my_utils.profiling.trace.discover import find_named_traces
from my_utils.profiling.trace.records import (
    THRESHOLDS_US,
    JsonSpill,
    Spilled,
    Unit,
    dump,
    format_us,
    ids_path,
    lanes_path,
    scratch_error,
    unit_spill,
    us_to_ns,
)
from my_utils.profiling.trace.regions import (
    NO_RANK,
    RankRegions,
    distribute,
    distribute_csv,
    layout_regions,
    step_starts,
)
from my_utils.profiling.trace.spill_merge import (
    FAN_IN_MAX,
    FD_MARGIN,
    finish_group,
    finished_lines,
    groups,
    merge_fan_in,
    merged,
    open_fds,
    unit_spec,
)
from my_utils.profiling.trace.torch_layout import layout_torch, torch_records

TRACE_SCHEMA_VERSION = "1.0"
SCRATCH_PREFIX = "myutils-trace-"


@dataclass
class Sizes:
    """Upper bounds of what each kind of event adds to the output, for splitting and trimming."""

    overhead: int  # bytes an event adds besides its stored text (ts, pid, tid, separator), at most
    mytimer: tuple[int, int]  # events, text bytes
    flows: tuple[int, int]
    torch_hist: list[tuple[int, int]]  # per THRESHOLDS_US bucket: events, text bytes

    def bound(self, kept: tuple[int, int]) -> int:
        """Bytes of ``kept`` = (events, text bytes) in the output, at most."""
        return kept[1] + kept[0] * self.overhead

    def torch_from(self, j: int) -> tuple[int, int]:
        """Torch events (and their bytes) at least ``THRESHOLDS_US[j]`` µs long; ``j = len`` keeps none."""
        cells = self.torch_hist[j:]
        return sum(c for c, _b in cells), sum(b for _c, b in cells)


@dataclass
class Plan:
    """A merge laid out and ready to stream: metadata, otherData, and the sorted spill files.

    ``head`` is the metadata events' JSON (``,``-joined) in a scratch file; ``other`` is otherData,
    its per-rank values (``clock_offsets``, ``ranks``, ``sources``) in scratch files too.
    """

    head: Spilled
    other: dict[str, Any]
    warnings: list[str]
    units: list[Unit]
    origin_ns: int
    sizes: Sizes
    events: int  # events (not metadata) the output will hold, untrimmed
    folder: Path | None = None  # the scratch folder (intermediate merges of more than fan_in files go there)
    fan_in: int = FAN_IN_MAX  # spill files open at once, at most (what the open-file limit allowed)

    run: Any = None  # the workers of the layout (providers.parallel.Runner): the merge's finish tasks run there

    def records(self, reserve: int = 1) -> Iterator[bytes]:
        """Every record as a finished line (:mod:`~my_utils.profiling.trace.spill_merge`), in time order; once.

        The spill files are finished by tasks in groups, then merged here with at most ``fan_in``
        files open, fewer when ``reserve`` other files (the outputs) must stay open beside them.
        In one process, up to ``fan_in`` spill files are merged and finished here directly.
        """
        fan_in = min(self.fan_in, merge_fan_in(reserve))
        workers = self.run.workers if self.run is not None else 1
        live = [u for u in self.units if u.records]
        if self.folder is None or (workers <= 1 and len(live) <= fan_in):
            if len(live) > fan_in:
                raise ValueError("more spill files than may be open at once, and no folder for intermediates")
            yield from finished_lines([unit_spec(u) for u in live], self.origin_ns)
            return
        folder, origin = self.folder, self.origin_ns
        calls: list[tuple[Any, ...]] = [([unit_spec(u) for u in group], origin, str(folder / f"finished_{g}.tsv"))
                                        for g, group in enumerate(groups(live, fan_in, workers))]
        yield from merged(self._run(finish_group, calls), fan_in, folder, self._run)

    def _run(self, func: Any, calls: list[tuple[Any, ...]]) -> list[Any]:
        if self.run is None:
            return [func(*c) for c in calls]
        return list(self.run.stream(func, calls))


@contextlib.contextmanager
def planned(events: Iterable[MetricEvent], torch_traces: Sequence[Any] = (), *, reference_rank: int = 0,
            auto_align: bool = True, sources: Sequence[str] = (), executor: Any = None,
            max_workers: int | None = None, generator: str = "my_utils.profiling.trace.merge_trace",
            traces_beside: Path | None = None, csvs: Sequence[str] = (), full_paths: bool = False) -> Iterator[Plan]:
    """Lay the merge out in a temporary folder; the :class:`Plan` is valid inside the block.

    ``torch_traces`` are paths (read by the tasks) or already read ``TorchTrace`` objects (laid out
    in this process). ``csvs`` are profile CSVs read by the tasks too (their regions and clock
    records join those of ``events``; a cluster's workers need absolute paths). With
    ``traces_beside``, the torch traces the events name (``attrs.file``)
    are added, found in that folder or below it in the same pass over the events
    (:func:`~my_utils.profiling.trace.discover.find_named_traces`; those not found are warned about). The folder and
    every spill file are removed when the block ends, however. The input paths written into
    ``otherData`` (``sources``, each rank's ``torch_traces``) are relative to the working folder, or
    the file's name for one outside it, so that a trace shared outside the team shows no one's
    folders (:func:`shown_path`); ``full_paths`` keeps them as given.
    """
    from my_utils.profiling.formats.parallel import runner

    if isinstance(torch_traces, (str, os.PathLike)):  # one path is a list of one, not its characters
        torch_traces = [torch_traces]
    # named by this process: a later run removes it if this one is killed (SIGKILL runs no finally)
    folder = make_scratch(SCRATCH_PREFIX)
    try:
        ranks, syncs, trace_names = distribute(events, folder, sources[0] if len(sources) == 1 else "the events")
        found_warnings: list[str] = []
        if traces_beside is not None:
            named, found_warnings = find_named_traces(traces_beside, trace_names)
            torch_traces = [*torch_traces, *named]
        paths = [t for t in torch_traces if not hasattr(t, "events")]
        read = [t for t in torch_traces if hasattr(t, "events")]
        # before the parallel work: the merge must be able to open its files, the tasks to write theirs
        wanted = len(ranks) + len(csvs) + len(torch_traces)  # spill files, about: a CSV holds a rank
        fan_in = merge_fan_in(reserve=4 * (max_workers or os.cpu_count() or 1), wanted=wanted)
        if fan_in < 2:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            raise UsageError(f"the open-file limit ({soft}, hard limit {hard}) leaves no room to merge the "
                             f"{wanted} spill files of trace (it needs about "
                             f"{open_fds() + FD_MARGIN + 2 + 4 * (max_workers or 1)}); raise it (ulimit -n)")
        check_scratch_room(folder, [str(t) for t in paths])
        with runner(executor, max_workers, wanted, __name__) as run:
            # first the CSVs (their ranks number the units), each read by a task
            for part in run.stream(_task, [("csv", str(c), str(folder), i) for i, c in enumerate(csvs)],
                                   small_results=True):
                syncs += part["syncs"]
                for key, regions in part["ranks"].items():
                    ranks.setdefault(key, RankRegions()).merge(regions)
            region_keys = sorted(k for k, r in ranks.items() if r.regions)
            n = len(region_keys)
            calls: list[tuple[Any, ...]] = [("regions", ranks[k].regions, unit_spill(folder, i))
                                            for i, k in enumerate(region_keys)]
            calls += [("torch", str(p), unit_spill(folder, n + i), n + i) for i, p in enumerate(paths)]
            metas = run.stream(_task, calls, small_results=True)  # metadata: the layouts are in spill files
            done = (torch_records(t, unit_spill(folder, n + len(paths) + i), n + len(paths) + i)
                    for i, t in enumerate(read))
            units: list[Unit] = []
            totals = _Totals()
            torch_paths: list[str] = []  # of each torch unit, in unit order (the inputs hold them anyway)
            spill_folder = str(folder)  # one string every unit refers to
            for i, meta in enumerate(itertools.chain(metas, done)):
                if meta["kind"] == "regions":
                    key = region_keys[i]
                else:
                    key = NO_RANK if meta["rank"] is None else meta["rank"]
                    if key not in ranks:
                        ranks[key] = RankRegions()
                    ranks[key].host = ranks[key].host or meta["host"]
                    torch_paths.append(meta["path"])
                ranks[key].units.append(i)
                units.append(Unit(key, spill_folder, i, meta["kind"], meta["records"], meta["min_ns"], meta["max_ns"]))
                totals.add(meta)
            del calls  # what the tasks were given is not kept for the merge (nor the ranks' region files)
            for r in ranks.values():
                r.regions = []
            if not full_paths:
                torch_paths, sources = [shown_path(p) for p in torch_paths], [shown_path(p) for p in sources]
                if traces_beside is not None:  # the folder searched, as the trace (and the terminal) show it
                    where = str(traces_beside)
                    found_warnings = [w.replace(where, shown_path(where)) for w in found_warnings]
            plan = _plan(ranks, syncs, units, totals, torch_paths, reference_rank, auto_align, sources, generator,
                         folder, found_warnings)
            plan.folder, plan.fan_in, plan.run = folder, fan_in, run
            yield plan
    finally:
        remove_scratch(folder)


SPILL_PER_TRACE_BYTE = 0.7  # spill bytes per byte of uncompressed torch trace, at least (0.69-0.87 on real traces)


def _json_size(path: str) -> int:
    """Uncompressed size of a trace file: its size, or a gzip's own record of it (modulo 4 GiB)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return os.fstat(fh.fileno()).st_size
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(size - 4, 0))
            raw = int.from_bytes(fh.read(4), "little")
    except OSError:
        return 0
    while raw < size:  # the trailer keeps the size modulo 4 GiB; a trace compresses, it never grows
        raw += 1 << 32
    return raw


def check_scratch_room(folder: Path, traces: Sequence[str]) -> None:
    """Refuse before the work when ``folder``'s filesystem has clearly less room than the spill files will take."""
    need = int(SPILL_PER_TRACE_BYTE * sum(_json_size(t) for t in traces))
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if need > free:
        raise UsageError(f"trace needs about {need / (1 << 20):,.0f} MB of scratch space for its spill files in "
                         f"{folder.parent} and {free / (1 << 20):,.0f} MB are free there; set TMPDIR to a folder "
                         "with more room (scratch space about the size of the output is needed)")


def _task(kind: str, *args: Any) -> dict[str, Any]:
    """One task of :func:`planned` (module level: process pools and Dask workers import it)."""
    if kind == "csv":
        return distribute_csv(*args)
    return layout_regions(*args) if kind == "regions" else layout_torch(*args)


def _pid(rank: int, ranks: dict[int, RankRegions]) -> int:
    return rank + 1 if rank != NO_RANK else max([k for k in ranks if k != NO_RANK], default=-1) + 2


class _Totals:
    """What the tasks' metadata adds up to (kept as it comes, so no task's metadata is held)."""

    def __init__(self) -> None:
        self.hist = [[0, 0] for _ in THRESHOLDS_US]
        self.counts = {"m": [0, 0], "f": [0, 0]}
        self.unpaired = 0
        self.arrows = 0

    def add(self, meta: dict[str, Any]) -> None:
        for cell, (c, b) in zip(self.hist, meta["hist"], strict=True):
            cell[0] += c
            cell[1] += b
        for kind, cell in self.counts.items():
            cell[0] += meta["counts"][kind][0]
            cell[1] += meta["counts"][kind][1]
        self.unpaired += meta.get("unpaired_flow_events", 0)
        self.arrows += meta.get("arrows_from_correlation", 0)

    @property
    def events(self) -> int:
        return self.counts["m"][0] + self.counts["f"][0] + sum(c for c, _b in self.hist)


class _AlignedStarts(Mapping[int, dict[int, float]]):
    """Each rank's aligned step starts, read from its regions unit's file when asked (one rank at a time)."""

    def __init__(self, ranks: dict[int, RankRegions], units: list[Unit], shifts: dict[int, tuple[float, float]]):
        self.ranks, self.units, self.shifts = ranks, units, shifts

    def __getitem__(self, k: int) -> dict[int, float]:
        r = self.ranks[k]  # KeyError for a rank that is not there, as a dict
        shift = self.shifts[k][0]
        out: dict[int, float] = {}
        for i in r.units:
            if self.units[i].kind == "regions":
                out.update({step: t + shift for step, t in step_starts(self.units[i].spill).items()})
        return out

    def __contains__(self, k: object) -> bool:
        return k in self.ranks  # without reading the file

    def __iter__(self) -> Iterator[int]:
        return iter(self.ranks)

    def __len__(self) -> int:
        return len(self.ranks)


def shown_path(path: str) -> str:
    """``path`` as written into a merged trace: relative to the working folder when inside it, else its file name."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return p.name


def _plan(ranks: dict[int, RankRegions], syncs: list[ClockSync], units: list[Unit], totals: _Totals,
          torch_paths: list[str], reference_rank: int, auto_align: bool, sources: Sequence[str], generator: str,
          folder: Path, found_warnings: list[str]) -> Plan:
    warnings: list[str] = list(found_warnings)
    measured = latest_per_rank(syncs)
    offsets = rebase(measured, reference_rank) if auto_align else {}
    if auto_align and len([k for k in ranks if k != NO_RANK]) > 1:
        missing = sorted(k for k in ranks if k not in offsets and k not in (NO_RANK, reference_rank))
        if missing:
            warnings.append(f"ranks {missing} have no clock_sync record: their timestamps are used as recorded "
                            "(call my_utils.distributed.align_clocks on every rank to measure the offsets)")
    shifts: dict[int, tuple[float, float]] = {}  # rank -> (shift for MyTimer, shift for torch), seconds
    for k in ranks:
        s = offsets.get(k)
        shifts[k] = (0.0, 0.0) if s is None else (0.0 if s.applied else s.offset_s, s.offset_s)
    warnings += uncertainty_warnings(offsets, _AlignedStarts(ranks, units, shifts), reference_rank)
    for u in units:
        u.shift_ns = us_to_ns(shifts[u.rank][0 if u.kind == "regions" else 1] * 1e6)
    starts = [u.min_ns + u.shift_ns for u in units if u.min_ns is not None]
    origin_s = math.floor(min(starts) / 1e9) if starts else 0
    origin_ns = origin_s * 1_000_000_000
    head, top_id = _layout(ranks, units, folder)
    offsets_out = JsonSpill(folder / "clock_offsets.json", "{}")
    for k in sorted(ranks):
        if k != NO_RANK:
            offsets_out.entry(str(k), {**(offsets[k].to_dict() if k in offsets else
                                         {"offset_s": None, "uncertainty_s": None, "reference_rank": None,
                                          "applied": None}),
                                      "shift_mytimer_s": shifts[k][0], "shift_torch_s": shifts[k][1]})
    clock_offsets = offsets_out.close()
    ranks_out = JsonSpill(folder / "ranks.json")
    first_torch = len(units) - len(torch_paths)  # the torch units follow the regions units
    for k, r in sorted(ranks.items()):
        ranks_out.item({"rank": None if k == NO_RANK else k, "pid": _pid(k, ranks), "host": r.host or None,
                        "torch_traces": [torch_paths[i - first_torch] for i in r.units if units[i].kind == "torch"]})
    ranks_spilled = ranks_out.close()
    sources_out = JsonSpill(folder / "sources.json")
    for source in itertools.chain(sources, torch_paths):
        sources_out.item(source)
    sources_spilled = sources_out.close()
    other = {
        "schema_version": TRACE_SCHEMA_VERSION,
        "generator": generator,
        "time_base": "microseconds since time_origin_unix_s on the reference rank's clock",
        "time_origin_unix_s": origin_s,
        "reference_rank": reference_rank,
        "auto_align_ranks": auto_align,
        "clock_offsets": clock_offsets,
        "ranks": ranks_spilled,
        "sources": sources_spilled,
        "warnings": warnings,
    }
    if totals.unpaired:
        other["unpaired_flow_events_dropped"] = totals.unpaired
    if totals.arrows:  # the traces had no flow events: these arrows were drawn from args.correlation
        other["arrows_from_correlation"] = totals.arrows
    return Plan(head, other, warnings, units, origin_ns, _sizes(units, totals, top_id, origin_ns), totals.events)


def _layout(ranks: dict[int, RankRegions], units: list[Unit], folder: Path) -> tuple[Spilled, int]:
    """Process and lane metadata, rank by rank, into a scratch file (the in-memory layout's order); each unit's
    lane → (pid, tid) into its ids file. Returns the metadata and the largest pid or tid."""
    out = JsonSpill(folder / "metadata.json", "")
    count = 0  # metadata events written (a thread's sort index)
    top = next_tid = max((_pid(k, ranks) for k in ranks), default=0) + 1
    top -= 1
    for sort_index, (k, r) in enumerate(sorted(ranks.items(), key=lambda kv: (kv[0] == NO_RANK, kv[0]))):
        pid = _pid(k, ranks)
        label = "rank unknown" if k == NO_RANK else f"rank {k}"
        out.item({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                  "args": {"name": f"{label} ({r.host or 'unknown host'})"}})
        out.item({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": pid, "args": {"sort_index": sort_index}})
        count += 2
        n_torch = sum(units[i].kind == "torch" for i in r.units)
        lanes: list[tuple[str, int, int, int, tuple[Any, ...]]] = []  # name, overlap index, unit, lane, sort key
        ids: dict[int, list[tuple[int, int]]] = {}
        t = 0
        for i in r.units:
            u = units[i]
            if u.kind == "torch":
                t += 1
            with open(lanes_path(u.spill), encoding="utf-8") as fh:
                unit_lanes = json.load(fh)
            ids[i] = [(0, 0)] * len(unit_lanes)
            for idx, (base, j, order) in enumerate(unit_lanes):
                if u.kind == "regions":
                    name, key = base, (-1, "", 0, 0, base)
                elif order[0]:  # a device's stream: "GPU 0 · stream 7", below every CPU thread
                    name, key = f"{base}{'' if n_torch == 1 else f' (torch #{t})'}", (*order[:4], order[4], t)
                else:
                    name = f"torch{'' if n_torch == 1 else f' #{t}'}: {base}"
                    key = (0, "", 0, 0, name)
                lanes.append((name, j, i, idx, key))
        for name, j, i, idx, _key in sorted(lanes, key=lambda x: (x[4], x[1])):
            tid, next_tid = next_tid, next_tid + 1
            ids[i][idx] = (pid, tid)
            out.item({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                      "args": {"name": name if j == 0 else f"{name} (overlapping {j})"}})
            count += 1
            out.item({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": count}})
            count += 1
            top = max(top, tid)
        for i, unit_ids in ids.items():
            try:
                with open(ids_path(units[i].spill), "w", encoding="utf-8") as fh:
                    fh.write(dump(unit_ids))
            except OSError as exc:
                raise scratch_error(exc, ids_path(units[i].spill)) from None
    return out.close(), top


def _sizes(units: list[Unit], totals: _Totals, top_id: int, origin_ns: int) -> Sizes:
    ends = [u.max_ns + u.shift_ns for u in units if u.max_ns is not None]
    starts = [u.min_ns + u.shift_ns for u in units if u.min_ns is not None]
    widest = max([len(format_us(t - origin_ns)) for t in ends + starts] or [0])
    digits = len(str(top_id))
    # '{"ts":T,"pid":P,"tid":T,' replaces the text's '{', and a ',' separates events
    overhead = len('{"ts":,"pid":,"tid":,') - 1 + widest + 2 * digits + 1
    return Sizes(overhead, (totals.counts["m"][0], totals.counts["m"][1]),
                 (totals.counts["f"][0], totals.counts["f"][1]), [(c, b) for c, b in totals.hist])

"""Per-rank step and collective times of Kineto traces and nsys exports, for ``myutils stragglers``.

The entry point ``my_utils.rank_timings: profiling`` (:func:`read_timings`) hands other
distributions :class:`my_utils.core.rank_timings.RankTimings`, built with this package's own
readers, so nothing is parsed a second way:

- **Kineto**: the trace is read once (``analysis.kineto.run.read_rank``, operators left out);
  steps are the ``ProfilerStep#N`` ranges, collectives the communication kernels on the GPU as
  ``analysis.kineto.arrivals`` matches them across ranks (torch's process group, collective and
  sequence number when the kernel carries them, else kernel name and occurrence); the host from
  the trace's context or the ``tensorboard_trace_handler`` file name.
- **nsys**: ranks as ``nsys.ranks`` assigns them (template, launcher environment such as
  ``PMI_RANK``, file name, file order); one participant per (export, process, device) as
  ``nsys.nccl`` numbers them; steps from NVTX iteration ranges (``nsys.iterations``' defaults,
  so ``ncclCommInitRank`` is never a step); collectives the communication kernels on the UTC
  epoch (each export's anchor); ``setup_end_us`` the end of the communicator's initialisation
  (``nsys.setup``'s ``communicator init`` windows).

A file of neither kind is left to other readers (the function returns None when it took none).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.rank_timings import KINETO_TRACE, NSYS_EXPORT, CollectiveArrival, RankTimings, StepSpan

if TYPE_CHECKING:
    from my_utils.profiling.nsys.schema import NsysExport

__all__ = ["read_timings"]

KINETO_CLOCK = "the trace's clock (µs); traces of different hosts share none unless their clocks were synchronised"
NSYS_CLOCK = "UTC epoch (each export's anchor); hosts' clock errors stay in cross-host differences"


def read_timings(paths: Sequence[Path]) -> list[RankTimings] | None:
    """The timings of every Kineto trace and nsys export among ``paths``; None when there is none."""
    from my_utils.profiling.formats.kinds import FileKind
    from my_utils.profiling.formats.sniff import sniff

    kineto: list[Path] = []
    nsys: list[Path] = []
    for path in paths:
        kind = sniff(Path(path)).kind
        if kind is FileKind.KINETO_TRACE:
            kineto.append(Path(path))
        elif kind is FileKind.NSYS_SQLITE:
            nsys.append(Path(path))
    if not kineto and not nsys:
        return None
    return _kineto(kineto) + _nsys(nsys)


def _kineto(paths: list[Path]) -> list[RankTimings]:
    from my_utils.profiling.kineto.arrivals import arrival_tables
    from my_utils.profiling.kineto.run import read_rank

    out: list[tuple[int | None, RankTimings]] = []
    for path in paths:
        read = read_rank(path, keep_ops=False)
        d = read.data
        steps = tuple(sorted((StepSpan(int(n), ts + d.base_us, ts + dur + d.base_us)
                              for ts, dur, n, *_rest in d.step_events), key=lambda s: (s.step, s.start_us)))
        collectives = tuple(_kineto_arrival(row) for row in arrival_tables(d).get("_arrivals", ()))
        host = d.context.get("host")
        notes = () if steps else ("no ProfilerStep#N range: no step times",)
        out.append((d.rank, RankTimings(
            rank=-1, source=str(path), kind=KINETO_TRACE, rank_source=read.rank_source,
            host=host if isinstance(host, str) and host else None, clock=KINETO_CLOCK, steps=steps,
            collectives=collectives, notes=notes)))
    return _numbered(out)


def _kineto_arrival(row: dict[str, Any]) -> CollectiveArrival:
    """One ``_arrivals`` row (``arrivals.arrival_tables``): its key split back into a name and a sequence number."""
    key = str(row["key"])
    if "|" in key:  # "<process group>|<collective>|<Seq>"
        group, collective, seq = key.rsplit("|", 2)
        name = f"{collective} (process group {group})" if group else collective
    else:  # "<kernel name>#<occurrence>"
        name, _, seq = key.rpartition("#")
    ts, dur, step = float(row["ts"]), float(row["dur"]), row.get("step")
    return CollectiveArrival(name, int(seq), ts, ts + dur, step if isinstance(step, int) else None)


def _numbered(found: list[tuple[int | None, RankTimings]]) -> list[RankTimings]:
    """Give each trace its rank; traces that name none take the free numbers in file order (said as such)."""
    from dataclasses import replace

    from my_utils.core.errors import InputError

    taken: dict[int, str] = {}
    for rank, t in found:
        if rank is not None:
            if rank in taken:
                raise InputError(t.source, None, f"one trace per rank; rank {rank} is also {taken[rank]}")
            taken[rank] = t.source
    free = (n for n in range(len(found) + len(taken)) if n not in taken)
    out = []
    for rank, t in found:
        if rank is None:
            out.append(replace(t, rank=next(free), rank_source="file order (the trace names no rank)"))
        else:
            out.append(replace(t, rank=rank))
    return sorted(out, key=lambda t: t.rank)


def _nsys(paths: list[Path]) -> list[RankTimings]:
    if not paths:
        return []
    from contextlib import ExitStack

    from my_utils.profiling.formats.ranks import expand_inputs
    from my_utils.profiling.nsys.hosts import export_host
    from my_utils.profiling.nsys.nccl import participants
    from my_utils.profiling.nsys.schema import NsysExport

    inputs = expand_inputs(paths)
    out = []
    with ExitStack() as stack:
        dbs = [stack.enter_context(NsysExport(x.path, rank=x.rank)) for x in inputs]
        source = {id(db): x.rank_source for db, x in zip(dbs, inputs, strict=True)}
        hosts = {id(db): export_host(db)[0] for db in dbs}
        setup = {id(db): _setup_ends(db) for db in dbs}
        steps = {id(db): _iterations(db) for db in dbs}
        for part, db in participants(dbs):
            offset = db.epoch_offset_ns
            shift = (offset or 0) / 1e3
            notes = []
            if offset is None:
                notes.append("the export has no UTC anchor: its times are on its own session clock")
            mine = steps[id(db)].get(part.pid, ())
            if not mine:
                notes.append("no NVTX iteration range (train_step, ProfilerStep#N, step...) repeats: no step times")
            end = setup[id(db)].get(part.pid)
            out.append(RankTimings(
                rank=part.rank, source=str(db.path), kind=NSYS_EXPORT,
                rank_source=source[id(db)] if part.rank == part.export_rank else "participant order (export, device)",
                host=hosts[id(db)], clock=NSYS_CLOCK if offset is not None else "the export's session clock (ns)",
                steps=tuple(StepSpan(n, s / 1e3 + shift, e / 1e3 + shift) for n, s, e in mine),
                collectives=_nsys_collectives(db, part.pid, part.device, shift),
                setup_end_us=None if end is None else end / 1e3 + shift, notes=tuple(notes)))
    return sorted(out, key=lambda t: t.rank)


def _nsys_collectives(db: NsysExport, pid: int | None, device: int | None, shift_us: float) -> tuple[CollectiveArrival, ...]:
    """The participant's communication kernels in time order, numbered per collective."""
    rows = db.query(
        "SELECT COALESCE(collective, 'unknown'), start, end FROM nsys_kernel WHERE kind = 'communication' "
        "AND pid IS ? AND device IS ? ORDER BY start, end", (pid, device), place="NCCL kernels")
    seen: Counter[str] = Counter()
    out = []
    for name, start, end in rows:
        out.append(CollectiveArrival(str(name), seen[name], start / 1e3 + shift_us, end / 1e3 + shift_us))
        seen[name] += 1
    return tuple(out)


def _iterations(db: NsysExport) -> dict[int | None, list[tuple[int, int, int]]]:
    """Per process: (iteration, start ns, end ns) of the NVTX iteration ranges, when a default range repeats."""
    from my_utils.profiling.nsys.iterations import find_iterations

    found = find_iterations(db)
    per: dict[int | None, dict[int, tuple[int, int]]] = {}
    if found is None:
        return {}
    for r in found.table.records():
        if isinstance(r.get("iteration"), int) and r.get("start") is not None and r.get("end") is not None:
            per.setdefault(r.get("pid"), {}).setdefault(r["iteration"], (int(r["start"]), int(r["end"])))
    return {pid: [(n, s, e) for n, (s, e) in sorted(its.items())] for pid, its in per.items()}


def _setup_ends(db: NsysExport) -> dict[int | None, int]:
    """Per process: the end (ns, session clock) of its communicator initialisation, when the export shows it."""
    from my_utils.profiling.nsys.setup import windows

    ends: dict[int | None, int] = {}
    for w in windows(db, None):
        if w.kind == "communicator init":
            ends[w.pid] = max(ends.get(w.pid, w.end), w.end)
    return ends

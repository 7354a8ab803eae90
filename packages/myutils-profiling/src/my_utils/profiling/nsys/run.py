"""A run of one or many exports (one per rank, or one holding several GPUs): every summary, plus NCCL across ranks.

:func:`analyze_run` opens each export once: it summarises it, hands the open export to the
caller's ``visit`` (the ``nsys_sqlite`` provider reads its events there, so a command that both
ingests and analyses an export opens it once), and keeps it open to line up the NCCL
collectives of all of them. ``RunSummary.tables()``
joins the per-export tables (each row carries its ``rank``) and adds ``nsys_nccl_ranks``
(per rank and collective), ``nsys_nccl_skew`` (the collectives with the largest
arrival skew) and ``nsys_nccl_sizes`` (per rank, collective and message size: bandwidths, or
why the size is not recorded); ``facts()`` gives every export's facts and the NCCL ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from my_utils.profiling.formats.ranks import RankInput, expand_inputs
from my_utils.profiling.nsys.analyze import summarize
from my_utils.profiling.nsys.mfu import ModelFlops
from my_utils.profiling.nsys.model import ExportSummary, Table, concat
from my_utils.profiling.nsys.nccl import NcclAnalysis, analyze_collectives
from my_utils.profiling.nsys.overview import rank_overview
from my_utils.profiling.nsys.schema import NsysExport


@dataclass(frozen=True)
class RunSummary:
    """The summaries of a run's exports, in rank order, and the cross-rank NCCL analysis (None without NCCL)."""

    inputs: tuple[RankInput, ...]
    exports: tuple[ExportSummary, ...]
    nccl: NcclAnalysis | None
    pipeline: tuple[dict[str, Any], ...] = ()  # nsys_pipeline_bubble rows (nsys.pipeline)

    def tables(self) -> dict[str, Table]:
        """Every table of every export joined by name (rows keep their ``rank``), plus the NCCL tables."""
        names: list[str] = []
        for s in self.exports:
            names += [n for n in s.tables if n not in names]
        out = {n: concat(n, [s.table(n) for s in self.exports if len(s.table(n).columns)]) for n in names}
        out["nsys_rank_overview"] = rank_overview(self)
        its = [s.iterations.table for s in self.exports if s.iterations is not None]
        if its:
            out["nsys_iterations"] = concat("nsys_iterations", its)
        if self.nccl is not None:
            out["nsys_nccl_ranks"] = _rows("nsys_nccl_ranks", [{**asdict(r), "transfer_ns": r.total_ns - r.wait_ns}
                                                               for r in self.nccl.per_rank])
            out["nsys_nccl_skew"] = _rows("nsys_nccl_skew", [
                {**{k: v for k, v in asdict(c).items() if k != "waits_ns"},
                 "waits_ms": "; ".join(f"rank {r}: {w / 1e6:.3f}" for r, w in c.waits_ns)} for c in self.nccl.worst_skew])
            out["nsys_nccl_hosts"] = _rows("nsys_nccl_hosts", [
                {**asdict(h), "ranks": ", ".join(map(str, h.ranks)), "mean_lag_ns": h.mean_lag_ns}
                for h in self.nccl.hosts])
            out["nsys_nccl_sizes"] = _rows("nsys_nccl_sizes", [asdict(r) for r in self.nccl.sizes])
        if self.pipeline:
            out["nsys_pipeline_bubble"] = _rows("nsys_pipeline_bubble", list(self.pipeline))
        return out

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the numbers cannot show: ranks of the job's world that no export holds (``rank_coverage``)."""
        from my_utils.profiling.model.rank_coverage import rank_coverage

        sources = sorted({i.world_source.removeprefix("environment ") for i in self.inputs if i.world_size is not None})
        cov = rank_coverage((i.rank for i in self.inputs), (i.world_size for i in self.inputs),
                            "the launch environment nsys recorded (" + ", ".join(sources) + ")")
        text = cov.warning("export") if cov is not None else None
        return (text,) if text else ()

    def facts(self) -> list[Any]:
        """Every export's facts, then the NCCL facts."""
        out = [f for s in self.exports for f in s.facts()]
        return out + (self.nccl.facts() if self.nccl is not None else [])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: inputs with their ranks, each export's summary, the NCCL analysis."""
        return {
            "inputs": [{"path": str(i.path), "rank": i.rank, "rank_source": i.rank_source,
                        "world_size": i.world_size, "world_source": i.world_source} for i in self.inputs],
            "warnings": list(self.warnings),
            "exports": [s.to_dict() for s in self.exports],
            "nccl": None if self.nccl is None else {
                "participants": [asdict(p) for p in self.nccl.participants],
                "aligned": self.nccl.aligned, "collectives": self.nccl.collectives,
                "message_bytes": self.nccl.message_bytes, "clock_note": self.nccl.clock_note,
                "unmatched": dict(self.nccl.unmatched),
                "per_rank": [asdict(r) for r in self.nccl.per_rank],
                "worst_skew": [asdict(c) for c in self.nccl.worst_skew],
                "sizes": [asdict(r) for r in self.nccl.sizes],
                "hosts": [asdict(h) for h in self.nccl.hosts],
                "facts": [f.to_dict() for f in self.nccl.facts()]},
        }


def _init_ends(exports: Sequence[ExportSummary]) -> dict[tuple[str, int | None], int]:
    """(export label, pid) -> end of the process's communicator initialisation on the UTC epoch (``nsys_setup``)."""
    out = {}
    for s in exports:
        for r in s.table("nsys_setup").where(kind="communicator init"):
            if s.epoch_offset_ns is not None:
                out[(s.label, r["pid"])] = int(r["last_end"]) + s.epoch_offset_ns
    return out


def _rows(name: str, records: list[dict[str, Any]]) -> Table:
    if not records:
        return Table(name, (), ())
    cols = tuple(records[0])
    return Table(name, cols, tuple(tuple(r[c] for c in cols) for r in records))


def analyze_run(specs: Sequence[str | Path], *, iteration_range: str | None = None, top: int = 10,
                message_bytes: int | None = None, visit: Callable[[NsysExport], object] | None = None,
                model: ModelFlops | None = None) -> RunSummary:
    """Analyse the exports named by ``specs`` (files, folders, globs, ``%q{RANK}`` templates).

    ``visit`` is called with each open export (views made, its rank set) after its summary;
    ``model`` (the FLOPs of one GPU's iteration, the dtype) gives each export's MFU.
    """
    from my_utils.profiling.nsys.pipeline import export_ranges, pipeline_rows

    inputs = expand_inputs(specs)
    single = len(inputs) == 1
    exports: list[ExportSummary] = []
    ranges: list[tuple[Any, bool]] = []
    with contextlib.ExitStack() as stack:
        dbs = []
        for i in inputs:
            db = stack.enter_context(NsysExport(i.path, rank=None if single and i.rank_source == "none" else i.rank))
            exports.append(summarize(db, iteration_range=iteration_range, top=top, model=model))
            ranges.append((export_ranges(db), db.epoch_offset_ns is not None))
            if visit is not None:
                visit(db)
            dbs.append(db)
        nccl = analyze_collectives(dbs, message_bytes=message_bytes, init_end=_init_ends(exports))
    return RunSummary(tuple(inputs), tuple(exports), nccl, tuple(pipeline_rows(ranges)))

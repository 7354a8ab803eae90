"""One export → an :class:`~.model.ExportSummary`: every number aggregated in SQL by the named queries.

The analyses are the built-in named queries themselves (``myutils-profile nsys sql show
gpu_busy_device`` prints what is computed), run once each on the canonical views; Python
only adds the rank column, picks the iteration range and computes per-iteration statistics
over the (small) per-iteration table. Memory therefore follows the number of kernels
*names*, devices, streams and iterations, never the number of rows in the export.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from my_utils.profiling.nsys.hosts import export_host
from my_utils.profiling.nsys.iterations import find_iterations
from my_utils.profiling.nsys.mfu import ModelFlops, mfu_rows
from my_utils.profiling.nsys.model import ExportSummary, Table
from my_utils.profiling.nsys.plausible import check_copies
from my_utils.profiling.nsys.queries import run_builtin
from my_utils.profiling.nsys.schema import NsysExport
from my_utils.profiling.nsys.setup import setup_tables

KINDS = ("computation", "communication", "memory", "other")
#: The tables of a summary: table name -> (built-in query, parameters).
SUMMARY_QUERIES: dict[str, tuple[str, dict[str, object]]] = {
    "nsys_busy_device": ("gpu_busy_device", {}),
    "nsys_busy_stream": ("gpu_busy_stream", {}),
    "nsys_busy_kind": ("gpu_busy_kind", {}),
    "nsys_idle_causes": ("gpu_idle_causes", {}),
    "nsys_overlap": ("comm_compute_overlap", {}),
    "nsys_kernel_kinds": ("kernel_kinds", {}),
    "nsys_copies": ("memcpy_summary", {}),
    "nsys_cuda_api": ("cuda_api_summary", {}),
    "nsys_osrt": ("osrt_summary", {}),
    "nsys_nvtx": ("nvtx_summary", {}),
    "nsys_nccl_kernels": ("nccl_kernels", {}),
    "nsys_launch_short": ("launch_short_kernels", {}),
}


def summarize(source: str | Path | NsysExport, *, rank: int | None = None, iteration_range: str | None = None,
              top: int = 10, slowest: int = 10, model: ModelFlops | None = None) -> ExportSummary:
    """Analyse one export (a path, or an open :class:`NsysExport` that stays open).

    ``iteration_range`` names the NVTX range of one iteration (GLOB pattern); without it the
    usual step ranges are tried (:data:`.iterations.DEFAULT_RANGES`). ``top`` kernels per kind
    and the ``slowest`` CUDA API calls are kept. ``model`` states the FLOPs of an iteration and
    its dtype for the MFU (``nsys_mfu``, :mod:`.mfu`); without it MFU is "not measured".
    """
    if isinstance(source, NsysExport):
        return _summarize(source, iteration_range, top, slowest, model)
    with NsysExport(source, rank=rank) as db:
        return _summarize(db, iteration_range, top, slowest, model)


def _summarize(db: NsysExport, iteration_range: str | None, top: int, slowest: int,
               model: ModelFlops | None = None) -> ExportSummary:
    db.ensure_views()
    tables: dict[str, Table] = {}
    for name, (query, params) in SUMMARY_QUERIES.items():
        limit = {"limit": top} if query in ("cuda_api_summary", "osrt_summary", "nvtx_summary") else {}
        tables[name] = _ranked(db, name, query, {**params, **limit})
    kernels = [_ranked(db, "nsys_top_kernels", "kernel_summary", {"kind": k, "limit": top}) for k in KINDS]
    tables["nsys_top_kernels"] = Table("nsys_top_kernels", kernels[0].columns, tuple(r for t in kernels for r in t.rows))
    tables["nsys_cuda_api_slowest"] = _ranked(db, "nsys_cuda_api_slowest", "cuda_api_slowest", {"limit": slowest})
    per_device = [(d, _ranked(db, "nsys_top_kernel_device", "kernel_summary", {"device": d, "limit": 1}))
                  for d in (tables["nsys_busy_device"].column("device") if len(tables["nsys_busy_device"].columns)
                            else [])]
    tables["nsys_top_kernel_device"] = Table(
        "nsys_top_kernel_device", ("device", *per_device[0][1].columns) if per_device else (),
        tuple((d, *r) for d, t in per_device for r in t.rows))
    used = set(tables["nsys_busy_device"].column("device")) if len(tables["nsys_busy_device"].columns) else set()
    tables["nsys_copies"] = check_copies(tables["nsys_copies"], db.gpus(), used)
    iterations = find_iterations(db, iteration_range)
    tables.update(setup_tables(db, iterations))
    missing = _not_measured(db, tables, iterations is not None, iteration_range)
    rows = mfu_rows(db.rank, db.gpus(), iterations, model, missing.get("iterations", ""))
    records = [dataclasses.asdict(r) for r in rows]
    tables["nsys_mfu"] = Table("nsys_mfu", tuple(records[0]), tuple(tuple(r.values()) for r in records))
    if all(r.mfu_pct is None for r in rows):
        missing["mfu"] = rows[0].not_measured or "MFU could not be computed"
    host, host_source = export_host(db)
    return ExportSummary(
        label=db.label, path=str(db.path), rank=db.rank, meta=db.meta, gpus=db.gpus(),
        epoch_offset_ns=db.epoch_offset_ns, tables=tables, iterations=iterations, not_measured=missing,
        host=host, host_source=host_source,
    )


def _ranked(db: NsysExport, name: str, query: str, params: dict[str, object]) -> Table:
    result = run_builtin(db, query, params)
    return Table(name, ("rank", *result.columns), tuple((db.rank, *r) for r in result.rows))


def _not_measured(db: NsysExport, tables: dict[str, Table], has_iterations: bool,
                  iteration_range: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if not len(tables["nsys_busy_device"]):
        out["gpu"] = "no kernel, copy or set in the export (CUDA tracing off, or no GPU work in the window)"
    if "OSRT_API" not in db.tables:
        out["osrt"] = "OS runtime calls were not traced (nsys profile --trace osrt)"
    elif not len(tables["nsys_osrt"]):
        out["osrt"] = "no OS runtime call in the export (traced with --trace osrt, none recorded in the window)"
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in db.tables:
        out["cuda_api"] = "CUDA API calls were not traced (nsys profile --trace cuda)"
    if "NVTX_EVENTS" not in db.tables or not len(tables["nsys_nvtx"]):
        out["nvtx"] = "no NVTX ranges in the export (nsys profile --trace nvtx, and ranges in the program)"
    if not has_iterations:
        out["iterations"] = (f"no NVTX range matches {iteration_range!r}" if iteration_range else
                             "no iteration range found (name one with --iteration-range; tried the step ranges "
                             "of MyTimer, the labelers and torch.profiler)")
    comm = [r for r in tables["nsys_overlap"].records() if (r.get("communication_ns") or 0) > 0]
    if not comm:
        out["communication"] = "no communication (NCCL) kernels in the export"
    if not db.gpus():
        out["gpu_model"] = "the export has no GPU table (sliced or filtered export): GPU model unknown"
    return out

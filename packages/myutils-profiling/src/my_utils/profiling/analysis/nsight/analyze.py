"""Nsight Systems exports and Nsight Compute CSVs in the one analysis (ARCHITECTURE.md §8).

When a run's inputs include nsys exports or ncu CSVs — given by the caller (``analyze --nsys`` /
``--ncu``), or named in the events (``attrs["file"]`` of ``nsys_sqlite`` / ``ncu_csv`` events,
looked up beside the events file, as the Kineto traces are) — :func:`analyze_nsight` runs the
Nsight analyses once (``nsys.run.analyze_run``, ``ncu.analysis.analyze_launches``) and returns:

- their tables as report tables (JSON rows): ``nsys_busy_device``, ``nsys_busy_kind``,
  ``nsys_idle_causes``, ``nsys_overlap``, ``nsys_kernel_kinds``, ``nsys_copies``,
  ``nsys_cuda_api``, ``nsys_osrt``, ``nsys_iterations``, ``nsys_nccl_ranks``... (every table of
  ``RunSummary.tables()``), ``ncu_kernels``, ``ncu_rules``, and ``nsys_inputs`` (the exports read,
  their ranks and GPUs);
- their facts as ``model.report.Fact`` (``nsys.*``, ``ncu.*``), and the run-level facts the
  headline shows (:mod:`.nsight_facts`: ``gpu.busy``, ``gpu.idle``, ``comm.overlap``, ``step_time.*``,
  ``context.gpu``... with source ``nsys``), which stand in for the torch.profiler ones only where
  those are not measured (:func:`merge_facts`);
- the GPU the exports name, for the report's ``hardware``.

A caller that already read the files (``analyze --nsys`` reads each export once for both the
events and the analyses) passes what it made in :class:`NsightInputs`; nothing is parsed twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from my_utils.profiling.model.report import Fact

_log = logging.getLogger("my_utils.profiling.analysis")

NSYS_SOURCE = "nsys_sqlite"
NCU_SOURCE = "ncu_csv"
#: Event sources whose files the analyzer looks for (the providers put the file name in ``attrs["file"]``).
SOURCES = frozenset({NSYS_SOURCE, NCU_SOURCE})


@dataclass(frozen=True)
class NsightInputs:
    """What to analyse: export paths, or what the caller already made from them in its own pass.

    ``nsys_run`` is an ``nsys.run.RunSummary``; ``ncu_launches`` the ``ncu.launches.NcuLaunch``
    records of the CSVs. ``iteration_range`` names the NVTX range of one iteration (GLOB);
    ``gpu`` the GPU model for the Nsight Compute roofline when no input records it; ``model``
    (``nsys.mfu.ModelFlops``) the FLOPs of an iteration and their dtype, for the nsys exports' MFU.
    """

    nsys: tuple[Path, ...] = ()
    ncu: tuple[Path, ...] = ()
    nsys_run: Any = None
    ncu_launches: tuple[Any, ...] | None = None
    iteration_range: str | None = None
    gpu: str | None = None
    missing: tuple[tuple[str, str], ...] = ()  # (source, file name) the events name that were not found
    model: Any = None

    def __bool__(self) -> bool:
        return bool(self.nsys or self.ncu or self.nsys_run is not None or self.ncu_launches is not None)


@dataclass(frozen=True)
class NsightResult:
    """Tables (JSON rows), facts, a note saying what was analysed, and the GPU description the exports give."""

    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)
    note: str = ""
    hardware: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the numbers cannot show (missing ranks)


def find_named(files: Iterable[tuple[str, str]], events_path: str | Path | None) -> NsightInputs:
    """The exports that events name (``(source, file name)`` pairs), looked up beside the events file."""
    named = sorted(set(files))
    if not named or events_path is None:
        return NsightInputs(missing=tuple(named))
    root = Path(events_path).parent
    found: dict[str, list[Path]] = {NSYS_SOURCE: [], NCU_SOURCE: []}
    missing = []
    from my_utils.profiling.formats._files import locate_named

    # names read from the events are names inside the events' folder, never patterns or ways out
    located, _missing, _ambiguous = locate_named(root, {name for _, name in named})
    for source, name in named:
        if name in located:
            found[source].append(located[name])
        else:
            missing.append((source, name))
    return NsightInputs(nsys=tuple(found[NSYS_SOURCE]), ncu=tuple(found[NCU_SOURCE]), missing=tuple(missing))


def combine(given: NsightInputs | None, found: NsightInputs) -> NsightInputs:
    """What the caller gave, per tool; the files the events name for a tool the caller said nothing about."""
    if given is None:
        return found
    has_nsys = bool(given.nsys) or given.nsys_run is not None
    has_ncu = bool(given.ncu) or given.ncu_launches is not None
    found_missing = tuple((src, n) for src, n in found.missing
                          if not (has_nsys if src == NSYS_SOURCE else has_ncu))
    return NsightInputs(nsys=given.nsys if has_nsys else found.nsys, ncu=given.ncu if has_ncu else found.ncu,
                        nsys_run=given.nsys_run, ncu_launches=given.ncu_launches,
                        iteration_range=given.iteration_range, gpu=given.gpu, missing=found_missing,
                        model=given.model)


def _records(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()} for r in rows]


def nsys_tables(run: Any) -> dict[str, list[dict[str, Any]]]:
    """Every table of an ``nsys.run.RunSummary`` as JSON rows, and ``nsys_inputs`` (one row per export)."""
    out = {name: _records(t.records()) for name, t in run.tables().items() if len(t.columns)}
    out["nsys_inputs"] = [{
        "file": Path(s.path).name, "rank": s.rank, "rank_source": i.rank_source, "world_size": i.world_size,
        "world_source": i.world_source or None, "host": s.host,
        "host_source": s.host_source, "exporter": s.meta.era,
        "schema": s.meta.family, "gpus": ", ".join(sorted({g.name for g in s.gpus})) or None,
        "not_measured": "; ".join(f"{k}: {v}" for k, v in s.not_measured.items()) or None,
    } for i, s in zip(run.inputs, run.exports, strict=True)]
    return out


def ncu_tables(analysis: Any) -> dict[str, list[dict[str, Any]]]:
    """``ncu_kernels`` (one row per kernel) and ``ncu_rules`` (one row per rule row, ``index`` as the facts cite it)."""
    kernels = _records(asdict(k) for k in analysis.kernels)
    rules = [{"index": i, **{k: v for k, v in asdict(r).items() if k != "description"},
              "description": r.description} for i, r in enumerate(analysis.rules)]
    return {"ncu_kernels": kernels, "ncu_rules": rules}


def _gpu_hint(*candidates: Any) -> str | None:
    for c in candidates:
        if isinstance(c, str) and c:
            return c
        if isinstance(c, list) and len({str(x) for x in c}) == 1:
            return str(c[0])
    return None


def analyze_nsight(inputs: NsightInputs, hardware: Mapping[str, Any] | None = None) -> NsightResult:
    """Run the Nsight analyses on ``inputs`` (module docstring); bad input raises ``InputError``."""
    from my_utils.profiling.analysis.nsight.facts import run_facts

    hardware = hardware or {}
    tables: dict[str, list[dict[str, Any]]] = {}
    facts: list[Fact] = []
    notes: list[str] = []
    hw: dict[str, Any] = {}
    files: list[str] = []
    run = inputs.nsys_run
    if run is None and inputs.nsys:
        from my_utils.profiling.nsys.run import analyze_run

        run = analyze_run(inputs.nsys, iteration_range=inputs.iteration_range, model=inputs.model)
    if run is not None:
        tables.update(nsys_tables(run))
        facts += [f.to_fact() for f in run.facts()]
        hw = nsys_hardware(run)
        files += [Path(s.path).name for s in run.exports]
        notes.append(f"Nsight Systems analyses of {len(run.exports)} export(s)")
    launches = inputs.ncu_launches
    if launches is None and inputs.ncu:
        from my_utils.profiling.ncu.launches import read_launches

        launches = tuple(x for p in inputs.ncu for x in read_launches(p))
    if launches is not None:
        from my_utils.profiling.ncu.analysis import analyze_launches

        gpu = _gpu_hint(inputs.gpu, hardware.get("gpu"), hw.get("gpu"))
        a = analyze_launches(list(launches), gpu=gpu)
        tables.update(ncu_tables(a))
        facts += [f.to_fact() for f in a.facts()]
        files += list(a.files)
        notes.append(f"Nsight Compute analyses of {len(a.files)} export(s), {len(a.kernels)} kernel(s)"
                     + (f" (roofline against {gpu})" if gpu else " (no GPU named: roofline not measured)"))
    if inputs.missing:
        notes.append(missing_note(inputs))
    facts += run_facts(tables)
    return NsightResult(tables, facts, "; ".join(notes), hw, files,
                        list(run.warnings) if run is not None else [])


def missing_note(inputs: NsightInputs, events_in_memory: bool = False) -> str:
    """What the events name that could not be found (so was not analysed)."""
    names = ", ".join(n for _, n in inputs.missing)
    if events_in_memory:
        return (f"named in the events, not analysed: {names} (events given in memory; name the exports: "
                "analyze --nsys/--ncu, or MetricsAnalyzer(nsight=NsightInputs(...)))")
    return f"named in the events, not found beside them (not analysed): {names}"


def nsys_hardware(run: Any) -> dict[str, Any]:
    """The GPU the exports name (as they name it) and its model in the hardware table, for the report's ``hardware``."""
    from my_utils.profiling.hardware.table import gpu_model

    names = sorted({g.name for s in run.exports for g in s.gpus
                    if g.device in {r["device"] for r in s.table("nsys_busy_device").records()}})
    if not names:
        return {}
    out: dict[str, Any] = {"gpu": names[0] if len(names) == 1 else names, "source": "nsys export (GPU table)"}
    models = sorted({m for n in names if (m := gpu_model(n)) is not None})
    if models:
        out["gpu_model"] = models[0] if len(models) == 1 else models
    out["gpu_count"] = sum(len(s.table("nsys_busy_device")) for s in run.exports)
    return out


def merge_facts(base: Sequence[Fact], extra: Sequence[Fact]) -> list[Fact]:
    """``base`` with ``extra`` added: an extra fact takes the place of a base fact of its id that is not measured
    (its figure, or its own reason); a measured base fact stays (the torch.profiler analyses' figures win where both
    measured one); new ids are added."""
    out = list(base)
    index = {f.id: i for i, f in enumerate(out)}
    for f in extra:
        i = index.get(f.id)
        if i is None:
            index[f.id] = len(out)
            out.append(f)
        elif not out[i].measured:  # a figure, or a reason that names what the exports lack
            out[i] = f
    return out


def measured_dimensions(unmeasured: Mapping[str, str], tables: Mapping[str, Any]) -> dict[str, str]:
    """The score dimensions still not measured once the Nsight tables are in (a GPU timeline measures performance;
    iterations found in it let the capture window be judged)."""
    out = dict(unmeasured)
    if tables.get("nsys_busy_device"):
        out.pop("performance", None)
        if tables.get("nsys_iterations"):
            out.pop("capture", None)
        elif "capture" in out:
            out["capture"] = ("no NVTX iterations in the exports (name the range with --iteration-range): the capture "
                              "window cannot be judged")
    elif tables.get("ncu_kernels") and "performance" in out:
        out["performance"] = ("Nsight Compute profiles kernels one at a time (replayed): it tells how efficient each "
                              "kernel is, not how the run spent its time; its findings are listed, unscored")
    return out

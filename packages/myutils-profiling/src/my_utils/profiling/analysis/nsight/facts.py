"""The run-level facts of Nsight Systems exports: what the headline shows, read from the ``nsys_*`` tables.

The ids are the headline's (``analysis.facts``), with source ``nsys``, so an nsys-only run fills
the same first screen as a torch.profiler one (``analysis.nsight.merge_facts`` keeps a
torch.profiler figure where both measured it). Every export and device of the run is added
up (``aggregate`` says so); no figure is averaged over devices.

``gpu.busy``, ``gpu.idle``, ``gpu.compute``
    % of the GPU span (first to last activity of each device, spans added over devices): busy is
    the union of every kernel, copy and set (``nsys_busy_device``), compute the union of
    computation kernels (``nsys_busy_kind``).
``gpu.idle_host_wait``
    % of the idle time whose gap ended with work launched after the gap began (``nsys_idle_causes``).
``comm.time``, ``comm.share``, ``comm.overlap``, ``comm.exposed``
    communication-kernel time (union, ms), its % of GPU busy time, the % of it under computation,
    and the time not under computation (``nsys_overlap``); "not measured" without NCCL kernels.
``memory.copy_share``
    % of GPU busy time covered by copies, sets and memory kernels (``nsys_busy_kind``).
``step_time.median``, ``step_time.p90``, ``step_time.worst``
    the NVTX iterations' CPU duration (``nsys_iterations``); with several processes, an
    iteration's time is its slowest process's (iterations matched by their index).
``context.gpu``
    the GPU model of the hardware table (the export's own name in ``detail``), or the name the
    export gives when the table has no row for it.
``mfu``
    model FLOPs utilisation (``nsys_mfu``): the FLOPs given per GPU and iteration over the dense
    peak of the hardware table (its ``hardware.csv`` row in the denominator) × the NVTX iteration
    time; several processes weighted by their iteration time, as the Kineto MFU weighs ranks.
    "Not measured" with the reasons (no FLOPs given, no dtype, no iterations, no GPU or peak).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from my_utils.profiling.analysis.nsight.setup import setup_facts
from my_utils.profiling.analysis.rules._stats import quantile
from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

Rows = Sequence[Mapping[str, Any]]
SOURCE = "nsys"
MS = 1e6
SPAN = "GPU span (first to last GPU activity)"
NO_TIMELINE = ("Nsight Compute replays kernels one at a time: it has no GPU timeline (an nsys export or a "
               "torch.profiler trace of the run gives one)")


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _who(rows: Rows) -> str:
    """``device 0`` / ``rank 1, device 0`` / ``2 devices of 1 export`` — what a sum covers."""
    keys = sorted({(r.get("rank"), r.get("device")) for r in rows}, key=lambda k: (k[0] is None, k[0] or 0, k[1] or 0))
    if len(keys) == 1:
        rank, device = keys[0]
        return f"rank {rank}, device {device}" if rank is not None else f"device {device}"
    exports = len({k[0] for k in keys})
    return f"sum over {len(keys)} devices of {exports} export{'s' if exports != 1 else ''}, spans and times added"


def _ranks(rows: Rows) -> tuple[int | None, ...]:
    return tuple(sorted({r.get("rank") for r in rows}, key=lambda r: (r is None, r or 0)))


def run_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """The headline-level facts of the ``nsys_*`` tables (module docstring); none without them."""
    busy_rows = list(tables.get("nsys_busy_device") or [])
    out: list[Fact] = []
    if busy_rows:
        out += _gpu(tables, busy_rows)
    elif tables.get("ncu_kernels"):
        why = NotMeasured(NO_TIMELINE)
        out += [Fact(i, label, why, "%", "ncu") for i, label in (
            ("gpu.busy", "GPU busy"), ("gpu.idle", "GPU idle"), ("comm.share", "communication share"),
            ("comm.overlap", "communication overlapped with compute"))]
    if tables.get("nsys_iterations"):
        out += _steps(tables["nsys_iterations"])
    elif busy_rows:
        why = NotMeasured("no NVTX iteration range in the exports (name one with --iteration-range; tried train_step, "
                          "ProfilerStep#*, step, iteration, iter)")
        out += [Fact(i, label, why, "ms", SOURCE) for i, label in (
            ("step_time.median", "step time (median)"), ("step_time.p90", "step time (p90)"),
            ("step_time.worst", "worst step"))]
    out += _context(tables.get("nsys_inputs") or [])
    out += _hosts(tables.get("nsys_inputs") or [])
    out += _rank_context(tables)
    out += _world_size(tables.get("nsys_inputs") or [])
    out += _top_kernel(tables.get("nsys_top_kernels") or [], tables.get("nsys_kernel_kinds") or [])
    out += _short_kernels(tables.get("nsys_launch_short") or [])
    out += _mfu(tables.get("nsys_mfu") or [])
    out += setup_facts(tables)
    return out


def _mfu(rows: Rows) -> list[Fact]:
    """The run's MFU over the processes' ``nsys_mfu`` rows (module docstring)."""
    if not rows:
        return []
    ranks = _ranks(rows)
    ev = tuple(EvidenceRow("nsys_mfu", {"rank": r.get("rank"), "pid": r.get("pid")},
                           {k: r.get(k) for k in ("mfu_pct", "flops_per_iteration", "time_ns", "peak_tflops")})
               for r in rows)
    measured = [r for r in rows if isinstance(r.get("mfu_pct"), (int, float))]
    if len(measured) < len(rows):
        reasons = sorted({str(r.get("not_measured")) for r in rows if r.get("not_measured")})
        return [Fact("mfu", "MFU", NotMeasured("; ".join(reasons) or "not computed"), "%", SOURCE, ranks=ranks,
                     evidence=ev)]
    time = sum(_num(r.get("time_ns")) for r in measured)
    value = (sum(_num(r["mfu_pct"]) * _num(r.get("time_ns")) for r in measured) / time if time > 0
             else _num(measured[0]["mfu_pct"]))
    peaks = "; ".join(sorted({f"{r.get('dtype')} {_num(r.get('peak_tflops')):g} TFLOP/s of {r.get('gpu')} "
                              f"({r.get('peak_row')}; {r.get('peak_source')})" for r in measured}))
    return [Fact("mfu", "MFU", value, "%", "nsys NVTX iterations and the hardware table",
                 f"dense peak × NVTX iteration time: {peaks}", time / MS, "ms", ranks,
                 f"{len(measured)} process(es)" + (", weighted by iteration time" if len(measured) > 1 else ""),
                 steps=sum(int(_num(r.get("iterations"))) for r in measured), evidence=ev,
                 detail="; ".join(sorted({f"{_num(r.get('flops_per_iteration')):.4g} FLOPs per GPU and iteration "
                                          f"({r.get('flops_source')})" for r in measured})))]


def _gpu(tables: Mapping[str, Rows], rows: Rows) -> list[Fact]:
    span = sum(_num(r.get("span_ns")) for r in rows)
    idle = sum(_num(r.get("idle_ns")) for r in rows)
    if span <= 0:
        return []
    busy = span - idle
    ranks, who = _ranks(rows), _who(rows)
    ev = tuple(EvidenceRow("nsys_busy_device", {"rank": r.get("rank"), "device": r.get("device")},
                           {"span_ns": r.get("span_ns"), "busy_ns": r.get("busy_ns"), "idle_ns": r.get("idle_ns")})
               for r in rows)
    base = Fact("gpu.busy", "GPU busy", 100.0 * busy / span, "%", SOURCE, SPAN, span / MS, "ms", ranks, who,
                evidence=ev, detail=f"{busy / MS:,.1f} ms of {span / MS:,.1f} ms")
    out = [base, replace(base, id="gpu.idle", label="GPU idle", value=100.0 * idle / span,
                         detail=f"{idle / MS:,.1f} ms of {span / MS:,.1f} ms")]
    kinds = [r for r in tables.get("nsys_busy_kind") or []]
    compute = [r for r in kinds if r.get("kind") == "computation"]
    comp_ns = sum(_num(r.get("busy_ns")) for r in compute)
    out.append(replace(base, id="gpu.compute", label="GPU computing", value=100.0 * comp_ns / span,
                       detail=f"{comp_ns / MS:,.1f} ms of {span / MS:,.1f} ms with a computation kernel running",
                       evidence=_kind_rows(compute)))
    memory = [r for r in kinds if r.get("kind") == "memory"]
    if busy > 0:
        mem_ns = sum(_num(r.get("busy_ns")) for r in memory)
        out.append(Fact("memory.copy_share", "copies and sets", 100.0 * mem_ns / busy, "%", SOURCE,
                        "GPU busy time (span minus idle)", busy / MS, "ms", ranks, who, evidence=_kind_rows(memory),
                        detail=f"{mem_ns / MS:,.1f} ms of copies, sets and memory kernels"))
    causes = list(tables.get("nsys_idle_causes") or [])
    if idle > 0 and causes:
        host = sum(_num(r.get("idle_ns")) for r in causes if r.get("category") == "host_wait")
        out.append(Fact("gpu.idle_host_wait", "GPU idle waiting for the host", 100.0 * host / idle, "%", SOURCE,
                        "device-level GPU idle time (span minus the union of busy time)", idle / MS, "ms", ranks, who,
                        detail=f"{host / MS:,.1f} ms of {idle / MS:,.1f} ms idle",
                        evidence=tuple(EvidenceRow("nsys_idle_causes", {"rank": r.get("rank"), "device": r.get("device"),
                                                                        "category": r.get("category")},
                                                   {"idle_ns": r.get("idle_ns")}) for r in causes)))
    out += _comm(tables.get("nsys_overlap") or [], busy, span, ranks, who)
    return out


def _kind_rows(rows: Rows) -> tuple[EvidenceRow, ...]:
    return tuple(EvidenceRow("nsys_busy_kind", {"rank": r.get("rank"), "device": r.get("device"),
                                                "kind": r.get("kind")}, {"busy_ns": r.get("busy_ns")}) for r in rows)


def _comm(rows: Rows, busy: float, span: float, ranks: tuple[int | None, ...], who: str) -> list[Fact]:
    comm = sum(_num(r.get("communication_ns")) for r in rows)
    both = sum(_num(r.get("overlap_ns")) for r in rows)
    ev = tuple(EvidenceRow("nsys_overlap", {"rank": r.get("rank"), "device": r.get("device")},
                           {"communication_ns": r.get("communication_ns"), "overlap_ns": r.get("overlap_ns")})
               for r in rows)
    base = Fact("comm.share", "communication share", 0.0, "%", SOURCE, "GPU busy time (span minus idle)", busy / MS,
                "ms", ranks, who, evidence=ev)
    if comm <= 0:
        return [replace(base, detail="no communication kernels"),
                replace(base, id="comm.overlap", label="communication overlapped with compute",
                        value=NotMeasured("no communication (NCCL) kernels in the exports"), denominator="",
                        denominator_value=None, denominator_unit="")]
    return [
        replace(base, id="comm.time", label="communication kernel time", value=comm / MS, unit="ms", denominator="",
                denominator_value=None, denominator_unit=""),
        replace(base, value=100.0 * comm / busy if busy > 0 else NotMeasured("no GPU busy time"),
                detail=f"{comm / MS:,.1f} ms of {busy / MS:,.1f} ms"),
        replace(base, id="comm.overlap", label="communication overlapped with compute", value=100.0 * both / comm,
                denominator="communication kernel time", denominator_value=comm / MS,
                detail=f"{both / MS:,.3f} ms of {comm / MS:,.1f} ms under computation kernels"),
        replace(base, id="comm.exposed", label="communication not under compute", value=(comm - both) / MS,
                unit="ms", denominator=SPAN, denominator_value=span / MS,
                detail=f"{100.0 * (comm - both) / span:.1f}% of the span"),
    ]


def _steps(rows: Rows) -> list[Fact]:
    """Median, p90 and worst NVTX iteration (slowest process per iteration index when there are several)."""
    per: dict[tuple[Any, Any], dict[int, float]] = {}
    for r in rows:
        if isinstance(r.get("iteration"), int) and r.get("cpu_ns") is not None:
            per.setdefault((r.get("rank"), r.get("pid")), {})[r["iteration"]] = _num(r["cpu_ns"]) / MS
    if not per:
        return []
    by_it: dict[int, tuple[float, tuple[Any, Any]]] = {}
    for who, its in per.items():
        for it, ms in its.items():
            if it not in by_it or ms > by_it[it][0]:
                by_it[it] = (ms, who)
    values = sorted(v for v, _ in by_it.values())
    name = next((str(r.get("name")) for r in rows if r.get("name")), "NVTX range")
    ranks = tuple(sorted({w[0] for w in per}, key=lambda r: (r is None, r or 0)))
    aggregate = (f"{name!r} ranges of one process" if len(per) == 1 else
                 f"per iteration, the slowest of {len(per)} processes ({name!r} ranges matched by index)")
    evidence = tuple(EvidenceRow("nsys_iterations", {"rank": r, "pid": p}, {"iterations": len(its)})
                     for (r, p), its in per.items())
    worst_it, (worst, (w_rank, w_pid)) = max(by_it.items(), key=lambda kv: kv[1][0])
    base = Fact("step_time.median", "step time (median)", quantile(values, 0.5), "ms", SOURCE, ranks=ranks,
                aggregate=aggregate, steps=len(values), evidence=evidence,
                detail=f"median of {len(values)} NVTX iteration(s) ({name})")
    return [
        base,
        replace(base, id="step_time.p90", label="step time (p90)", value=quantile(values, 0.9),
                detail=f"90th percentile of {len(values)} NVTX iteration(s) ({name})"),
        replace(base, id="step_time.worst", label="worst step", value=worst,
                detail=f"iteration {worst_it}" + (f" on rank {w_rank}" if w_rank is not None else "")
                + f" (median {statistics.median(values):,.3f} ms)",
                evidence=(EvidenceRow("nsys_iterations", {"rank": w_rank, "pid": w_pid, "iteration": worst_it},
                                      {"cpu_ns": worst * MS}),)),
    ]


def _top_kernel(top: Rows, kinds: Rows) -> list[Fact]:
    """``kernels.top``: the kernel (by nsys's short name, every export and device added) with the most kernel time."""
    total = sum(_num(r.get("total_ns")) for r in kinds)
    if total <= 0 or not top:
        return []
    per: dict[str, dict[str, float]] = {}
    names: dict[str, set[str]] = {}
    for r in top:
        key = str(r.get("short_name") or r.get("name"))
        acc = per.setdefault(key, {"total_ns": 0.0, "count": 0.0})
        acc["total_ns"] += _num(r.get("total_ns"))
        acc["count"] += _num(r.get("count"))
        names.setdefault(key, set()).add(str(r.get("name")))
    name, acc = max(per.items(), key=lambda kv: (kv[1]["total_ns"], kv[0]))
    rows = [r for r in top if str(r.get("short_name") or r.get("name")) == name]
    kind = str(rows[0].get("kind"))
    full = sorted(names[name])
    return [Fact("kernels.top", f"kernel time in {name}", 100.0 * acc["total_ns"] / total, "%", SOURCE,
                 "all kernel time (summed kernel durations, every device)", total / MS, "ms", _ranks(rows),
                 "sum over exports and devices",
                 evidence=tuple(EvidenceRow("nsys_top_kernels", {"rank": r.get("rank"), "name": r.get("name")},
                                            {"total_ns": r.get("total_ns"), "count": r.get("count")}) for r in rows),
                 detail=(f"{name}: {acc['total_ns'] / MS:,.1f} ms in {int(acc['count']):,} launch(es), a {kind} kernel"
                         + (f" ({len(full)} instantiations)" if len(full) > 1 else "")))]


def _short_kernels(rows: Rows) -> list[Fact]:
    """``launch.short_kernels``: kernels (never copies or sets) that ran shorter than their launching call."""
    n = sum(int(_num(r.get("launches"))) for r in rows)
    if not n:
        return []
    short = sum(int(_num(r.get("short"))) for r in rows)
    return [Fact("launch.short_kernels", "kernels shorter than their launch", 100.0 * short / n, "%", SOURCE,
                 "kernel launches matched to their CUDA call (copies and sets are not kernels)", float(n), "count",
                 _ranks(rows), f"{_who(rows)}; their {sum(_num(r.get('short_kernel_ns')) for r in rows) / MS:,.1f} ms "
                 f"of kernel time behind {sum(_num(r.get('short_call_ns')) for r in rows) / MS:,.1f} ms of launch calls",
                 detail=f"{short:,} of {n:,} kernels",
                 evidence=tuple(EvidenceRow("nsys_launch_short", {"rank": r.get("rank"), "pid": r.get("pid"),
                                                                  "device": r.get("device")},
                                            {"short": r.get("short"), "launches": r.get("launches")}) for r in rows))]


def _rank_context(tables: Mapping[str, Rows]) -> list[Fact]:
    """``context.ranks``: the exports' ranks and where each number came from, or the processes of one export that
    drive several devices (numbered by device, as the NCCL analysis numbers them); none for one unnamed process."""
    from my_utils.profiling.analysis.facts import rank_list

    inputs = list(tables.get("nsys_inputs") or [])
    ev = tuple(EvidenceRow("nsys_inputs", {"file": r.get("file")}, {"rank": r.get("rank"),
                                                                     "rank_source": r.get("rank_source")})
               for r in inputs)
    ranks = [int(r["rank"]) for r in inputs if isinstance(r.get("rank"), int)]
    if len(inputs) > 1 and ranks:
        sources = sorted({str(r.get("rank_source")) for r in inputs})
        how = "; ".join(rank_words(x) for x in sources)
        return [Fact("context.ranks", "ranks analysed", rank_list(ranks), "", SOURCE, ranks=tuple(sorted(ranks)),
                     evidence=ev, detail=f"one export per rank; ranks numbered by {how}")]
    nccl = sorted({int(r["rank"]) for r in tables.get("nsys_nccl_ranks") or [] if isinstance(r.get("rank"), int)})
    procs = [r for r in tables.get("nsys_capture") or [] if r.get("gpu_start") is not None]
    if len(inputs) == 1 and len(nccl) > 1:
        return [Fact("context.ranks", "ranks analysed", rank_list(nccl), "", SOURCE, ranks=tuple(nccl), evidence=ev,
                     detail=f"one export holding {len(procs)} process(es) with GPU work; the {len(nccl)} NCCL "
                            "participants (process, device) numbered by device")]
    if len(inputs) == 1 and ranks:
        return [Fact("context.ranks", "ranks analysed", rank_list(ranks), "", SOURCE, ranks=tuple(ranks), evidence=ev,
                     detail=f"rank from the {rank_words(str(inputs[0].get('rank_source')), 'input')}")]
    return []


def rank_words(source: str, default: str | None = None) -> str:
    """Where an export's rank came from, in words (``environment PMI_RANK``: the launcher's variable nsys recorded)."""
    if source.startswith("environment "):
        return f"launcher's {source.removeprefix('environment ')} that nsys recorded for the process"
    return RANK_SOURCES.get(source, default if default is not None else source)


#: Where an export's rank came from, in words (``formats.ranks.RankInput.rank_source``).
RANK_SOURCES = {"file order": "file order (no rank in the file names: the sorted position)",
                "file name": "the file names (rank3, rank_3, worker3)", "given": "the caller",
                "none": "nothing (no rank recorded)"}


def _world_size(rows: Rows) -> list[Fact]:
    """``context.world_size`` from the launcher's world size nsys recorded (``PMI_SIZE``, ``WORLD_SIZE`` ...), when
    every export that records one agrees; none when no export records it (the headline then says "not recorded")."""
    sizes = {int(r["world_size"]) for r in rows if isinstance(r.get("world_size"), int) and r["world_size"] > 0}
    if len(sizes) != 1:
        return []
    (size,) = sizes
    ev = tuple(EvidenceRow("nsys_inputs", {"file": r.get("file")}, {"world_size": r.get("world_size")}) for r in rows)
    told = sum(1 for r in rows if r.get("world_size") == size)
    return [Fact("context.world_size", "world size", size, "", "nsys exports (the launcher's environment)",
                 ranks=_ranks(rows), evidence=ev, detail=f"recorded by {told} of {len(rows)} export(s)")]


def _hosts(rows: Rows) -> list[Fact]:
    """``context.hosts``: distinct hosts of the exports (one export is one host: nsys captures one machine)."""
    if not rows:
        return []
    ev = tuple(EvidenceRow("nsys_inputs", {"file": r.get("file")}, {"host": r.get("host"),
                                                                     "host_source": r.get("host_source")})
               for r in rows)
    hosts = sorted({str(r["host"]) for r in rows if r.get("host")})
    label = "hosts"
    if len(rows) == 1:
        one = [Fact("context.hosts", label, 1, "count", SOURCE, ranks=_ranks(rows), evidence=ev,
                    detail=f"one export: {hosts[0] if hosts else 'its host not recorded'}")]
        return one + ([Fact("context.host", "host", hosts[0], "", "nsys export", ranks=_ranks(rows), evidence=ev,
                            detail=str(rows[0].get("host_source") or ""))] if hosts else [])
    if len(hosts) < len({r.get("file") for r in rows}) and any(not r.get("host") for r in rows):
        return [Fact("context.hosts", label, NotMeasured("an export does not name its host (no Hostname in "
                                                         "TARGET_INFO_SYSTEM_ENV, no <host>_<pid> file name)"),
                     "count", SOURCE, ranks=_ranks(rows), evidence=ev)]
    per = {h: sorted(int(r["rank"]) for r in rows if r.get("host") == h and isinstance(r.get("rank"), int))
           for h in hosts}
    where = "; ".join(f"{h}: rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}" if rs else h
                      for h, rs in per.items())
    return [Fact("context.hosts", label, len(hosts), "count", SOURCE, ranks=_ranks(rows), evidence=ev, detail=where),
            Fact("context.host", "host", " / ".join(hosts), "", "nsys exports", ranks=_ranks(rows), evidence=ev,
                 detail=where)]


def _context(rows: Rows) -> list[Fact]:
    from my_utils.profiling.hardware.table import gpu_model

    names = sorted({n.strip() for r in rows for n in str(r.get("gpus") or "").split(",") if n.strip()})
    ev = tuple(EvidenceRow("nsys_inputs", {"file": r.get("file")}, {"gpus": r.get("gpus")}) for r in rows)
    if not rows:
        return []
    if not names:
        return [Fact("context.gpu", "GPU", NotMeasured("the exports name no GPU (a sliced or filtered export drops "
                                                       "its GPU table)"), "", SOURCE, evidence=ev)]
    models = [gpu_model(n) for n in names]
    shown = " / ".join(m or n for m, n in zip(models, names, strict=True))
    detail = "as the export names it: " + " / ".join(names)
    if any(m is None for m in models):
        detail += " (not in the hardware table: peaks unknown)"
    return [Fact("context.gpu", "GPU", shown, "", "nsys export and the hardware table", ranks=_ranks(rows),
                 evidence=ev, detail=detail)]

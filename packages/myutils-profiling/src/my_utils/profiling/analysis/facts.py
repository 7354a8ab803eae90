"""Facts: the numbers of a run, each with its unit, denominator, source, ranks, steps and evidence rows.

``build_facts(series, tables, hardware)`` reads the per-step series of the events and the
report's tables (the Kineto ones included) and returns :class:`~my_utils.profiling.model.report.Fact`
objects; nothing here renders. Fact ids (``:rank<r>`` is one rank; without it, the run):

``step_time.median:<source>``, ``step_time.p90:<source>``, ``step_time.worst:<source>``
    the step time as one source measured it (MyTimer, torch.profiler...), never pooled across
    sources. With several ranks, a step's time is its slowest rank's (a synchronous step ends
    when the last rank does; ``aggregate`` says so). ``step_time.*`` without a source: the
    *primary* source, the one with the most steps (MyTimer on a tie).
``gpu.busy``, ``gpu.idle``, ``gpu.compute`` (and ``:rank<r>``)
    % of the GPU span (first to last GPU activity), from ``kineto_temporal``; with several
    ranks, spans and times are summed over ranks (``aggregate`` says so).
``gpu.idle_host_wait`` (and ``:rank<r>``)
    % of the device-level idle time (``kineto_idle_device``) spent waiting for the host.
``comm.time``, ``comm.share``, ``comm.overlap``, ``comm.exposed`` (and ``:rank<r>``)
    communication-kernel time (ms), its % of GPU busy time, the % of it under computation,
    and the time not under computation (ms); "not measured" without communication kernels.
``memory.copy_share`` (and ``:rank<r>``): copy/set kernel busy time, % of GPU busy time.
``launch.short_kernels:rank<r>``: kernels shorter than their launch call, % of launches.
``sync.host:rank<r>``: time the host spent in ``cuda_sync`` waits on no stream (ms).
``context.*``: the run's GPU, device count, world size, ranks, host and CUDA versions;
``context.cpu_only``: 1 when a trace or export that would show GPU work holds none and names no
GPU (a CPU run), 0 when the inputs show GPU work or name a GPU, not measured otherwise.
``step_time.worst`` leaves the warm-up steps out (``warmup_steps``, as the variability rule does).

From the registered Kineto analyses (``kineto_critical_path``, ``kineto_idle_host_ops``,
``kineto_mfu``, ``kineto_collectives``, ``kineto_queue_full``), each per rank and for the run:

``critical_path.cpu`` / ``critical_path.gpu_compute`` / ``critical_path.communication`` / ``critical_path.overhead``
    % of the critical path's length that is CPU work, GPU computation, NCCL, and launch or
    kernel-to-kernel gaps (the run: µs added over ranks).
``idle.host_op``
    the host operator the compute stream's host-wait idle fell on most (ms; ``detail`` names the
    top three and their ms).
``mfu``
    model FLOPs utilisation (%), or "not measured" with the reason (no GPU named, no shapes...);
    the run: the ranks' values weighted by their windows.
``comm.busbw_link``
    the lowest bus bandwidth of a flagged collective as a % of its link (the collectives of at
    least 1 MiB under a quarter of the link's speed).
``queue.full``
    time a stream's launch queue was full (ms, summed over streams).
``gpu.mix`` / ``gpu.gemm_share``
    the share of GPU work in elementwise kernels and copies (``detail``: the whole mix in words)
    and in matrix products, from ``kineto_op_categories`` (``ops.facts``).
``capture.overhead``
    what a my_utils capture window cost per step: the median step inside minus outside, % of the
    outside median, with a 95% interval (``analysis.capture_overhead``); only when a trace holds one.
``energy.per_step``, ``energy.capture_window``
    joules per step from the GPU monitor, overall and in capture windows (``analysis.energy``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from my_utils.profiling.analysis.capture_overhead import capture_overhead_facts
from my_utils.profiling.analysis.energy import energy_facts
from my_utils.profiling.analysis.pipeline_rule import pipeline_facts
from my_utils.profiling.analysis.rules._series import STEP_TIME, Series, step_ranges
from my_utils.profiling.analysis.rules._stats import quantile
from my_utils.profiling.kineto.contract_facts import contract_facts
from my_utils.profiling.kineto.ops.facts import mix_facts
from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

Rows = Sequence[Mapping[str, Any]]


def primary_step_source(series: Mapping[Any, Series]) -> str | None:
    """The step-time source the headline quotes: the most steps, MyTimer on a tie (None without step times)."""
    steps: dict[str, int] = {}
    for (name, _rank, source), s in series.items():
        if name == STEP_TIME and s.values:
            steps[source] = max(steps.get(source, 0), len(s.values))
    if not steps:
        return None
    return max(steps, key=lambda src: (steps[src], src == "mytimer", src))


def _ranks_text(ranks: Sequence[int | None]) -> str:
    known = [r for r in ranks if r is not None]
    if not known:
        return "the run (no rank)"
    return f"rank {known[0]}" if len(known) == 1 else "ranks " + ", ".join(map(str, known))


def step_facts(series: Mapping[Any, Series], source: str, suffix: str | None = None,
               warmup_steps: int = 1) -> list[Fact]:
    """Median, p90 and worst step of one source (slowest rank per step when there are several).

    The worst step leaves out the first ``warmup_steps`` steps of the source (the warm-up the
    variability and anomaly rules leave out: allocator growth, autotuning, compilation) when at
    least 3 steps remain; its ``detail`` says which steps were left out.
    """
    per_rank = {r: s for (n, r, src), s in series.items() if n == STEP_TIME and src == source and s.values}
    if not per_rank:
        return []
    by_step: dict[int, tuple[float, int | None]] = {}
    for rank, s in per_rank.items():
        for st, v in zip(s.steps, s.values, strict=True):
            if st not in by_step or v > by_step[st][0]:
                by_step[st] = (v, rank)
    values = sorted(v for v, _r in by_step.values())
    ranks = tuple(sorted(per_rank, key=lambda r: -1 if r is None else r))
    unit = next(iter(per_rank.values())).unit
    aggregate = (_ranks_text(ranks) if len(ranks) == 1 else
                 f"per step, the slowest of {_ranks_text(ranks)} (a synchronous step ends with its last rank)")
    ordered = sorted(by_step)
    k = max(0, warmup_steps)
    warmup = ordered[:k] if len(ordered) - k >= 3 else []
    judged = {st: by_step[st] for st in ordered[len(warmup):]}
    worst_step, (worst, worst_rank) = max(judged.items(), key=lambda kv: kv[1][0])
    left_out = (f"; warm-up step{'s' if len(warmup) > 1 else ''} {step_ranges(warmup)} left out, "
                f"as the variability rules do" if warmup else "")
    tag = f":{source}" if suffix is None else suffix
    rows = tuple(EvidenceRow("steps", {"source": source, "rank": r}, {"steps": len(s.values)})
                 for r, s in per_rank.items())
    n = len(values)
    base = Fact(f"step_time.median{tag}", "step time (median)", quantile(values, 0.5), unit, source, ranks=ranks,
                aggregate=aggregate, steps=n, evidence=rows, detail=f"median of {n} step(s) timed by {source}")
    return [
        base,
        replace(base, id=f"step_time.p90{tag}", label="step time (p90)", value=quantile(values, 0.9),
                detail=f"90th percentile of {n} step(s) timed by {source}"),
        replace(base, id=f"step_time.worst{tag}", label="worst step", value=worst, steps=len(judged),
                detail=f"step {worst_step} on {_ranks_text([worst_rank])}, timed by {source}{left_out}",
                evidence=(EvidenceRow("steps", {"source": source, "rank": worst_rank, "step": worst_step},
                                      {"step_time": worst}),)),
    ]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _by_rank(rows: Rows) -> dict[int | None, Mapping[str, Any]]:
    return {r.get("rank"): r for r in rows}


def gpu_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """GPU busy/idle/compute, host-wait idle, communication, copies, launches and host syncs (module docstring)."""
    temporal = list(tables.get("kineto_temporal") or [])
    ranked = [r for r in temporal if r.get("rank") is not None or len(temporal) == 1]
    every = next((r for r in temporal if r.get("rank") is None), None) if len(temporal) > 1 else None
    if not temporal:
        why = ("the traces hold no GPU activity (CPU-only)" if tables.get("kineto_inputs")
               else "no torch.profiler trace with GPU activity was analysed")
        return [Fact(i, label, NotMeasured(why), "%") for i, label in (
            ("gpu.busy", "GPU busy"), ("gpu.idle", "GPU idle"), ("comm.share", "communication share"),
            ("comm.overlap", "communication overlapped with compute"))]
    overlap = _by_rank(tables.get("kineto_overlap") or [])
    kinds: dict[int | None, dict[str, Mapping[str, Any]]] = {}
    for k in tables.get("kineto_kernel_kinds") or []:
        kinds.setdefault(k.get("rank"), {})[str(k.get("kind"))] = k
    idle_dev: dict[int | None, dict[str, float]] = {}
    for row in tables.get("kineto_idle_device") or []:
        acc = idle_dev.setdefault(row.get("rank"), {})
        acc[str(row.get("category"))] = acc.get(str(row.get("category")), 0.0) + float(row.get("idle_us") or 0.0)
    launch = _by_rank(tables.get("kineto_launch") or [])
    sync = tables.get("kineto_sync") or []
    facts: list[Fact] = []
    scopes: list[tuple[str, Mapping[str, Any], tuple[int | None, ...], str]] = []
    for row in ranked:
        rank = row.get("rank")
        scopes.append((f":rank{rank}" if rank is not None else ":norank", row, (rank,), _ranks_text([rank])))
    if every is not None:
        all_ranks = tuple(r.get("rank") for r in ranked)
        scopes.append(("", every, all_ranks, f"sum over {_ranks_text(all_ranks)} (spans and times added)"))
    elif len(ranked) == 1:
        rank = ranked[0].get("rank")
        scopes.append(("", ranked[0], (rank,), _ranks_text([rank])))
    for tag, row, ranks, aggregate in scopes:
        facts.extend(_temporal(tag, row, ranks, aggregate))
        rank_rows = [overlap[r] for r in ranks if r in overlap]
        facts.extend(_comm(tag, row, rank_rows, ranks, aggregate))
        kind_rows = [kinds[r]["memory"] for r in ranks if "memory" in kinds.get(r, {})]
        busy = (_num(row.get("span_us")) or 0.0) - (_num(row.get("idle_us")) or 0.0)
        if busy > 0:
            copies = sum(float(k.get("busy_us") or 0.0) for k in kind_rows)
            facts.append(Fact(f"memory.copy_share{tag}", "copies and sets", 100.0 * copies / busy, "%", "kineto",
                              "GPU busy time (span minus idle)", busy / 1e3, "ms", ranks, aggregate,
                              evidence=tuple(EvidenceRow("kineto_kernel_kinds", {"rank": k.get("rank"),
                                                                                 "kind": "memory"},
                                                         {"busy_us": k.get("busy_us")}) for k in kind_rows)))
        causes = [idle_dev[r] for r in ranks if r in idle_dev]
        idle = sum(sum(c.values()) for c in causes)
        if idle > 0:
            host = sum(c.get("host_wait", 0.0) for c in causes)
            facts.append(Fact(f"gpu.idle_host_wait{tag}", "GPU idle waiting for the host", 100.0 * host / idle, "%",
                              "kineto", "device-level GPU idle time (span minus the union of busy time)", idle / 1e3,
                              "ms", ranks, aggregate, detail=f"{host / 1e3:,.1f} ms of {idle / 1e3:,.1f} ms idle",
                              evidence=tuple(EvidenceRow("kineto_idle_device", {"rank": r, "category": "host_wait"},
                                                         {"idle_us": idle_dev[r].get("host_wait", 0.0)})
                                             for r in ranks if r in idle_dev)))
    scoped: list[tuple[str, list[Mapping[str, Any]], tuple[int | None, ...], str]] = [
        (f":rank{rank}" if rank is not None else ":norank", [row], (rank,), _ranks_text([rank]))
        for rank, row in launch.items()]
    if launch:
        every_rank = tuple(launch)
        scoped.append(("", list(launch.values()), every_rank, _ranks_text(every_rank) if len(launch) == 1 else
                       f"sum over {_ranks_text(every_rank)}"))
    for tag, rows, ranks, aggregate in scoped:
        # kernels only (``kernels``; rows written before it counted copies and sets too)
        n = sum(int(r.get("kernels", r.get("launches")) or 0) for r in rows)
        if n:
            short = sum(int(r.get("short_kernels") or 0) for r in rows)
            facts.append(Fact(f"launch.short_kernels{tag}", "kernels shorter than their launch", 100.0 * short / n,
                              "%", "kineto", "kernel launches (copies and sets left out)", float(n), "count", ranks,
                              aggregate, detail=f"{short:,} of {n:,} kernels", evidence=tuple(EvidenceRow(
                                  "kineto_launch", {"rank": r.get("rank")},
                                  {"short_kernels": r.get("short_kernels"), "kernels": r.get("kernels"),
                                   "launches": r.get("launches")})
                                  for r in rows)))
    host_sync: dict[int | None, float] = {}
    for row in sync:
        if row.get("where") == "host":
            host_sync[row.get("rank")] = host_sync.get(row.get("rank"), 0.0) + float(row.get("total_us") or 0.0)
    for rank, us in host_sync.items():
        tag = f":rank{rank}" if rank is not None else ":norank"
        facts.append(Fact(f"sync.host{tag}", "host blocked in CUDA syncs", us / 1e3, "ms", "kineto", ranks=(rank,),
                          aggregate=_ranks_text([rank]), evidence=tuple(
                              EvidenceRow("kineto_sync", {"rank": rank, "name": r.get("name"), "where": "host"},
                                          {"total_us": r.get("total_us"), "count": r.get("count")})
                              for r in sync if r.get("rank") == rank and r.get("where") == "host")))
    return facts


def _temporal(tag: str, row: Mapping[str, Any], ranks: tuple[int | None, ...], aggregate: str) -> list[Fact]:
    span = _num(row.get("span_us")) or 0.0
    idle = _num(row.get("idle_us")) or 0.0
    compute = _num(row.get("compute_us")) or 0.0
    ev = (EvidenceRow("kineto_temporal", {"rank": row.get("rank")},
                      {"span_us": span, "idle_us": idle, "compute_us": compute,
                       "non_compute_us": row.get("non_compute_us")}),)
    if span <= 0:
        return []
    base = Fact(f"gpu.busy{tag}", "GPU busy", 100.0 * (span - idle) / span, "%", "kineto",
                "GPU span (first to last GPU activity)", span / 1e3, "ms", ranks, aggregate, evidence=ev,
                detail=f"{(span - idle) / 1e3:,.1f} ms of {span / 1e3:,.1f} ms")
    return [
        base,
        replace(base, id=f"gpu.idle{tag}", label="GPU idle", value=100.0 * idle / span,
                detail=f"{idle / 1e3:,.1f} ms of {span / 1e3:,.1f} ms"),
        replace(base, id=f"gpu.compute{tag}", label="GPU computing", value=100.0 * compute / span,
                detail=f"{compute / 1e3:,.1f} ms of {span / 1e3:,.1f} ms"),
    ]


def _comm(tag: str, temporal: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], ranks: tuple[int | None, ...],
          aggregate: str) -> list[Fact]:
    comm = sum(float(r.get("communication_us") or 0.0) for r in rows)
    both = sum(float(r.get("overlap_us") or 0.0) for r in rows)
    span = _num(temporal.get("span_us")) or 0.0
    busy = span - (_num(temporal.get("idle_us")) or 0.0)
    ev = tuple(EvidenceRow("kineto_overlap", {"rank": r.get("rank")},
                           {"communication_us": r.get("communication_us"), "overlap_us": r.get("overlap_us"),
                            "comm_streams": list(r.get("comm_streams") or []),
                            "shared_streams": list(r.get("shared_streams") or [])}) for r in rows)
    base = Fact(f"comm.share{tag}", "communication share", 0.0, "%", "kineto", "GPU busy time (span minus idle)",
                busy / 1e3, "ms", ranks, aggregate, evidence=ev)
    if comm <= 0:
        return [replace(base, detail="no communication kernels"),
                replace(base, id=f"comm.overlap{tag}", label="communication overlapped with compute",
                        value=NotMeasured("no communication kernels in the trace"), denominator="",
                        denominator_value=None, denominator_unit="")]
    return [
        replace(base, id=f"comm.time{tag}", label="communication kernel time", value=comm / 1e3, unit="ms",
                denominator="", denominator_value=None, denominator_unit=""),
        replace(base, value=100.0 * comm / busy if busy > 0 else NotMeasured("no GPU busy time"),
                detail=f"{comm / 1e3:,.1f} ms of {busy / 1e3:,.1f} ms"),
        replace(base, id=f"comm.overlap{tag}", label="communication overlapped with compute",
                value=100.0 * both / comm, denominator="communication kernel time", denominator_value=comm / 1e3,
                detail=f"{both / 1e3:,.3f} ms of {comm / 1e3:,.1f} ms under computation kernels"),
        replace(base, id=f"comm.exposed{tag}", label="communication not under compute", value=(comm - both) / 1e3,
                unit="ms", denominator="GPU span", denominator_value=span / 1e3,
                detail=f"{100.0 * (comm - both) / span:.1f}% of the span" if span else ""),
    ]


def _rank_tag(rank: int | None) -> str:
    return f":rank{rank}" if rank is not None else ":norank"


def _scopes(rows: Rows) -> list[tuple[str, list[Mapping[str, Any]], tuple[int | None, ...], str]]:
    """Per-rank scopes (``:rank<r>``) and the run's scope ("") over rows carrying a ``rank``."""
    by: dict[int | None, list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(r.get("rank"), []).append(r)
    out: list[tuple[str, list[Mapping[str, Any]], tuple[int | None, ...], str]] = [
        (_rank_tag(rank), rs, (rank,), _ranks_text([rank])) for rank, rs in by.items()]
    if by:
        ranks = tuple(by)
        out.append(("", [r for rs in by.values() for r in rs], ranks,
                    _ranks_text(ranks) if len(ranks) == 1 else f"sum over {_ranks_text(ranks)}"))
    return out


_PATH_PARTS = (("cpu", "on the CPU", ("cpu_bound",)), ("gpu_compute", "GPU computation", ("gpu_compute_bound",)),
               ("communication", "communication kernels", ("gpu_communication_bound",)),
               ("overhead", "launch and kernel-to-kernel gaps",
                ("gpu_kernel_launch_overhead", "gpu_kernel_kernel_overhead")))


def kineto_facts(tables: Mapping[str, Rows]) -> list[Fact]:
    """Facts of the registered Kineto analyses (module docstring): critical path, idle host ops, MFU, links, queues."""
    facts: list[Fact] = []
    for tag, rows, ranks, aggregate in _scopes(tables.get("kineto_critical_path") or []):
        length = sum(float(r.get("length_us") or 0.0) for r in rows)
        if length <= 0:
            continue
        ev = tuple(EvidenceRow("kineto_critical_path", {"rank": r.get("rank")},
                               {"length_us": r.get("length_us"), "window": r.get("window")}) for r in rows)
        for key, words, bounds in _PATH_PARTS:
            us = sum(float(r.get("length_us") or 0.0) * sum(float(r.get(f"{b}_pct") or 0.0) for b in bounds) / 100.0
                     for r in rows)
            facts.append(Fact(f"critical_path.{key}{tag}", f"critical path: {words}", 100.0 * us / length, "%",
                              "kineto", "critical path length", length / 1e3, "ms", ranks, aggregate, evidence=ev,
                              detail=f"{us / 1e3:,.2f} ms of a {length / 1e3:,.2f} ms path ({rows[0].get('window')})"))
    for tag, rows, ranks, aggregate in _scopes(tables.get("kineto_idle_host_ops") or []):
        per: dict[str, float] = {}
        for r in rows:
            per[str(r.get("operator"))] = per.get(str(r.get("operator")), 0.0) + float(r.get("idle_us") or 0.0)
        top = sorted(per.items(), key=lambda kv: -kv[1])[:3]
        if not top:
            continue
        facts.append(Fact(f"idle.host_op{tag}", f"GPU waited on {top[0][0]}", top[0][1] / 1e3, "ms", "kineto",
                          ranks=ranks, aggregate=aggregate,
                          detail="; ".join(f"{name}: {us / 1e3:,.1f} ms" for name, us in top),
                          evidence=tuple(EvidenceRow("kineto_idle_host_ops", {"rank": r.get("rank"),
                                                                              "operator": r.get("operator")},
                                                     {"idle_us": r.get("idle_us"), "gaps": r.get("gaps")})
                                         for r in rows if r.get("operator") in dict(top))))
    for tag, rows, ranks, aggregate in _scopes(tables.get("kineto_mfu") or []):
        ev = tuple(EvidenceRow("kineto_mfu", {"rank": r.get("rank")},
                               {"mfu_pct": r.get("mfu_pct"), "flops": r.get("flops"), "window_us": r.get("window_us"),
                                "coverage_pct": r.get("coverage_pct")}) for r in rows)
        measured = [r for r in rows if _num(r.get("mfu_pct")) is not None]
        if len(measured) < len(rows) or not rows:
            reason = next((str(r.get("not_measured")) for r in rows if r.get("not_measured")), "no MFU row")
            facts.append(Fact(f"mfu{tag}", "MFU", NotMeasured(reason), "%", "kineto", ranks=ranks,
                              aggregate=aggregate, evidence=ev))
            continue
        window = sum(float(r.get("window_us") or 0.0) for r in measured)
        value = sum(float(r["mfu_pct"]) * float(r.get("window_us") or 0.0) for r in measured) / window \
            if window > 0 else float(measured[0]["mfu_pct"])
        cover = [_num(r.get("coverage_pct")) for r in measured]
        facts.append(Fact(f"mfu{tag}", "MFU", value, "%", "kineto", "dense peak × profiled time",
                          window / 1e3, "ms", ranks, aggregate + (" (weighted by window)" if len(measured) > 1 else ""),
                          evidence=ev, detail=f"counted operators cover {min(c for c in cover if c is not None):.0f}% "
                                              "of computation-kernel time" if any(c is not None for c in cover)
                          else ""))
    flagged = [r for r in tables.get("kineto_collectives") or [] if r.get("flagged")]
    for tag, rows, ranks, aggregate in _scopes(flagged):
        worst = min(rows, key=lambda r: float(r.get("link_pct") or 0.0))
        facts.append(Fact(f"comm.busbw_link{tag}", "slowest collective's bus bandwidth", float(worst["link_pct"]), "%",
                          "kineto", str(worst.get("link")), _num(worst.get("link_gbps")), "GB/s", ranks, aggregate,
                          detail=f"{worst.get('collective')} of {float(worst.get('message_bytes') or 0) / 2**20:,.1f} MiB"
                                 f" in {worst.get('process_group')}: {float(worst.get('busbw_gbps') or 0):,.1f} GB/s",
                          evidence=tuple(EvidenceRow("kineto_collectives", {k: r.get(k) for k in (
                              "rank", "process_group", "collective", "dtype", "message_bytes")},
                              {"busbw_gbps": r.get("busbw_gbps"), "link_pct": r.get("link_pct")}) for r in rows)))
    for tag, rows, ranks, aggregate in _scopes(tables.get("kineto_queue_full") or []):
        us = sum(float(r.get("duration_us") or 0.0) for r in rows)
        facts.append(Fact(f"queue.full{tag}", "launch queue full", us / 1e3, "ms", "kineto", ranks=ranks,
                          aggregate=aggregate, evidence=tuple(EvidenceRow(
                              "kineto_queue_full", {"rank": r.get("rank"), "stream": r.get("stream")},
                              {"duration_us": r.get("duration_us")}) for r in rows)))
    return facts


def context_facts(hardware: Mapping[str, Any], ranks_seen: Sequence[int]) -> list[Fact]:
    """What ran where (``context.*``), each "not measured" when no input says it (never guessed)."""
    src = str(hardware.get("source") or "the report's hardware description")
    out: list[Fact] = []
    for key, label in (("gpu", "GPU"), ("gpu_count", "GPUs visible per process"), ("world_size", "world size"),
                       ("host", "host"), ("cuda_runtime", "CUDA runtime"), ("cuda_driver", "CUDA driver"),
                       ("backend", "distributed backend")):
        value = hardware.get(key)
        if isinstance(value, list):
            value = " / ".join(map(str, value))
        out.append(Fact(f"context.{key}", label, value if isinstance(value, (int, float, str)) and value != ""
                        else NotMeasured(f"no input records the {label}"), "", src if value is not None else ""))
    ranks = hardware.get("ranks") if isinstance(hardware.get("ranks"), list) and hardware.get("ranks") else None
    if ranks is None and ranks_seen:
        ranks, src = sorted(ranks_seen), "the events' ranks"
    out.append(Fact("context.ranks", "ranks analysed", rank_list(ranks) if ranks else
                    NotMeasured("no input records a rank"), "", src if ranks else ""))
    return out


def rank_list(ranks: Sequence[Any]) -> str:
    """``rank 0`` / ``ranks 0-7, 9 (9 ranks)``: which ranks, never a bare number a reader takes for a count."""
    numbers = sorted({r for r in ranks if isinstance(r, int) and not isinstance(r, bool)})
    others = sorted({str(r) for r in ranks} - {str(r) for r in numbers})
    parts = ([step_ranges(numbers)] if numbers else []) + others
    count = len(numbers) + len(others)
    return f"rank {parts[0]}" if count == 1 else f"ranks {', '.join(parts)} ({count} ranks)"


def cpu_only_fact(series: Mapping[Any, Series], tables: Mapping[str, Rows], hardware: Mapping[str, Any]) -> Fact:
    """``context.cpu_only``: 1 when an input that would show GPU work (a torch.profiler trace, an nsys export)
    holds no kernel, copy or set and no GPU device; 0 with GPU activity or a GPU named; else not measured."""
    label = "CPU-only run"
    kineto, nsys = len(tables.get("kineto_inputs") or []), len(tables.get("nsys_inputs") or [])
    traces = kineto + nsys
    activity = [name for name in ("kineto_temporal", "kineto_kernel_kinds", "nsys_busy_device")
                if tables.get(name)]
    activity += sorted({n.split(":", 1)[0] for (n, _r, _s) in series
                        if n.startswith(("kernel:", "memcpy:", "memset:", "cuda:"))})
    devices = [str(r.get("gpu")) for r in tables.get("kineto_context") or []
               if r.get("gpu") or int(r.get("gpu_count") or 0) > 0]
    devices += [str(r.get("gpus")) for r in tables.get("nsys_inputs") or [] if r.get("gpus")]
    if hardware.get("gpu"):
        devices.append(str(hardware["gpu"]))
    if activity or devices:
        seen = (f"GPU activity ({', '.join(activity[:4])})" if activity else "") + \
            (" and " if activity and devices else "") + (f"a GPU named ({devices[0]})" if devices else "")
        return Fact("context.cpu_only", label, 0, "flag", "the inputs", detail=seen)
    if not traces:
        return Fact("context.cpu_only", label, NotMeasured(
            "no input could show GPU work (MyTimer times host regions; a torch.profiler trace or an nsys export "
            "would tell)"), "flag")
    what = " and ".join(x for x in (
        f"{kineto} torch.profiler trace{'s' if kineto > 1 else ''}" if kineto else "",
        f"{nsys} nsys export{'s' if nsys > 1 else ''}" if nsys else "") if x)
    return Fact("context.cpu_only", label, 1, "flag", "the inputs", detail=(
        f"the {what} hold{'s' if traces == 1 else ''} no kernel, memcpy or memset and "
        f"name{'s' if traces == 1 else ''} no GPU device"))


def build_facts(series: Mapping[Any, Series], tables: Mapping[str, Rows], hardware: Mapping[str, Any],
                warmup_steps: int = 1) -> list[Fact]:
    """Every fact of the run (module docstring), step facts of every source first; the worst step leaves
    out ``warmup_steps`` warm-up steps (the workload's, as the variability rule does)."""
    facts: list[Fact] = []
    sources = sorted({src for (n, _r, src), s in series.items() if n == STEP_TIME and s.values})
    for source in sources:
        facts.extend(step_facts(series, source, warmup_steps=warmup_steps))
    primary = primary_step_source(series)
    if primary is not None:
        facts.extend(step_facts(series, primary, suffix="", warmup_steps=warmup_steps))
    else:
        why = NotMeasured("no per-step times in the inputs (no step_time events)")
        facts.extend(Fact(f"step_time.{k}", label, why, "ms") for k, label in (
            ("median", "step time (median)"), ("p90", "step time (p90)"), ("worst", "worst step")))
    facts.extend(gpu_facts(tables))
    facts.extend(kineto_facts(tables))
    facts.extend(contract_facts(tables))  # the Kineto side of the diagnosis contract (kineto.contract_facts)
    facts.extend(mix_facts(tables))  # the GPU-time mix by operator category (ops.facts)
    facts.extend(pipeline_facts(tables))  # pipeline-parallel bubbles (analysis.pipeline_rule)
    facts.extend(capture_overhead_facts(tables, series, warmup_steps))  # what a my_utils capture cost per step
    facts.extend(energy_facts(series, tables))  # the GPU monitor's energy per step and per capture window
    facts.extend(context_facts(hardware, sorted({r for (_n, r, _s) in series if r is not None})))
    facts.append(cpu_only_fact(series, tables, hardware))
    return facts


def median_of(values: Sequence[float]) -> float | None:
    """``statistics.median``, None for no values."""
    return statistics.median(values) if values else None

"""The facts of one export's summary: GPU busy/idle, overlap, kernel shares, copies, API time, iterations, MFU.

Ids are stable across runs (``nsys.gpu_idle:rank1:device0``), so two runs' facts pair up;
every fact names the table row it was read from (``evidence``), and what the export could
not give is a not-measured fact with the reason, never a zero.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from my_utils.profiling.model.tool_facts import Evidence, NsysFact, not_measured

if TYPE_CHECKING:
    from my_utils.profiling.nsys.model import ExportSummary

MS = 1e6  # ns per ms
#: CUDA calls that block the host until the GPU has finished earlier work: the explicit syncs, and copies and sets
#: without ``Async`` (synchronous with respect to the host); the ``_v3020`` suffixes nsys appends are allowed.
SYNC_CALL = re.compile(r"^(?:cuda|cu)(?:(?:Device|Ctx|Stream|Event)Synchronize"
                       r"|Memcpy(?:2D|3D|Peer)?(?:ToSymbol|FromSymbol|HtoD|DtoH|DtoD)?|Memset(?:2D|3D)?)(?:_v\d+)?$")
SPAN = "the device's span (first start to last end of its kernels, copies and sets)"


def _scope(rank: int | None, **parts: Any) -> str:
    bits = ([f"rank{rank}"] if rank is not None else []) + [f"{k}{v}" for k, v in parts.items()]
    return ":".join(bits)


def export_facts(s: ExportSummary) -> list[NsysFact]:
    """Every fact of ``s`` (see the module doc)."""
    ranks = (s.rank,)
    out: list[NsysFact] = []
    for r in s.table("nsys_busy_device").records():
        sc = _scope(s.rank, device=r["device"])
        ev = (Evidence("nsys_busy_device", {"rank": s.rank, "device": r["device"]},
                       {"busy_ns": r["busy_ns"], "idle_ns": r["idle_ns"], "span_ns": r["span_ns"]}),)
        common: dict[str, Any] = dict(ranks=ranks, aggregate="device-level union of streams", evidence=ev,
                                      denominator=SPAN, denominator_value=(r["span_ns"] or 0) / MS,
                                      denominator_unit="ms")
        out.append(NsysFact(f"nsys.gpu_busy:{sc}", f"GPU busy, device {r['device']}", _num(r["busy_pct"]), "%",
                            **common))
        out.append(NsysFact(f"nsys.gpu_idle:{sc}", f"GPU idle time, device {r['device']}",
                            (r["idle_ns"] or 0) / MS, "ms", detail=f"{r['gaps']} idle gap(s)", **common))
        out.extend(_idle_cause_facts(s, r["device"], sc))
        out.extend(_copy_share_facts(s, r, sc))
    for r in s.table("nsys_overlap").records():
        sc = _scope(s.rank, device=r["device"])
        if not r["communication_ns"]:
            out.append(not_measured(f"nsys.comm_overlap:{sc}", f"Communication hidden under computation, "
                                    f"device {r['device']}", "no communication kernels on this device", unit="%",
                                    ranks=ranks))
            continue
        ev = (Evidence("nsys_overlap", {"rank": s.rank, "device": r["device"]},
                       {k: r[k] for k in ("communication_ns", "computation_ns", "overlap_ns")}),)
        out.append(NsysFact(
            f"nsys.comm_overlap:{sc}", f"Communication hidden under computation, device {r['device']}",
            _num(r["overlap_pct"]), "%", denominator="communication kernel time (union)",
            denominator_value=r["communication_ns"] / MS, denominator_unit="ms", ranks=ranks,
            aggregate="device-level unions", evidence=ev))
        out.append(NsysFact(
            f"nsys.comm_exposed:{sc}", f"Communication not hidden, device {r['device']}",
            (r["exposed_communication_ns"] or 0) / MS, "ms", ranks=ranks, aggregate="device-level unions",
            evidence=ev))
    for r in s.table("nsys_kernel_kinds").records():
        sc = _scope(s.rank, device=r["device"])
        out.append(NsysFact(
            f"nsys.kernel_share:{r['kind']}:{sc}", f"{r['kind'].capitalize()} kernels' share, device {r['device']}",
            _num(r["share_pct"]), "%", denominator="summed kernel time of the device", ranks=ranks,
            aggregate="sum over streams", evidence=(Evidence("nsys_kernel_kinds", {"rank": s.rank, "device": r["device"],
                                                                                  "kind": r["kind"]},
                                                             {"total_ns": r["total_ns"], "count": r["count"]}),)))
    for r in s.table("nsys_copies").records():
        key = f"{r['op']}:{r['direction']}"
        if r.get("implausible"):  # a number that cannot be: said, never used
            out.append(not_measured(f"nsys.copy_bandwidth:{key}:{_scope(s.rank)}".rstrip(":"),
                                    f"Achieved {r['op']} bandwidth {r['direction']}",
                                    f"implausible: {r['implausible']}", unit="GB/s", ranks=ranks))
            continue
        out.append(NsysFact(
            f"nsys.copy_bandwidth:{key}:{_scope(s.rank)}".rstrip(":"), f"Achieved {r['op']} bandwidth {r['direction']}",
            _num(r["bandwidth_gbps"]), "GB/s", denominator="the operations' summed duration",
            denominator_value=(r["total_ns"] or 0) / MS, denominator_unit="ms", ranks=ranks,
            evidence=(Evidence("nsys_copies", {"rank": s.rank, "op": r["op"], "direction": r["direction"]},
                               {"bytes": r["bytes"], "total_ns": r["total_ns"], "count": r["count"]}),)))
    out.extend(_hardware_facts(s))
    api = s.table("nsys_cuda_api").records()
    if api:
        top = api[0]
        out.append(NsysFact(
            f"nsys.cuda_api_top:{_scope(s.rank)}".rstrip(":"), "CUDA API call with the most time",
            top["name"], "", detail=f"{top['total_ns'] / MS:.3f} ms in {top['count']} call(s), "
            f"{_num(top['share_pct']) or 0:.1f}% of traced API time", ranks=ranks,
            evidence=(Evidence("nsys_cuda_api", {"rank": s.rank, "name": top["name"]},
                               {"total_ns": top["total_ns"], "count": top["count"]}),)))
    out.extend(_host_sync_facts(s))
    osrt = s.table("nsys_osrt").records()
    if "osrt" in s.not_measured:
        out.append(not_measured(f"nsys.osrt_top:{_scope(s.rank)}".rstrip(":"), "OS runtime wait with the most time",
                                s.not_measured["osrt"], ranks=ranks))
    elif osrt:
        top = osrt[0]
        out.append(NsysFact(
            f"nsys.osrt_top:{_scope(s.rank)}".rstrip(":"), "OS runtime wait with the most time", top["name"],
            detail=f"{top['total_ns'] / MS:.3f} ms in {top['count']} call(s) on {top['threads']} thread(s)",
            ranks=ranks, evidence=(Evidence("nsys_osrt", {"rank": s.rank, "name": top["name"]},
                                            {"total_ns": top["total_ns"]}),)))
    out.extend(_iteration_facts(s))
    out.extend(_mfu_facts(s))
    return out


def _mfu_facts(s: ExportSummary) -> list[NsysFact]:
    """MFU per process (``nsys_mfu``): its value over the dense peak and the iteration time, or every reason it is not."""
    out = []
    for r in s.table("nsys_mfu").records():
        fid = f"nsys.mfu:{_scope(s.rank, pid=r['pid'])}".rstrip(":") if r["pid"] is not None else \
            f"nsys.mfu:{_scope(s.rank)}".rstrip(":")
        label = "MFU (model FLOPs utilisation)"
        if r["mfu_pct"] is None:
            out.append(not_measured(fid, label, r["not_measured"] or "not computed", unit="%", ranks=(s.rank,)))
            continue
        out.append(NsysFact(
            fid, label, float(r["mfu_pct"]), "%",
            source="nsys NVTX iterations and the hardware table",
            denominator=f"dense {r['dtype']} peak of {r['gpu']} ({r['peak_tflops']:g} TFLOP/s, {r['peak_row']}; "
                        f"{r['peak_source']}) × the NVTX iteration time",
            denominator_value=r["time_ns"] / MS, denominator_unit="ms", ranks=(s.rank,), steps=r["iterations"],
            aggregate=f"{r['iterations']} {r['iteration_range']!r} iteration(s) of process {r['pid']}",
            detail=(f"{r['flops_per_iteration']:.4g} FLOPs per GPU and iteration ({r['flops_source']}) in a mean "
                    f"{r['mean_iteration_ns'] / MS:,.3f} ms: {r['achieved_tflops']:,.1f} TFLOP/s; GPU from "
                    f"{r['gpu_source']}"),
            evidence=(Evidence("nsys_mfu", {"rank": s.rank, "pid": r["pid"]},
                               {k: r[k] for k in ("flops_per_iteration", "iterations", "time_ns", "peak_tflops",
                                                  "mfu_pct")}),)))
    return out


def _copy_share_facts(s: ExportSummary, busy: dict[str, Any], scope: str) -> list[NsysFact]:
    """The share of a device's busy time covered by copies, sets and memory kernels (``nsys_busy_kind``)."""
    rows = s.table("nsys_busy_kind").where(device=busy["device"], kind="memory")
    if not rows or not busy["busy_ns"]:
        return []
    (row,) = rows
    return [NsysFact(
        f"nsys.copy_share:{scope}", f"Copies and sets, device {busy['device']}", _num(row["share_of_busy_pct"]), "%",
        denominator="the device's busy time (union of its work)", denominator_value=busy["busy_ns"] / MS,
        denominator_unit="ms", ranks=(s.rank,), aggregate="device-level unions",
        detail=f"{row['busy_ns'] / MS:,.3f} ms of copies, sets and memory kernels in {row['ops']} operation(s)",
        evidence=(Evidence("nsys_busy_kind", {"rank": s.rank, "device": busy["device"], "kind": "memory"},
                           {"busy_ns": row["busy_ns"], "ops": row["ops"]}),))]


def _host_sync_facts(s: ExportSummary) -> list[NsysFact]:
    """Time the host spent in CUDA calls that wait for the GPU (among the calls with the most time)."""
    api = s.table("nsys_cuda_api").records()
    if "cuda_api" in s.not_measured:
        return [not_measured(f"nsys.host_sync:{_scope(s.rank)}".rstrip(":"), "Host blocked in synchronising CUDA "
                             "calls", s.not_measured["cuda_api"], unit="ms", ranks=(s.rank,))]
    rows = [r for r in api if SYNC_CALL.search(r["name"] or "")]
    if not api:
        return []
    total = sum(r["total_ns"] or 0 for r in rows)
    return [NsysFact(
        f"nsys.host_sync:{_scope(s.rank)}".rstrip(":"), "Host blocked in synchronising CUDA calls", total / MS, "ms",
        ranks=(s.rank,), aggregate=f"the {len(api)} CUDA calls with the most time",
        detail=", ".join(f"{r['name']} {r['total_ns'] / MS:,.1f} ms in {r['count']} call(s)" for r in rows[:4])
        or "no synchronising call among them",
        evidence=tuple(Evidence("nsys_cuda_api", {"rank": s.rank, "name": r["name"]},
                                {"total_ns": r["total_ns"], "count": r["count"]}) for r in rows))]


def _idle_cause_facts(s: ExportSummary, device: Any, scope: str) -> list[NsysFact]:
    """The share of a device's idle time spent waiting for the host to launch work (``nsys_idle_causes``)."""
    rows = s.table("nsys_idle_causes").where(device=device)
    idle = sum(r["idle_ns"] or 0 for r in rows)
    if not idle:
        return []
    host = sum(r["idle_ns"] or 0 for r in rows if r["category"] == "host_wait")
    return [NsysFact(
        f"nsys.idle_host_wait:{scope}", f"GPU idle waiting for the host, device {device}", 100.0 * host / idle, "%",
        denominator="the device's idle time (span minus the union of busy time)", denominator_value=idle / MS,
        denominator_unit="ms", ranks=(s.rank,), aggregate="device-level",
        detail=f"{host / MS:,.3f} ms of {idle / MS:,.3f} ms idle",
        evidence=tuple(Evidence("nsys_idle_causes", {"rank": s.rank, "device": device, "category": r["category"]},
                                {"idle_ns": r["idle_ns"], "gaps": r["gaps"]}) for r in rows))]


def _hardware_facts(s: ExportSummary) -> list[NsysFact]:
    """The GPU model from the hardware table, and device-to-device copies against its memory bandwidth."""
    from my_utils.profiling.hardware.table import gpu_model, memory_bandwidth

    ranks = (s.rank,)
    out: list[NsysFact] = []
    names = {g.name for g in s.gpus}
    if not names:
        return [not_measured(f"nsys.gpu_model:{_scope(s.rank)}".rstrip(":"), "GPU model",
                             s.not_measured.get("gpu_model", "the export names no GPU"), ranks=ranks)]
    for name in sorted(names):
        model = gpu_model(name)
        fid = f"nsys.gpu_model:{_scope(s.rank)}".rstrip(":") + (f":{name}" if len(names) > 1 else "")
        if model is None:
            out.append(not_measured(fid, "GPU model in the hardware table", f"{name!r} is not in the hardware table "
                                    "(my_utils/profiling/hardware/hardware.csv)", ranks=ranks))
            continue
        out.append(NsysFact(fid, "GPU model in the hardware table", model, ranks=ranks, detail=name))
    used = {g.name for g in s.gpus if g.device in set(s.table("nsys_busy_device").column("device") or [])}
    bw = memory_bandwidth(next(iter(used))) if len(used) == 1 else None
    for r in s.table("nsys_copies").records():
        if bw is None or r["direction"] not in ("DtoD", "device") or not r["bandwidth_gbps"] or r.get("implausible"):
            continue
        out.append(NsysFact(
            f"nsys.copy_bandwidth_share:{r['op']}:{r['direction']}:{_scope(s.rank)}".rstrip(":"),
            f"{r['op']} {r['direction']} bandwidth against the GPU's memory bandwidth",
            100.0 * r["bandwidth_gbps"] * 1e9 / bw.value, "%", denominator=f"{bw.model} memory bandwidth ({bw.source})",
            denominator_value=bw.value / 1e9, denominator_unit="GB/s", ranks=ranks,
            evidence=(Evidence("nsys_copies", {"rank": s.rank, "op": r["op"], "direction": r["direction"]},
                               {"bandwidth_gbps": r["bandwidth_gbps"]}),)))
    return out


def _iteration_facts(s: ExportSummary) -> list[NsysFact]:
    ranks = (s.rank,)
    sid = _scope(s.rank)
    it = s.iterations
    if it is None:
        return [not_measured(f"nsys.iteration_time:{sid}".rstrip(":"), "Iteration time (NVTX)",
                             s.not_measured.get("iterations", "no iterations"), unit="ms", ranks=ranks)]
    out = []
    for st in it.stats:
        sc = f"{sid}:pid{st.pid}".lstrip(":")
        ev = (Evidence("nsys_iterations", {"rank": s.rank, "pid": st.pid},
                       {"iterations": st.count, "median_ns": st.median_ns, "p90_ns": st.p90_ns, "max_ns": st.max_ns}),)
        out.append(NsysFact(f"nsys.iteration_time:{sc}", f"Median iteration time ({it.pattern})", st.median_ns / MS,
                            "ms", ranks=ranks, steps=st.count, evidence=ev,
                            detail=f"p90 {st.p90_ns / MS:.3f} ms, worst {st.max_ns / MS:.3f} ms"))
        if st.gpu_window_ns:
            idle = st.gpu_window_ns - st.gpu_busy_ns
            out.append(NsysFact(
                f"nsys.iteration_gpu_idle:{sc}", "GPU idle inside the iterations' GPU windows",
                100.0 * idle / st.gpu_window_ns, "%", denominator="summed GPU windows of the iterations",
                denominator_value=st.gpu_window_ns / MS, denominator_unit="ms", ranks=ranks, steps=st.count,
                aggregate="device-level union per iteration", evidence=ev))
        out.append(NsysFact(
            f"nsys.iteration_outliers:{sc}", "Iterations far from the median (slower or faster)", len(st.outliers), "count",
            ranks=ranks, steps=st.count, detail=", ".join(f"#{o.iteration} ({o.position}, z={o.robust_z})"
                                                         for o in st.outliers[:10]),
            evidence=tuple(Evidence("nsys_iterations", {"rank": s.rank, "pid": st.pid, "iteration": o.iteration},
                                    {"cpu_ns": o.cpu_ns, "robust_z": o.robust_z}) for o in st.outliers[:10])))
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

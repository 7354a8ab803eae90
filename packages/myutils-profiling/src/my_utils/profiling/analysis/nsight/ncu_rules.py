"""Findings from the Nsight Compute facts (``ncu.*``), in the scheme of ``analysis.fact_rules``.

The whole a saving is compared with is the profiled kernels' total time (mean duration ×
launches, summed over kernels): Nsight Compute replays kernels one at a time, so there is no
step. Only kernels worth :data:`MIN_KERNEL_SHARE` % of that time get a finding of their own, at
most :data:`MAX_KERNEL_FINDINGS`.

``ncu:roofline_gap:<kernel>`` / ``ncu:latency_bound:<kernel>``
    a kernel below :data:`MAX_ROOF` % of its roofline (FLOP counters, DRAM bytes and a GPU in the
    hardware table), or, without a roofline, latency-bound (neither unit at 60 % of peak).
``ncu:rule:<rule>:<kernel>``
    ncu's own rule rows with an estimated speedup, one finding per rule and kernel.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.nsight.advice import NSIGHT_ADVICE, advice_entry, sentence, short_kernel
from my_utils.profiling.analysis.rules._evidence import impact
from my_utils.profiling.model.report import Fact

MAX_ROOF = 50.0  # % of the roofline
MIN_KERNEL_SHARE = 5.0  # % of the profiled kernels' time: smaller kernels get no finding of their own
MAX_KERNEL_FINDINGS = 5


def ncu_findings(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The findings of the module docstring, as plain finding dicts."""
    return _ncu_kernels(facts, tables) + _ncu_rules(facts, tables)


def _impact(saving_ms: float | None, total: float | None, basis: str) -> dict[str, Any]:
    """An impact on the profiled kernels' total time, said as such (Nsight Compute has no step)."""
    out = impact(saving_ms, total, basis, None, "ncu", True)
    if total:
        out["denominator"] = (f"the profiled kernels' total time ({total:,.3f} ms; Nsight Compute replays kernels one "
                              "at a time: there is no step)")
    return out


def _ncu_times(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[dict[str, float], float]:
    """Per kernel its profiled time (mean duration × launches, ms), and the total over kernels."""
    times = {str(r.get("kernel")): float(r.get("duration_ms") or 0.0) * int(r.get("launches") or 0)
             for r in tables.get("ncu_kernels") or []}
    return times, sum(times.values())


def _ncu_kernels(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    times, total = _ncu_times(tables)
    rows = {str(r.get("kernel")): r for r in tables.get("ncu_kernels") or []}
    out: list[dict[str, Any]] = []
    for kernel, t in sorted(times.items(), key=lambda kv: -kv[1]):
        if len(out) >= MAX_KERNEL_FINDINGS or not total or 100.0 * t / total < MIN_KERNEL_SHARE:
            continue
        key = kernel[:120]
        bound, roof = facts.get(f"ncu.bound:{key}"), facts.get(f"ncu.roofline:{key}")
        r = rows[kernel]
        base = {"category": "optimization", "evidence": {"names": [kernel], "ranks": [], "steps": [],
                                                          "table": "ncu_kernels", "launches": r.get("launches"),
                                                          "kernel_ms": t}}
        if roof is not None and roof.number is not None and roof.number < MAX_ROOF:
            side = "roof_memory" if (r.get("bound") == "memory") else "roof_compute"
            text = NSIGHT_ADVICE["roofline"].format(roof=roof.number, ai=float(r.get("arithmetic_intensity") or 0),
                                                    bound=r.get("bound") or "?", hint=NSIGHT_ADVICE[side])
            out.append({**base, "id": f"ncu:roofline_gap:{key}", "severity": "warning",
                        "title": f"{short_kernel(kernel)} attains {roof.number:.0f}% of its roofline "
                                 f"({float(r.get('attained_gflops') or 0):,.0f} of {roof.denominator_value or 0:,.0f} "
                                 "GFLOP/s)",
                        "detail": f"{roof.denominator}; {r.get('launches')} launch(es), {t:,.3f} ms profiled",
                        "suggestion": text, "facts": [roof.id] + ([bound.id] if bound is not None else []),
                        "impact": _impact(t * (1 - roof.number / 100.0), total, "the kernel's time beyond what the "
                                          "roofline allows, of the profiled kernels' total time"),
                        "advice": [advice_entry(text, "ncu:roofline", roof, bound)]})
        elif bound is not None and bound.value == "latency":
            compute, memory = float(r.get("sol_compute_pct") or 0), float(r.get("sol_memory_pct") or 0)
            occ = r.get("achieved_occupancy_pct")
            text = NSIGHT_ADVICE["latency_bound"].format(compute=compute, memory=memory,
                                                         occupancy=f"{occ:.0f}%" if occ is not None else "not measured")
            occ_f = facts.get(f"ncu.occupancy:{key}")
            out.append({**base, "id": f"ncu:latency_bound:{key}", "severity": "warning" if 100.0 * t / total >= 20
                        else "info",
                        "title": f"{short_kernel(kernel)} is latency-bound: compute {compute:.0f}%, memory {memory:.0f}% of "
                                 f"peak ({100.0 * t / total:.0f}% of the profiled kernel time)",
                        "detail": f"{bound.detail}; {r.get('launches')} launch(es), {t:,.3f} ms profiled",
                        "suggestion": text,
                        "facts": [bound.id] + ([occ_f.id] if occ_f is not None and occ_f.measured else []),
                        "impact": _impact(t * (1 - max(compute, memory) / 100.0), total,
                                          "the kernel's time beyond its busiest unit's use, of the profiled kernels' "
                                          "total time"),
                        "advice": [advice_entry(text, "ncu:latency_bound", bound, occ_f)]})
    return out


def _ncu_rules(facts: Mapping[str, Fact], tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    rows = tables.get("ncu_rules") or []
    by: dict[tuple[str, str], list[Fact]] = defaultdict(list)
    for fid, f in facts.items():
        if fid.startswith("ncu.rule:") and f.number is not None and f.evidence:
            key = f.evidence[0].key
            by[(str(key.get("rule")), str(key.get("kernel")))].append(f)
    times, total = _ncu_times(tables)
    out = []
    for (rule, kernel), fs in sorted(by.items()):
        best = max(fs, key=lambda f: f.number or 0.0)
        speed = best.number or 0.0
        index = best.evidence[0].key.get("index")
        row = rows[index] if isinstance(index, int) and index < len(rows) else {}
        text = NSIGHT_ADVICE["rule"].format(rule=rule, rule_type=row.get("rule_type") or "rule",
                                            description=sentence(str(row.get("description") or best.detail)))
        t = times.get(kernel, 0.0)
        out.append({
            "id": f"ncu:rule:{rule}:{kernel[:80]}", "category": "optimization",
            "severity": "warning" if speed >= 10.0 else "info",
            "title": f"ncu {rule} on {short_kernel(kernel)}: up to {speed:.1f}% estimated speedup"
                     + (f" ({len(fs)} launches)" if len(fs) > 1 else ""),
            "detail": f"{sentence(best.detail)} (estimated speedup {speed:.1f}%, {row.get('speedup_type') or 'estimated'})",
            "evidence": {"names": [kernel], "ranks": [], "steps": [], "table": "ncu_rules", "rule": rule,
                         "speedup_pct": speed, "launches": [f.evidence[0].key.get("launch_id") for f in fs]},
            "suggestion": text,
            "facts": [f.id for f in fs],
            "impact": _impact(t * speed / 100.0 if t else None, total or None,
                              f"ncu's estimated speedup ({row.get('speedup_type') or 'estimated'}) of the kernel's "
                              "time, of the profiled kernels' total time"),
            "advice": [advice_entry(text, f"ncu:rule:{rule}", *fs[:5])],
        })
    return out

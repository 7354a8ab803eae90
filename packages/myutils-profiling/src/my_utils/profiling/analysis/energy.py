"""Energy per step and per capture window, from the GPU monitor's per-step energy.

``GPU_Performance_Tracker`` (myutils-memory) samples a cumulative energy counter, NVML's
total-energy counter or power integrated over time, and, when it follows the training steps,
writes each step's end; its provider emits ``monitor/step_energy_j`` and
``monitor/step_power_w`` per step and ``monitor/energy_method`` once (1: the NVML counter,
2: integrated power). Facts:

``energy.per_step`` (and ``:rank<r>``)
    joules per step: the energy of the measured steps over their number (each rank is one GPU;
    the run's figure adds the ranks' per-step energy), with the mean power and the method.
``energy.capture_window``
    the same over the steps the my_utils capture windows held (``kineto_capture_windows``),
    beside the figure outside them: what a profiled step cost in energy.

A run without the monitor's step energy has neither fact (nothing measured it).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from my_utils.profiling.analysis.rules._series import Series
from my_utils.profiling.model.report import EvidenceRow, Fact

STEP_ENERGY = "monitor/step_energy_j"
STEP_POWER = "monitor/step_power_w"
ENERGY_STEPS = "energy_steps"  # the evidence row holding the per-step mean and spread
METHODS = {1: "NVML's total-energy counter", 2: "power integrated over time (no energy counter)"}

Rows = Sequence[Mapping[str, Any]]


def _method(tables: Mapping[str, Rows]) -> str:
    codes = {int(r["max"]) for r in tables.get("totals") or [] if r.get("name") == "monitor/energy_method"
             and isinstance(r.get("max"), (int, float))}
    names = [METHODS.get(c, f"method {c}") for c in sorted(codes)]
    return " and ".join(names) if names else "method not recorded"


def _per_rank(series: Mapping[Any, Series]) -> dict[int | None, dict[int, tuple[float, float]]]:
    """rank -> step -> (joules, watts)."""
    out: dict[int | None, dict[int, tuple[float, float]]] = {}
    energy = {r: s for (n, r, _src), s in series.items() if n == STEP_ENERGY and s.values}
    power = {r: dict(zip(s.steps, s.values, strict=True)) for (n, r, _src), s in series.items() if n == STEP_POWER}
    for rank, s in energy.items():
        watts = power.get(rank, {})
        out[rank] = {st: (j, watts.get(st, float("nan"))) for st, j in zip(s.steps, s.values, strict=True)}
    return out


def _summary(steps: dict[int | None, dict[int, tuple[float, float]]]) -> tuple[float, int, float | None]:
    """(joules in all, distinct steps, mean power of all the GPUs together or None)."""
    joules = sum(j for per in steps.values() for j, _w in per.values())
    n = len({st for per in steps.values() for st in per})
    timed = [(j, j / w) for per in steps.values() for j, w in per.values() if w == w and w > 0]
    seconds = sum(t for _j, t in timed)
    watts = sum(j for j, _t in timed) / seconds * len(steps) if seconds > 0 else None
    return joules, n, watts


def _text(joules: float, n: int, watts: float | None, gpus: int) -> str:
    power = "" if watts is None else f", {watts:,.1f} W mean" + (f" over {gpus} GPUs" if gpus > 1 else "")
    return f"{joules:,.1f} J over {n} step(s){power}"


def _fact(fid: str, label: str, steps: dict[int | None, dict[int, tuple[float, float]]], detail: str) -> Fact:
    joules, n, _watts = _summary(steps)
    ranks = tuple(sorted(steps, key=lambda r: -1 if r is None else r))
    per_step: dict[int, float] = {}
    for per in steps.values():
        for st, (j, _w) in per.items():
            per_step[st] = per_step.get(st, 0.0) + j
    # the spread per step, for diff to judge a change against (``diff.energy_stats``)
    spread = EvidenceRow(ENERGY_STEPS, {}, {"steps": len(per_step), "mean_j": statistics.fmean(per_step.values()),
                                            "std_j": statistics.pstdev(per_step.values())})
    return Fact(fid, label, joules / n, "J/step", "memory_monitor", "steps with a measured energy", float(n),
                "count", ranks, "energy of every rank's GPU added per step" if len(ranks) > 1 else "", n,
                (spread, *(EvidenceRow("series", {"name": STEP_ENERGY, "rank": r}, {
                    "steps": len(per), "joules": sum(j for j, _w in per.values())}) for r, per in steps.items())),
                detail)


def energy_facts(series: Mapping[Any, Series], tables: Mapping[str, Rows]) -> list[Fact]:
    """``energy.per_step`` (run and per rank) and ``energy.capture_window`` (module docstring)."""
    per_rank = _per_rank(series)
    if not per_rank:
        return []
    method = f"measured with {_method(tables)}"
    facts = [_fact("energy.per_step", "energy per step", per_rank,
                   f"{_text(*_summary(per_rank), len(per_rank))}; {method}")]
    if len(per_rank) > 1:
        facts += [_fact(f"energy.per_step:rank{r}" if r is not None else "energy.per_step:norank", "energy per step",
                        {r: per}, f"{_text(*_summary({r: per}), 1)}; {method}") for r, per in per_rank.items()]
    spans = [(w.get("rank"), w["first_step"], w["last_step"]) for w in tables.get("kineto_capture_windows") or []
             if isinstance(w.get("first_step"), int) and isinstance(w.get("last_step"), int)]
    if not spans:
        return facts

    def held(rank: int | None, st: int) -> bool:
        return any(a <= st <= b for r, a, b in spans if r is None or rank is None or r == rank)

    inside = {r: kept for r, per in per_rank.items() if (kept := {st: v for st, v in per.items() if held(r, st)})}
    outside = {r: kept for r, per in per_rank.items() if (kept := {st: v for st, v in per.items() if not held(r, st)})}
    if inside:
        windows = ", ".join(f"steps {a}-{b}" for _r, a, b in spans)
        away = ""
        if outside:
            joules, n, _w = _summary(outside)
            away = f"; outside them {joules / n:,.1f} J/step over {n} step(s)"
        facts.append(_fact("energy.capture_window", "energy per step in capture windows", inside,
                           f"capture windows ({windows}): {_text(*_summary(inside), len(inside))}{away}; {method}"))
    return facts

"""Suggestions per category, and the rule that turns recognisable cost patterns into advice.

``suggest(category, name)`` gives a built-in finding its ``suggestion``: for a bottleneck or
an optimisation, the advice of the name's operator family (``analysis.advice``: whole tokens,
never substrings), else the category's default. Variability and anomaly findings get jitter
advice from their evidence instead (their rules choose it). ``SuggestionsRule`` adds
``optimization`` findings for patterns that no single threshold catches: a run dominated by
data loading, by host↔device copies, by communication, or by many tiny kernels (launch
overhead); each names the fact it rests on, so the analyzer keeps one finding per fact.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.advice import advice_for, family_of
from my_utils.profiling.analysis.rules._evidence import impact, series_fact
from my_utils.profiling.analysis.rules._series import STEP_TIME, build_series, rank_label

#: The default suggestion of each finding category.
CATEGORY_SUGGESTIONS: dict[str, str] = {
    "bottleneck": "profile this region alone (a torch.profiler window over a few steps) to see which "
                  "operations inside it cost most",
    "memory": "take a memory snapshot (my_utils.memory) at the first and last step of the range and "
              "compare what is still allocated; look for tensors kept in lists, graphs kept alive by "
              "losses stored without .item(), or caches without a bound",
    "anomaly": "look at what else ran on those steps (checkpointing, evaluation, data loader refills, "
               "other jobs on the host); capture a window around one of them",
    "variability": "make the work per step uniform (bucket sequence lengths, fixed batch shapes) or "
                   "find the source of jitter (data loading, host contention, synchronisation)",
    "optimization": "apply the change and compare two reports with `myutils-profile diff`",
    "capture": "fix the capture so that the analysis sees what it needs",
    "imbalance": "compare what this rank does differently: its data shard (sequence lengths), its host "
                 "(CPU contention, thermal throttling, a slower link), or extra work such as logging on "
                 "one rank; `myutils-profile trace --auto-align-ranks` shows it on one clock",
}

#: The name whose family gives each pattern's advice, and the fact each pattern rests on.
_ADVICE_NAME = {"data_loading": "dataloader", "copies": "memcpy", "communication": "nccl"}
_FACT = {"copies": "copies.time:{tag}", "communication": "comm.time:{tag}"}


def _family(name: str) -> str:
    family = family_of(name)
    return family.key if family is not None else ""


def _worst_steps(steps: list[int], values: list[float], n: int = 5) -> list[int]:
    """The ``n`` steps with the largest values, largest first."""
    return [st for _, st in heapq.nlargest(n, zip(values, steps, strict=True))]


def suggest(category: str, name: str = "") -> str:
    """The suggestion for a finding of ``category`` about ``name`` (the family's advice for a bottleneck
    or an optimisation; the category's default otherwise)."""
    if name and category in ("bottleneck", "optimization", "capture_check"):
        _kind, text = advice_for(name)
        if text:
            return text
    return CATEGORY_SUGGESTIONS.get(category, CATEGORY_SUGGESTIONS["optimization"])


class SuggestionsRule:
    """Optimisation advice from recognisable patterns (see the module docstring).

    ``share``: the fraction of step time (or of GPU time, for copies and communication)
    above which a pattern is reported; ``short_kernel_ms``: kernels shorter than this on
    average, launched more than ``many_kernels`` times per step, point at launch overhead.
    """

    name = "suggestions"

    def __init__(self, share: float = 0.2, short_kernel_ms: float = 0.01, many_kernels: int = 500) -> None:
        self.share = share
        self.short_kernel_ms = short_kernel_ms
        self.many_kernels = many_kernels

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """Findings of category ``optimization``, each naming the ranks and the names behind it."""
        series = build_series(events)
        findings: list[dict[str, Any]] = []
        ranks = sorted({r for _, r, _ in series}, key=lambda r: -1 if r is None else r)
        for rank in ranks:
            # the device totals come from torch.profiler; the step time from whichever source timed data loading
            gpu = series.get(("gpu.kernel_time", rank, "torch_profiler"))
            checks: list[tuple[str, str, list[str], float, str, list[int]]] = []  # id, title, names, share, of, steps
            tag = rank_label(rank).replace(" ", "")
            data_fact = ""
            data_impact: dict[str, Any] | None = None
            data = [s for (n, r, _), s in series.items() if r == rank and s.kind == "duration"
                    and n != STEP_TIME and _family(n) == "data_loading"
                    and not n.startswith(("kernel:", "memcpy:", "memset:"))]
            if data:
                top = max(data, key=lambda s: s.total)
                step = series.get((STEP_TIME, rank, top.source))
                if step is not None and step.total > 0:
                    checks.append(("data_loading", "data loading", [top.name], top.total / step.total,
                                   f"{top.source} step time", _worst_steps(top.steps, top.values)))
                    data_fact = series_fact(top)
                    # the loop waits for its batch in this region: a prefetching loader (workers, pinned
                    # memory) overlaps it with the step, so at most all of it per step could go
                    data_impact = impact(statistics.median(top.values), statistics.median(step.values),
                                         f"at most all of {top.name}'s time per step (median over "
                                         f"{len(top.values)} step(s)), hidden by prefetching",
                                         len(top.values), top.source, upper_bound=True)
            if gpu is not None and gpu.total > 0:
                for sname, key, label in (("gpu.memcpy_time", "copies", "host↔device copies"),
                                          ("gpu.comm_time", "communication", "communication kernels")):
                    s = series.get((sname, rank, "torch_profiler"))
                    if s is not None and s.total > 0:
                        busy = gpu.total + s.total if sname == "gpu.memcpy_time" else gpu.total
                        checks.append((key, label, [sname], s.total / busy, "GPU busy time",
                                       _worst_steps(s.steps, s.values)))
            for key, label, names, share, of, steps in checks:
                if share >= self.share:
                    findings.append({
                        "id": f"suggestion:{key}:{rank_label(rank).replace(' ', '')}",
                        "category": "optimization", "severity": "warning" if share < 2 * self.share else "critical",
                        "title": f"{label} takes {share:.0%} of {of} on {rank_label(rank)}",
                        "detail": f"{', '.join(names)} sums to {share:.1%} of the {of} of {rank_label(rank)}",
                        "evidence": {"names": names, "ranks": [rank], "share": round(share, 4), "of": of,
                                     "steps": steps},
                        "suggestion": suggest("optimization", _ADVICE_NAME[key]),
                        "facts": [data_fact if key == "data_loading" else _FACT[key].format(tag=tag)],
                        **({"impact": data_impact} if key == "data_loading" and data_impact else {}),
                        "advice": [{"text": suggest("optimization", _ADVICE_NAME[key]), "kind": key, "facts": [],
                                    "because": [{"table": "operations", "key": {"name": names[0]},
                                                 "values": {"share": round(share, 4), "of": of, "rank": rank}}]}],
                    })
            count = series.get(("gpu.kernel_count", rank, "torch_profiler"))
            if count is not None and gpu is not None and count.values and gpu.values:
                per_step = statistics.median(count.values)
                mean_ms = gpu.total / max(1.0, count.total)
                if per_step >= self.many_kernels and mean_ms < self.short_kernel_ms:
                    findings.append({
                        "id": f"suggestion:launch_overhead:{rank_label(rank).replace(' ', '')}",
                        "category": "optimization", "severity": "warning",
                        "title": f"{per_step:.0f} kernels per step averaging {mean_ms * 1e3:.1f} µs on {rank_label(rank)}",
                        "detail": "many tiny kernels: the GPU waits on launches more than it computes",
                        "evidence": {"names": ["gpu.kernel_count", "gpu.kernel_time"], "ranks": [rank],
                                     "kernels_per_step": per_step, "mean_kernel_ms": mean_ms,
                                     "steps": count.steps[:50]},
                        "suggestion": "fuse operations (torch.compile), capture the step with CUDA graphs, "
                                      "or raise the batch size so each kernel does more work",
                        "facts": [f"launch:{tag}"],
                    })
        return findings

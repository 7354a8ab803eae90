"""Suggestions per category, and the rule that turns recognisable cost patterns into advice.

``suggest(category, name)`` gives every built-in finding its ``suggestion``: the advice of
the first name pattern that matches (data loading, communication, copies, optimizer...),
else the category's default. ``SuggestionsRule`` adds ``optimization`` findings for
patterns that no single threshold catches: a run dominated by data loading, by host↔device
copies, by communication, or by many tiny kernels (launch overhead).
"""

from __future__ import annotations

import heapq
import re
import statistics
from collections.abc import Sequence
from typing import Any

from my_utils.core.events import MetricEvent
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

# name pattern -> advice; the first match wins (patterns are matched case-insensitively)
_BY_NAME: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), s) for p, s in (
    (r"data|load|batch|fetch|collate|prefetch",
     "data loading: raise DataLoader num_workers, set pin_memory=True and persistent_workers=True, "
     "prefetch the next batch while the current one trains"),
    (r"nccl|allreduce|all_reduce|allgather|all_gather|reduce_scatter|broadcast|barrier|comm",
     "communication: overlap it with compute (gradient bucketing, DDP bucket_cap_mb, FSDP prefetch) "
     "and check for stragglers across ranks"),
    (r"memcpy|copy|\.to\(|h2d|d2h|transfer",
     "host↔device copies: use pinned memory with non_blocking=True, keep tensors on the device, "
     "avoid .item()/.cpu() inside the step"),
    (r"optim|adam|sgd|step\b",
     "optimizer: use a fused or foreach implementation (torch.optim.AdamW(fused=True)) or a "
     "multi-tensor apply"),
    (r"backward|grad",
     "backward: try activation checkpointing trade-offs, mixed precision (torch.autocast) and "
     "check for unused parameters"),
    (r"forward|attention|attn|matmul|gemm|linear|conv",
     "compute: use mixed precision (bf16/fp16 autocast), fused kernels (scaled_dot_product_attention) "
     "or torch.compile"),
    (r"save|checkpoint|ckpt|log|eval",
     "I/O and evaluation: run them less often or asynchronously, off the training step"),
))


def _worst_steps(steps: list[int], values: list[float], n: int = 5) -> list[int]:
    """The ``n`` steps with the largest values, largest first."""
    return [st for _, st in heapq.nlargest(n, zip(values, steps, strict=True))]


def suggest(category: str, name: str = "") -> str:
    """The suggestion for a finding of ``category`` about ``name``."""
    if name and category in ("bottleneck", "variability", "anomaly", "optimization"):
        for pattern, advice in _BY_NAME:
            if pattern.search(name):
                return advice
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
            data = [s for (n, r, _), s in series.items() if r == rank and s.kind == "duration"
                    and n != STEP_TIME and re.search(r"data|load|fetch|collate", n, re.IGNORECASE)
                    and not n.startswith(("kernel:", "memcpy:", "memset:"))]
            if data:
                top = max(data, key=lambda s: s.total)
                step = series.get((STEP_TIME, rank, top.source))
                if step is not None and step.total > 0:
                    checks.append(("data_loading", "data loading", [top.name], top.total / step.total, "step time",
                                   _worst_steps(top.steps, top.values)))
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
                        "suggestion": suggest("optimization", key if key != "copies" else "memcpy"),
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
                    })
        return findings

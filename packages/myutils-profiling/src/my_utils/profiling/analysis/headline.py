"""The headline: the first screen of a report, a fact set built here and drawn by ``reports/``.

``build_headline(facts, findings, title)`` picks, from the run's facts, the context (GPU ×
world size, ranks, host, CUDA, whether the run is CPU-only), the figures (step time median /
p90 / worst with its source, GPU busy / idle, communication share and overlap) and the verdict
(``analysis.verdict``: the class of the run and 2–3 lines), and names the findings to fix first:
the first three, in impact order, that state a saving of at least 1% of the step (capture checks
and breakdowns of where the time is are not fixes), with any tied with the third.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from my_utils.profiling.analysis.verdict import fix_first, verdict
from my_utils.profiling.model.report import Fact, Finding, Headline, not_measured_fact

__all__ = ["CONTEXT", "FIGURES", "TOP", "build_headline", "verdict"]

#: Context facts shown, in order.
CONTEXT = ("context.gpu", "context.gpu_count", "context.world_size", "context.ranks", "context.host",
           "context.cuda_runtime", "context.cuda_driver", "context.backend", "context.cpu_only")
#: Context facts shown when an input gives them (other analyses produce them).
OPTIONAL_CONTEXT = ("context.hosts", "capture.overhead", "energy.per_step", "energy.capture_window")
#: Figures shown, in order.
FIGURES = ("step_time.median", "step_time.p90", "step_time.worst", "gpu.busy", "gpu.idle", "comm.share",
           "comm.overlap")
TOP = 3


def _get(facts: Mapping[str, Fact], fact_id: str, label: str) -> Fact:
    return facts.get(fact_id) or not_measured_fact(fact_id, label, "no input gives it")


def build_headline(facts: Sequence[Fact], findings: Sequence[Finding], title: str) -> Headline:
    """The headline of a report whose findings are already ranked (largest saving first)."""
    by_id = {f.id: f for f in facts}
    context = tuple(_get(by_id, i, i.split(".", 1)[1].replace("_", " ")) for i in CONTEXT) + tuple(
        by_id[i] for i in OPTIONAL_CONTEXT if i in by_id)
    figures = tuple(_get(by_id, i, i.replace("_", " ").replace(".", " ")) for i in FIGURES)
    top = fix_first(findings, TOP)
    return Headline(title, context, figures, verdict(by_id, findings, top), tuple(f.id for f in top))

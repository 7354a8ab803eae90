"""The CI gate: is a new run worse than the distribution of the last N comparable runs?

For each metric judged, the baseline is the last ``last`` runs of the new run's series (same workload,
hardware and world size; and the same config hash when the new run has one) stored before it. When
the change points of the baseline show that it moved to a new level, only the runs since that change
are kept (if at least ``min_runs`` remain): a deliberate speed-up last week does not widen the noise.

The new value is compared with the baseline's median in units of its robust spread (1.4826 × MAD),
widened for the uncertainty of the median itself (``sqrt(1 + π/2n)``); the one-sided p-value in the
worse direction comes from Student's t with ``n - 1`` degrees of freedom. A metric is a regression
when it moved the worse way by at least ``min_pct`` % of the median *and* its p-value is under
``max_p`` divided by the number of metrics judged (Bonferroni: ``max_p`` bounds the chance that a
run with no change fails the gate on any metric). Fewer than ``min_runs`` comparable runs: not judged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from my_utils.profiling.history.changepoints import change_points
from my_utils.profiling.history.context import SeriesKey
from my_utils.profiling.history.metrics import higher_is_better
from my_utils.profiling.history.stats import robust_spread, t_sf

#: Metrics judged when none is named (those the new run measured).
GATE_METRICS = ("step_time.median", "gpu.idle", "comm.exposed", "mfu", "nsys.iteration_time")
LAST, MIN_RUNS, MAX_P, MIN_PCT = 30, 5, 0.01, 3.0


@dataclass(frozen=True)
class GateSettings:
    """How the gate judges: baseline size, fewest runs, the p-value bound and the smallest change that fails."""

    last: int = LAST
    min_runs: int = MIN_RUNS
    max_p: float = MAX_P
    min_pct: float = MIN_PCT


@dataclass(frozen=True)
class Baseline:
    """The comparable runs a metric is judged against (ids and values, oldest first) and how they were chosen."""

    run_ids: tuple[int, ...]
    values: tuple[float, ...]
    since_change: bool = False


@dataclass(frozen=True)
class MetricVerdict:
    """One metric of the new run against its baseline (``judged`` False, with ``reason``, when it could not be)."""

    metric: str
    unit: str
    value: float | None
    baseline: Baseline
    judged: bool
    reason: str = ""
    median: float | None = None
    spread: float | None = None
    change_pct: float | None = None
    sigmas: float | None = None
    p_value: float | None = None
    regression: bool = False
    worse: bool = False


@dataclass(frozen=True)
class GateResult:
    """The verdicts of one run: ``failed`` when any metric regressed; ``judged`` False when none could be judged."""

    run_label: str
    series: SeriesKey
    verdicts: tuple[MetricVerdict, ...]
    settings: GateSettings = field(default_factory=GateSettings)

    @property
    def regressions(self) -> list[MetricVerdict]:
        """The regressed metrics, most significant first."""
        return sorted((v for v in self.verdicts if v.regression), key=lambda v: (v.p_value or 0.0, v.metric))

    @property
    def failed(self) -> bool:
        """True when a metric regressed."""
        return any(v.regression for v in self.verdicts)

    @property
    def judged(self) -> bool:
        """True when at least one metric was judged."""
        return any(v.judged for v in self.verdicts)


def choose_baseline(run_ids: Sequence[int], values: Sequence[float], min_runs: int) -> Baseline:
    """The runs since the baseline's last change of level when at least ``min_runs`` remain, else all of them."""
    if len(values) >= 2 * min_runs:
        found = change_points(values, min_size=min_runs)
        if found and len(values) - found[-1].index >= min_runs:
            k = found[-1].index
            return Baseline(tuple(run_ids[k:]), tuple(values[k:]), since_change=True)
    return Baseline(tuple(run_ids), tuple(values))


def judge(metric: str, unit: str, value: float | None, baseline: Baseline, settings: GateSettings,
          judged_metrics: int = 1) -> MetricVerdict:
    """One metric's verdict (module docstring); ``judged_metrics`` shares ``max_p`` among the metrics judged."""
    n = len(baseline.values)
    if value is None:
        return MetricVerdict(metric, unit, None, baseline, False, "the run did not measure it")
    if n < settings.min_runs:
        return MetricVerdict(metric, unit, value, baseline, False,
                             f"{n} comparable run(s) before it; the gate needs {settings.min_runs}")
    median = statistics.median(baseline.values)
    spread = robust_spread(baseline.values)
    up_is_worse = not higher_is_better(metric)
    delta = value - median
    change = (delta / abs(median) * 100.0) if median != 0 else (0.0 if delta == 0 else math.copysign(math.inf, delta))
    worse = delta > 0 if up_is_worse else delta < 0
    scale = spread * math.sqrt(1.0 + math.pi / (2.0 * n))
    if scale > 0:
        sigmas = abs(delta) / scale
        p = t_sf(sigmas if worse else -sigmas, n - 1)
    else:  # every baseline run gave the same number: any worse move is beyond its noise
        sigmas, p = (math.inf, 0.0) if worse else (0.0, 1.0)
    bound = settings.max_p / max(1, judged_metrics)
    regression = worse and abs(change) >= settings.min_pct and p < bound
    return MetricVerdict(metric, unit, value, baseline, True, "", median, spread, change, sigmas, p, regression, worse)


def run_gate(run_label: str, series: SeriesKey, new_values: Mapping[str, tuple[float, str]],
             baselines: Mapping[str, Baseline], settings: GateSettings) -> GateResult:
    """Judge every metric of ``new_values`` (name -> (value, unit)) that has a baseline entry."""
    judgeable = [m for m in baselines if m in new_values and len(baselines[m].values) >= settings.min_runs]
    verdicts = []
    for metric, baseline in baselines.items():
        value, unit = new_values.get(metric, (None, ""))
        verdicts.append(judge(metric, unit, value, baseline, settings, len(judgeable)))
    return GateResult(run_label, series, tuple(verdicts), settings)

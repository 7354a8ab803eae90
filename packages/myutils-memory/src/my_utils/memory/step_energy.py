"""Energy per training step, from the monitor's cumulative energy samples and the steps' end times.

``energy_j`` is cumulative (NVML's total-energy counter, or power integrated over time: the
samples header's ``energy_method``), so the energy of an interval is the difference of the
counter at its two ends. A step ends at its mark; it begins at the previous step's mark, so
the first marked step has no start. The counter at a mark is interpolated linearly between
the two samples around it: a step shorter than the sampling interval gets the interval's
average power, which is why a run's figure is total energy over steps, not a per-step peak.
Steps outside the sampled span (no sample after the mark yet) are not measured.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from my_utils.memory.samples_file import Sample, StepMark

#: ``monitor/energy_method`` event values (an event value is a number)
METHOD_CODES = {"nvml_total_energy": 1.0, "integrated_power": 2.0}


@dataclass(frozen=True)
class StepEnergy:
    """One step: when it ran (unix s), the energy it took (J) and its mean power (W)."""

    step: int
    start_ts: float
    end_ts: float
    joules: float

    @property
    def seconds(self) -> float:
        return self.end_ts - self.start_ts

    @property
    def watts(self) -> float:
        return self.joules / self.seconds if self.seconds > 0 else float("nan")


def energy_at(times: Sequence[float], energy: Sequence[float], ts: float) -> float | None:
    """The cumulative energy at ``ts``, interpolated between samples; None outside the samples' span."""
    i = bisect.bisect_left(times, ts)
    if i < len(times) and times[i] == ts:
        return energy[i]
    if i == 0 or i == len(times):
        return None
    t0, t1 = times[i - 1], times[i]
    return energy[i - 1] + (energy[i] - energy[i - 1]) * (ts - t0) / (t1 - t0)


def step_energies(samples: Sequence[Sample], marks: Sequence[StepMark]) -> list[StepEnergy]:
    """Each step between two consecutive marks whose ends the samples cover (module docstring)."""
    points = sorted((s.ts, s.metrics["energy_j"]) for s in samples if "energy_j" in s.metrics)
    times = [t for t, _ in points]
    energy = [e for _, e in points]
    out: list[StepEnergy] = []
    ordered = sorted(marks, key=lambda m: m.ts)
    for prev, mark in pairwise(ordered):
        if mark.step <= prev.step:  # a new run restarted the steps: no start for this one
            continue
        a, b = energy_at(times, energy, prev.ts), energy_at(times, energy, mark.ts)
        if a is not None and b is not None and b >= a:
            out.append(StepEnergy(mark.step, prev.ts, mark.ts, b - a))
    return out

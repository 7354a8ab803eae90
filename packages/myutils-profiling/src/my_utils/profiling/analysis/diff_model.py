"""What a diff is: per-name statistics on each side, their changes, the GPU-level facts, the warnings and the gate.

Each side of a name is an :class:`OpStats`: its occurrences and the mean and spread of its
*samples* (per-step totals for traces and reports, per-launch durations for nsys kernels,
per-iteration totals where NVTX iterations exist). :func:`compare` judges a change only
where both sides have repeated samples (at least :data:`MIN_SAMPLES`): it is *significant*
when it exceeds ``sigmas`` standard errors of the difference of the means *and* ``min_pct`` %
of the base. A name seen once on a side (one step, one launch, one capture) has no spread to
judge against: its change is ``unmeasured`` and never significant, whatever its size. The
standard error uses ``n - 1`` degrees of freedom, so few samples give a wide noise band. A diff
where nothing could be judged is *descriptive*: it lists the largest changes and says so,
and a regression gate refuses it (a gate that sees no repeated sample must not pass).

:class:`DiffResult` also carries what the headline is built from: both sides' GPU-level facts
and the step-time change by cause (``diff_gpu``), the workload similarity and capture-window
checks (``diff_context``), and the warnings, like-for-like ones first.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError, one_line

if TYPE_CHECKING:
    from my_utils.profiling.analysis.diff_context import Similarity, WindowDifference
    from my_utils.profiling.analysis.diff_gpu import GpuRow, GpuSide, StepAccount

DIFF_SCHEMA_VERSION = "1.2"
STEP_TIME = "step_time"
#: Samples a side needs before a change can be judged (one has no spread).
MIN_SAMPLES = 2
#: A name is listed under its parent when at least this share of its time runs inside it (on the same thread).
FOLD_SHARE = 0.95


@dataclass(frozen=True)
class OpStats:
    """One name on one side: occurrences, samples (``steps``) and the per-sample total's mean and std."""

    name: str
    count: float
    steps: int
    mean: float
    std: float
    unit: str = "ms"
    source: str = ""

    @property
    def count_per_step(self) -> float:
        """Occurrences per sample (the count delta compares these: runs of different lengths stay comparable)."""
        return self.count / self.steps if self.steps else float(self.count)


@dataclass(frozen=True)
class OpChange:
    """How one name changed; ``status`` is changed/unchanged/unmeasured/added/removed.

    ``unmeasured``: a side has fewer than :data:`MIN_SAMPLES` samples, so the change is
    not judged. ``parent`` is the name under which most of its time runs (traces), else None;
    ``parent_share`` that share (0..1).
    """

    name: str
    status: str
    base: OpStats | None
    target: OpStats | None
    delta: float  # target mean - base mean, per sample, in the unit
    delta_pct: float | None  # of the base mean; None when the base is absent or zero
    count_delta: float  # occurrences per sample
    noise: float  # the smallest |delta| that would have been significant
    significant: bool
    parent: str | None = None
    parent_share: float | None = None

    @property
    def unit(self) -> str:
        """The unit of both sides' means."""
        side = self.base or self.target
        return side.unit if side is not None else ""

    @property
    def samples(self) -> tuple[int, int]:
        """Samples on each side (0 where the name is absent)."""
        return (self.base.steps if self.base else 0, self.target.steps if self.target else 0)

    @property
    def measured(self) -> bool:
        """Whether every side holding the name has repeated samples (the change can be judged)."""
        return all(s.steps >= MIN_SAMPLES for s in (self.base, self.target) if s is not None)

    def to_dict(self) -> dict[str, Any]:
        """JSON row of this change."""
        def side(s: OpStats | None) -> dict[str, Any] | None:
            return None if s is None else {"count": s.count, "steps": s.steps, "mean": s.mean, "std": s.std,
                                           "unit": s.unit, "source": s.source}

        return {"name": self.name, "status": self.status, "significant": self.significant, "measured": self.measured,
                "samples": list(self.samples), "delta": self.delta, "delta_pct": self.delta_pct,
                "count_delta": self.count_delta, "noise": self.noise, "parent": self.parent,
                "parent_share": self.parent_share, "base": side(self.base), "target": side(self.target)}


@dataclass(frozen=True)
class GateResult:
    """The verdict of ``--fail-on-regression PCT``: the significant slow-downs of at least ``threshold`` %."""

    threshold: float
    regressions: tuple[OpChange, ...]
    headline: str = ""

    @property
    def passed(self) -> bool:
        """True when no significant slow-down reaches the threshold (speed-ups never fail the gate)."""
        return not self.regressions

    def describe(self, limit: int = 5) -> str:
        """One line: ``passed`` or ``FAILED: name +12.3%, ...``."""
        if self.passed:
            return "passed"
        shown = ", ".join(f"{one_line(c.name)} {c.delta_pct:+.1f}%" if c.delta_pct is not None
                          else f"{one_line(c.name)} (new)" for c in self.regressions[:limit])
        more = f" and {len(self.regressions) - limit} more" if len(self.regressions) > limit else ""
        return f"FAILED: {shown}{more}"

    def message(self) -> str:
        """The gate's line for CI: the verdict, then the diff's headline (why the step time changed)."""
        return f"{self.describe()}. {self.headline}" if self.headline else self.describe()


@dataclass(frozen=True)
class DiffResult:
    """Every name's change, the step-time change, both sides' hardware and GPU facts, and the warnings, like-for-like first."""

    base: str
    target: str
    changes: list[OpChange]
    step_time: OpChange | None = None
    warnings: list[str] = field(default_factory=list)
    settings: dict[str, float] = field(default_factory=dict)
    base_hardware: dict[str, Any] = field(default_factory=dict)
    target_hardware: dict[str, Any] = field(default_factory=dict)
    kineto: list[dict[str, Any]] = field(default_factory=list)  # Kineto figures that changed (kineto.compare)
    gpu: tuple[GpuSide, GpuSide] | None = None
    similarity: Similarity | None = None
    window: WindowDifference | None = None
    notes: list[str] = field(default_factory=list)  # how the figures were sampled (what could not be judged)
    sampling: str = "per step"  # what one sample of a name is, for the pages
    summary_rows: tuple[GpuRow, ...] = ()  # the before -> after table when there is no GPU timeline (ncu)
    headline_text: str = ""  # a headline built by the tool's own diff (ncu), else the one of ``diff_headline``
    operations: Any = None  # the operation-matched diff (``ops.op_diff.OpDiff``) of two traces' operators
    energy: OpChange | None = None  # the GPU monitor's energy per step (J), when both sides measured it

    @property
    def significant(self) -> list[OpChange]:
        """Significant changes, largest |delta| first."""
        return sorted((c for c in self.changes if c.significant), key=lambda c: -abs(c.delta))

    @property
    def descriptive(self) -> bool:
        """No name and no step time could be judged: every change rests on one sample per side."""
        return not any(c.measured for c in [*self.changes, *([self.step_time] if self.step_time else [])])

    def largest(self) -> list[OpChange]:
        """What a page lists: the significant changes, or, for a descriptive diff, the largest unjudged ones.

        Unjudged changes are listed when at least ``min_pct`` % of their base (or of the base
        step, for names on one side only), largest |delta| first.
        """
        if not self.descriptive:
            return self.significant
        pct = self.settings.get("min_pct", 5.0)
        step = self.step_time.base.mean if self.step_time and self.step_time.base else None
        out = [c for c in self.changes if (c.delta_pct is not None and abs(c.delta_pct) >= pct)
               or (c.delta_pct is None and (step is None or abs(c.delta) >= abs(step) * pct / 100) and c.delta)]
        return sorted(out, key=lambda c: -abs(c.delta))

    @property
    def gpu_rows(self) -> list[GpuRow]:
        """The GPU-level before → after table (empty without GPU facts on both sides)."""
        from my_utils.profiling.analysis.diff_gpu import gpu_rows

        if self.gpu is None or not self.gpu[0].lanes or not self.gpu[1].lanes:
            return list(self.summary_rows)
        return gpu_rows(*self.gpu, step=self._step_pair())

    @property
    def accounting(self) -> StepAccount | None:
        """The step-time change by cause (None without GPU facts on both sides)."""
        from my_utils.profiling.analysis.diff_gpu import account

        if self.gpu is None:
            return None
        return account(*self.gpu, step=self._step_pair(), sigmas=self.settings.get("sigmas", 3.0),
                       min_pct=self.settings.get("min_pct", 5.0))

    def _step_pair(self) -> tuple[float, float] | None:
        s = self.step_time
        return (s.base.mean, s.target.mean) if s and s.base and s.target else None

    @property
    def headline(self) -> str:
        """One line: what changed at the GPU level and why, the like-for-like caveat first (``diff_headline``)."""
        from my_utils.profiling.analysis.diff_headline import headline

        return self.headline_text or headline(self)

    def regressions(self, pct: float) -> list[OpChange]:
        """Significant slow-downs of at least ``pct`` % (the step time first when it is one of them)."""
        step = self.step_time
        same = {step.name, *(s.name for s in (step.base, step.target) if s is not None)} if step else set()
        pool = ([step] if step else []) + [c for c in self.significant if c.name not in same]  # the step once
        return [c for c in pool if c.significant and c.delta > 0
                and (c.delta_pct is None or c.delta_pct >= pct)]

    def gate(self, pct: float) -> GateResult:
        """The regression gate at ``pct`` %: its regressions list nested names after the others.

        Refused (``InputError``) when nothing it gates was compared (reports with only Kineto
        tables), or when nothing could be judged (one sample per side): a gate that sees no
        data, or no repeated sample, must not pass.
        """
        where = f"{self.base} vs {self.target}"
        if not self.changes and self.step_time is None:
            raise InputError(where, None,
                             "operations or step times for the regression gate; found only Kineto analysis "
                             "figures, which the gate does not judge (drop --fail-on-regression, or compare "
                             "reports with an operations table or steps)")
        if self.descriptive:
            raise InputError(where, None,
                             "repeated samples (steps, iterations or launches) for the regression gate; every "
                             "figure rests on one sample per side, so no change can be told from noise (record "
                             "at least 2 steps per run: a schedule with active >= 2, or NVTX iteration ranges)")
        folded = self.folded()
        found = self.regressions(pct)
        return GateResult(pct, tuple(sorted(found, key=lambda c: c.name in folded)), self.headline)

    def folded(self) -> dict[str, str]:
        """Listed names that run inside another listed name: name → that ancestor.

        A name is folded when its dominant parent holds at least :data:`FOLD_SHARE` of its
        time (the parent's inclusive time then holds the name's change), the ancestor changes
        the same way, and by at least as much: a child cannot change more than its parent,
        so one that does is listed on its own. Follows the dominant-parent chain.
        """
        listed = {c.name: c for c in self.largest()}
        parents = {c.name: c.parent for c in self.changes if c.parent and (c.parent_share or 0.0) >= FOLD_SHARE}
        out: dict[str, str] = {}
        for name, change in listed.items():
            seen = {name}
            up = parents.get(name)
            while up is not None and up not in seen:
                seen.add(up)
                ancestor = listed.get(up)
                if ancestor is not None and (ancestor.delta > 0) == (change.delta > 0) \
                        and abs(change.delta) <= abs(ancestor.delta) * (1 + 1e-9):
                    out[name] = up
                    break
                up = parents.get(up)
        return out

    def to_dict(self, fail_on_regression: float | None = None) -> dict[str, Any]:
        """The JSON object written by ``--output`` (with the gate's verdict when asked)."""
        counts: dict[str, int] = defaultdict(int)
        for c in self.changes:
            counts[c.status] += 1
        folded = self.folded()
        acc = self.accounting
        out: dict[str, Any] = {
            "schema_version": DIFF_SCHEMA_VERSION, "base": self.base, "target": self.target,
            "headline": self.headline, "settings": dict(self.settings), "warnings": list(self.warnings),
            "notes": list(self.notes), "descriptive": self.descriptive, "sampling": self.sampling,
            "hardware": {"base": dict(self.base_hardware), "target": dict(self.target_hardware)},
            "gpu": None if self.gpu is None else {"base": self.gpu[0].to_dict(), "target": self.gpu[1].to_dict(),
                                                  "rows": [r.to_dict() for r in self.gpu_rows]},
            "accounting": None if acc is None else acc.to_dict(),
            "similarity": None if self.similarity is None else self.similarity.to_dict(),
            "window": None if self.window is None else self.window.to_dict(),
            "step_time": None if self.step_time is None else self.step_time.to_dict(),
            "energy_per_step": None if self.energy is None else self.energy.to_dict(),
            "summary": {"names": len(self.changes), "significant": len(self.significant),
                        "measured": sum(1 for c in self.changes if c.measured), "folded": len(folded), **counts},
            "changes": [{**c.to_dict(), "folded_into": folded.get(c.name)} for c in self.changes],
            "kineto": [dict(k) for k in self.kineto],
            "operations": None if self.operations is None else self.operations.to_dict()}
        if fail_on_regression is not None:
            gate = self.gate(fail_on_regression)
            out["gate"] = {"threshold_pct": fail_on_regression, "passed": gate.passed,
                           "regressions": [c.name for c in gate.regressions], "message": gate.message()}
        return out


def _finite(value: float, where: str, name: str, what: str) -> float:
    if not math.isfinite(value):
        raise InputError(where, f"name {name!r}", f"{what} within the range of a 64-bit float (got {value}); "
                                                  "a duration this large is not a measurement")
    return value


def spread(values: list[float]) -> tuple[float, float]:
    """Mean and population std without overflow (``hypot`` scales; squares of 1e200 would not fit)."""
    mean = math.fsum(values) / len(values)
    if not math.isfinite(mean):
        return mean, math.nan
    return mean, math.hypot(*(v - mean for v in values)) / math.sqrt(len(values))


def standard_error(std_a: float, n_a: int, std_b: float, n_b: int) -> float:
    """The standard error of the difference of two means, from each side's population std and sample count.

    The population std of n samples underestimates the spread they come from; ``n - 1`` in
    the denominator is the unbiased estimate (two samples count as one degree of freedom).
    """
    return math.hypot(std_a / math.sqrt(max(n_a - 1, 1)), std_b / math.sqrt(max(n_b - 1, 1)))


def compare(base: Mapping[str, OpStats], target: Mapping[str, OpStats], *, sigmas: float = 3.0,
            min_pct: float = 5.0, base_step_mean: float | None = None,
            parents: Mapping[str, tuple[str, float]] | None = None, where: str = "<diff>",
            capture_totals: bool = False) -> list[OpChange]:
    """One :class:`OpChange` per name of either side, sorted by name (see the module doc for the test).

    A name on one side only is significant when it has repeated samples and its time is at
    least ``min_pct`` % of ``base_step_mean``: its per-sample mean, or with
    ``capture_totals`` its mean times its count (per-launch samples, compared with a
    capture's time). ``parents`` maps a name to its dominant parent and the share of its time inside it.
    Numbers too large to compare (a delta or noise that overflows) raise ``InputError``
    naming ``where`` and the name.
    """
    out: list[OpChange] = []
    parents = parents or {}
    floor = base_step_mean * min_pct / 100 if base_step_mean else 0.0
    for name in sorted(set(base) | set(target)):
        a, b = base.get(name), target.get(name)
        parent, share = parents.get(name, (None, None))
        if a is not None and b is not None:
            delta = b.mean - a.mean
            se = standard_error(a.std, a.steps, b.std, b.steps)
            noise = max(sigmas * se, abs(a.mean) * min_pct / 100)
            pct = delta / a.mean * 100 if a.mean else None
            for value, what in ((delta, "a delta"), (noise, "a noise level"), (pct or 0.0, "a percentage")):
                _finite(value, where, name, what)
            measured = a.steps >= MIN_SAMPLES and b.steps >= MIN_SAMPLES
            significant = measured and abs(delta) > noise
            status = ("changed" if significant else "unchanged") if measured else "unmeasured"
            out.append(OpChange(name, status, a, b, delta, pct, b.count_per_step - a.count_per_step, noise,
                                significant, parent, share))
        else:
            only = a if a is not None else b
            assert only is not None  # one side holds every name of the union
            sign = 1.0 if b is not None else -1.0
            size = abs(only.mean) * (only.count if capture_totals else 1.0)
            significant = only.steps >= MIN_SAMPLES and size >= floor
            out.append(OpChange(name, "added" if b is not None else "removed", a, b, sign * only.mean, None,
                                sign * only.count_per_step, floor, significant, parent, share))
    return out

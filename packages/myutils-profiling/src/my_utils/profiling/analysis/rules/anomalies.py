"""AnomalyRule: steps far from the usual value of a name, by 3σ and by a median/MAD score, at a controlled FDR.

Two tests per (name, rank) series after the warm-up steps:

- ``sigma``: ``|x - mean| > sigma · std`` (the seed's 3σ rule; a few outliers inflate
  ``std`` and can hide each other, and with under 10 points one outlier can never pass it);
- ``mad``: ``|x - median| / (1.4826 · MAD) > mad_z`` (the robust z-score of Iglewicz and
  Hoaglin; one outlier does not move the median nor the MAD).

``method`` picks ``sigma``, ``mad``, ``either`` (default: flagged by one test, the finding
says which) or ``both``; a step must also differ from the median by ``min_excess`` (10 %)
of it, so that a near-constant series does not report its noise.

**Multiple testing.** Every step of every series tested is one test: a run of 1M events
tests about that many values, and 3σ alone then flags hundreds of pure-noise steps. Each
score becomes a two-sided normal p-value (``either``: twice the smaller of the two, a
Bonferroni bound; ``both``: the larger), and only the steps that the Benjamini–Hochberg
procedure keeps at false-discovery rate :data:`FDR` over *all* values tested in the run
are reported (they must also pass the thresholds above). The finding states the rate and
how many values were tested.

**Working, not waiting.** A region's time on a rank that waited there for another rank (a
collective) is taken out before testing (``_waits``): a rank that waited 200 ms in ``backward``
for a rank whose ``forward`` spiked has no anomaly of its own. Its step's excess is then named
in the finding of the rank that worked (``waiting_ranks``), not as a second finding.

**Severity follows what a fix could save, and the host is not the program.** A loaded host
delays any region now and then, by tens of ms on a busy machine, on steps nobody chose; outlying
steps that do not recur cannot tell the program from the host, so such a finding is ``info``
whatever its size (it still names the steps, the rank, the region and the host's own jitter in
this run, ``_waits.HostJitter``). A finding can be a warning or critical only when its steps
*recur*: every p steps through the run with a similar size, each at least ``jitter_ms`` above
the median, and make at least half of the series' steps that far above it
(``my_utils.core.step_patterns``: a data-loader stall). Then it is critical when the time above the median, spread over the steps
tested, is at least 5 % of the median step, a warning from 1 %, else info.

A sub-region flagged on the same steps as its step time is the explanation of the step's
anomaly, not a second finding: it is named in the step's finding (one finding per fact),
and the advice follows it (see ``analysis.advice.JITTER_ADVICE``: a region that explains
the excess, periodic steps, faster steps, or nothing timed — GC, host, allocator).

Only ``step_time`` and the ``max_names`` names with the largest totals are tested, so a trace
with thousands of kernel names gives a handful of findings, not thousands; a host name
under ``min_share`` of its step time is left out, and so is a region that *is* the step
(MyTimer's ``iter`` wrapper, equal to ``step_time`` at every step).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from my_utils.core.events import MetricEvent
from my_utils.profiling.analysis.advice import JITTER_ADVICE, jitter_cause
from my_utils.profiling.analysis.rules._evidence import (
    advice,
    impact,
    not_attributable,
    same_as_step,
    series_fact,
    steps_row,
)
from my_utils.profiling.analysis.rules._series import (
    STEP_TIME,
    Series,
    after_warmup,
    build_series,
    is_candidate_duration,
    is_gpu_family,
    rank_label,
    series_id,
    series_total,
    step_ranges,
    step_summary,
)
from my_utils.profiling.analysis.rules._stats import (
    MAD_TO_SIGMA,
    Summary,
    benjamini_hochberg,
    summarize,
    t_two_sided_p,
)
from my_utils.profiling.analysis.rules._waits import (
    TAIL,
    HostJitter,
    excess_over_median,
    fold_waiting,
    recurring,
    region_waits,
    working_series,
)
from my_utils.profiling.analysis.rules.suggestions import suggest

METHODS = ("sigma", "mad", "either", "both")
#: The false-discovery rate the reported outlying steps are controlled at (Benjamini–Hochberg).
FDR = 0.05
#: Share of the median step above which a finding's saving is critical, and a warning.
CRITICAL_SHARE = 0.05
WARNING_SHARE = 0.01


#: Degrees of freedom of a MAD-scaled score per point: the MAD estimates σ with about 37 % of
#: the efficiency of the standard deviation, so a robust z over n points is read as a t with
#: ``MAD_DF · (n - 1)`` degrees of freedom (small series get wide tails, not false alarms).
MAD_DF = 0.37


def sigma_p(z: float, n: int) -> float:
    """Two-sided p-value of a 3σ score ``z`` (population σ, the point included) among ``n`` values.

    ``z`` is the internally studentised residual; ``z·sqrt((n-2)/(n-1-z²))`` is then Student's t
    with ``n - 2`` degrees of freedom under normal noise (the externally studentised residual).
    """
    if not math.isfinite(z):
        return 0.0
    if n < 3:
        return 1.0
    room = n - 1 - z * z
    if room <= 0:
        return 0.0
    return t_two_sided_p(z * math.sqrt((n - 2) / room), n - 2)


def mad_p(rz: float, n: int) -> float:
    """Two-sided p-value of a robust z-score among ``n`` values (a t with ``MAD_DF·(n-1)`` degrees of freedom)."""
    if not math.isfinite(rz):
        return 0.0
    return t_two_sided_p(rz, max(1.0, MAD_DF * (n - 1)))


class AnomalyRule:
    """Flag outlying steps per name and rank (see the module docstring)."""

    name = "anomalies"

    def __init__(self, sigma: float = 3.0, mad_z: float = 3.5, method: str = "either", warmup_steps: int = 1,
                 min_steps: int = 8, max_names: int = 20, min_excess: float = 0.10, min_share: float = 0.01,
                 jitter_ms: float = 20.0) -> None:
        if method not in METHODS:
            raise ValueError(f"AnomalyRule(method={method!r}): expected one of {list(METHODS)}")
        self.sigma = sigma
        self.mad_z = mad_z
        self.method = method
        self.warmup_steps = warmup_steps
        self.min_steps = max(3, min_steps)
        self.max_names = max_names
        self.min_excess = min_excess
        self.min_share = min_share
        self.jitter_ms = jitter_ms

    def evaluate(self, events: Sequence[MetricEvent]) -> list[dict[str, Any]]:
        """One finding per (name, rank) with outlying steps, the steps kept by Benjamini–Hochberg at :data:`FDR`."""
        raw = build_series(events)
        waits = region_waits(events, raw)
        series = working_series(raw, waits)
        names = {n for (n, _, _), s in series.items() if n == STEP_TIME and s.kind == "duration"}
        totals: dict[str, float] = {}
        for (n, _, _), s in raw.items():
            if is_candidate_duration(s) and not same_as_step(raw, s):
                totals[n] = totals.get(n, 0.0) + series_total(events, s)
        names.update(sorted(totals, key=lambda n: -totals[n])[: self.max_names])
        step_total = {(r, src): series_total(events, s) for (n, r, src), s in raw.items() if n == STEP_TIME}
        tested: list[tuple[Series, list[int], list[float], Summary, list[dict[str, Any]], list[float]]] = []
        pool: dict[str, list[float]] = {}
        m = 0
        for (name, _rank, _source), s in sorted(series.items(), key=lambda kv: (
                kv[0][0] != STEP_TIME, kv[0][0], kv[0][1] or -1, kv[0][2])):
            if name not in names or same_as_step(raw, s):
                continue
            denom = step_total.get((s.rank, s.source), 0.0)
            if name != STEP_TIME and not is_gpu_family(name) and denom > 0 and series_total(events, s) / denom < self.min_share:
                continue  # a 1 % region jittering cannot move the step
            steps, values = after_warmup(s, self.warmup_steps)
            if len(values) < self.min_steps:
                continue
            m += len(values)
            if name != STEP_TIME and not is_gpu_family(name):
                pool.setdefault(name, []).extend(excess_over_median(values))
            # shared statistics only for an unchanged series (a region with waits taken out is new)
            stats = step_summary(events, s, self.warmup_steps) if s is raw.get((name, _rank, _source)) \
                else summarize(values)
            rows, ps = self._outliers(steps, values, stats)
            if rows:
                tested.append((s, steps, values, stats, rows, ps))
        keep = benjamini_hochberg([p for *_rest, ps in tested for p in ps], m, FDR)
        kept: list[tuple[Series, list[int], list[float], Summary, list[dict[str, Any]]]] = []
        i = 0
        for s, steps, values, stats, rows, ps in tested:
            rows = [r for r, k in zip(rows, keep[i:i + len(ps)], strict=True) if k]
            i += len(ps)
            if rows:
                kept.append((s, steps, values, stats, rows))
        self._context = (series, m, sum(1 for _ in tested))
        self._raw = raw
        self._waits = waits
        self._jitter = HostJitter(pool, self.jitter_ms)
        return self._findings(series, kept, m, events)

    def _outliers(self, steps: list[int], values: list[float], stats: Summary | None = None
                  ) -> tuple[list[dict[str, Any]], list[float]]:
        """The threshold-flagged rows (as :meth:`_check` lists them) and each one's p-value."""
        rows = self._rows(steps, values, stats)
        n = len(values)
        ps = []
        for r in rows:
            p_sigma, p_mad = sigma_p(r["_z"], n), mad_p(r["_rz"], n)
            p = (min(1.0, 2.0 * min(p_sigma, p_mad)) if self.method == "either" else max(p_sigma, p_mad)
                 if self.method == "both" else p_sigma if self.method == "sigma" else p_mad)
            ps.append(p)
        for r in rows:
            del r["_z"], r["_rz"]
        return rows, ps

    def _findings(self, series: dict[Any, Series], kept: list[tuple[Series, list[int], list[float], Summary,
                                                                    list[dict[str, Any]]]], m: int,
                  events: Sequence[MetricEvent] = ()) -> list[dict[str, Any]]:
        by_step_series = {(s.rank, s.source): (s, rows) for s, _st, _v, _stats, rows in kept if s.name == STEP_TIME}
        findings: list[dict[str, Any]] = []
        waited: list[dict[str, Any]] = []  # steps a rank spent waiting for another: the other's finding names them
        inside: list[tuple[dict[str, Any], set[int]]] = []  # sub-region findings within their step's steps
        for s, steps, values, stats, rows in kept:
            step = by_step_series.get((s.rank, s.source))
            within = s.name != STEP_TIME and step is not None and \
                {r["step"] for r in rows} <= {r["step"] for r in step[1]}
            if s.name == STEP_TIME:
                rows = self._own_rows(series, s, rows, stats.median, waited)
                if not rows:
                    continue
            finding = self._check(s, steps, values, rows, stats)
            if finding is None:
                continue
            finding["detail"] += (f"; kept by Benjamini–Hochberg at a {FDR:.0%} false-discovery rate over "
                                  f"{m:,} step values tested")
            finding["evidence"]["fdr"] = FDR
            finding["evidence"]["values_tested"] = m
            self._explain(series, s, rows, finding, events)
            self._grade(s, steps, values, rows, finding, events)
            if within:
                inside.append((finding, {r["step"] for r in rows}))
            findings.append(finding)
        # a region flagged on its step's steps explains that step's finding (named there, not a second
        # finding) unless it recurs and its step does not: then it says more than the step does
        recurs = {(f["evidence"]["ranks"][0], tuple(f["evidence"].get("recurring_steps", ()))) for f in findings
                  if f["evidence"]["names"] == [STEP_TIME] and "recurring_steps" in f["evidence"]}
        drop = {id(f) for f, _steps in inside
                if "recurring_steps" not in f["evidence"]
                or (f["evidence"]["ranks"][0], tuple(f["evidence"]["recurring_steps"])) in recurs}
        return fold_waiting([f for f in findings if id(f) not in drop], waited)

    def _grade(self, s: Series, steps: list[int], values: list[float], rows: list[dict[str, Any]],
               finding: dict[str, Any], events: Sequence[MetricEvent]) -> None:
        """Severity, title and impact from whether the steps recur or lie beyond the host's jitter (module docstring).

        Recurring steps must also stand out of their own series: each at least ``jitter_ms`` above
        the median, and at least half of the series' steps that far above it (a stall is most of a
        region's large steps; among delays a host scatters over a region, a few that happen to line
        up are not).
        """
        ev = finding["evidence"]
        med, unit = ev["median"], s.unit
        host = self._jitter.level(s.name)
        slow = [r for r in rows if r["value"] > med]
        excess = [r["value"] - med for r in slow]
        found = recurring([r["step"] for r in slow], excess, steps[0], steps[-1]) if slow else None
        if found is not None:
            members = set(found[1])
            least = min(x for r, x in zip(slow, excess, strict=True) if r["step"] in members)
            large = sum(1 for v in values if v - med >= self.jitter_ms)
            if least < self.jitter_ms or 2 * len(members) < large:
                found = None
        ev["host_jitter_ms"] = host
        ev["host_jitter_pooled"] = self._jitter.pooled()
        tested = ev["steps_tested"]
        step = self._raw.get((STEP_TIME, s.rank, s.source))
        step_ms = step_summary(events, step, 0).median if step is not None and step.values else None
        if found is not None:
            period, run = found
            ev["period"], ev["recurring_steps"] = period, run
            kept = [x for r, x in zip(slow, excess, strict=True) if r["step"] in run]
            saving = sum(kept) / tested if tested else 0.0
            finding["title"] = (f"{s.name}: every {period} steps ({step_ranges(run)}) on {rank_label(s.rank)}, "
                                f"{statistics.median(kept):.4g} {unit} above its median each")
            basis = f"the recurring steps' time above the median, spread over the {tested} steps tested"
        else:
            saving = None
            basis = ""
        if saving is not None and step_ms:
            share = saving / step_ms
            finding["severity"] = ("critical" if share >= CRITICAL_SHARE else
                                   "warning" if share >= WARNING_SHARE else "info")
            finding["impact"] = impact(saving, step_ms, basis, tested, s.source)
        else:
            not_attributable(finding, "none attributable: outlying steps that do not recur cannot tell the "
                                      "program from the host")
            if len(rows) <= 2:
                worst = max(rows, key=lambda r: abs(r["value"] - med))
                finding["title"] = (f"{s.name}: step {worst['step']} on {rank_label(s.rank)} took {worst['value']:.4g} "
                                    f"{unit} against a median of {med:.4g} ({worst['value'] - med:+.4g} {unit})"
                                    + (f" and {len(rows) - 1} more step" if len(rows) == 2 else ""))
            finding["detail"] += (f"; {'one step that does' if len(rows) == 1 else 'a few steps that do'} not recur cannot tell "
                                  f"the program from the host, whose own delays in this run reach {host:.4g} {unit} "
                                  f"(the {TAIL:.0%} quantile of the other regions' excess over their median, at "
                                  f"least {self.jitter_ms:g}): information, not a warning")
        explained = ev.get("explained_by")
        if explained is not None:
            finding["title"] += f"; in {explained['name']}"
        elif ev.get("causes") and ev["causes"][0]["name"] is not None and len(rows) > 1:
            top = ev["causes"][0]
            finding["title"] += f"; the largest, step {top['step']} ({top['excess']:+.4g} {unit}), in {top['name']}"


    def _explain(self, series: dict[Any, Series], s: Series, rows: list[dict[str, Any]],
                 finding: dict[str, Any], events: Sequence[MetricEvent] = ()) -> None:
        """Advice from the evidence (module docstring), the impact, and the facts of the finding."""
        flagged = [r["step"] for r in rows]
        med = finding["evidence"]["median"]
        excess = sum(r["value"] - med for r in rows)
        cause, text, because = "unexplained", JITTER_ADVICE["unexplained"], [steps_row(s, flagged, {
            "median": med, "values": [r["value"] for r in rows]})]
        facts = [series_fact(s) + ":outliers"]  # the outlying steps, not the series' share (a bottleneck's fact)
        best = None
        if s.name == STEP_TIME and excess > 0:
            for other in series.values():
                if (other.rank, other.source) != (s.rank, s.source) or other.kind != "duration" \
                        or other.name == STEP_TIME or same_as_step(self._raw, other) or not other.values:
                    continue
                at = dict(zip(other.steps, other.values, strict=True))
                shared = other is self._raw.get((other.name, other.rank, other.source))  # else waits taken out
                o_med = step_summary(events, other, 0).median if shared else statistics.median(other.values)
                gain = sum(at.get(st, o_med) - o_med for st in flagged)
                if best is None or gain > best[0]:
                    best = (gain, other, o_med)
            finding["evidence"]["causes"] = self._causes(series, s, rows, med)
        if best is not None and best[0] >= 0.5 * excess:
            _gain, other, o_med = best
            cause = "explained"
            text = JITTER_ADVICE["explained"].format(name=other.name, advice=jitter_cause(other.name))
            because.append(steps_row(other, flagged, {"median": o_med, "values": [
                dict(zip(other.steps, other.values, strict=True)).get(st) for st in flagged]}))
            finding["evidence"]["explained_by"] = {"name": other.name, "share_of_excess": round(best[0] / excess, 4)}
        elif len(flagged) >= 3 and len({b - a for a, b in itertools.pairwise(flagged)}) == 1:
            cause, text = "periodic", JITTER_ADVICE["periodic"].format(period=flagged[1] - flagged[0])
        elif all(r["value"] < med for r in rows):
            cause, text = "faster", JITTER_ADVICE["faster"]
        finding["suggestion"] = text
        finding["advice"] = [advice(text, because, f"jitter:{cause}")]
        finding["facts"] = facts
        tested = finding["evidence"]["steps_tested"]
        step = series.get((STEP_TIME, s.rank, s.source))
        step_ms = step_summary(events, step, 0).median if step is not None and step.values else None
        saving = max(excess, 0.0) / tested if tested else None
        finding["impact"] = impact(saving if step_ms else None, step_ms,
                                   f"the outlying steps' time above the median, spread over the {tested} steps tested",
                                   tested, s.source)

    def _own_rows(self, series: dict[Any, Series], s: Series, rows: list[dict[str, Any]], med: float,
                  waited: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` of a step time less the steps whose excess was a wait for another rank (those go to ``waited``)."""
        own = []
        for r in rows:
            excess = r["value"] - med
            wait = self._waited(series, s, [r["step"]], excess) if excess > 0 else None
            if wait is None:
                own.append(r)
            else:
                waited.append({"rank": s.rank, "source": s.source, "step": r["step"], "excess": excess, **wait})
        return own

    def _causes(self, series: dict[Any, Series], s: Series, rows: list[dict[str, Any]], med: float
                ) -> list[dict[str, Any]]:
        """For the largest outlying steps of a step time (at most 10), the region that took most above its median."""
        regions = [o for o in series.values() if (o.rank, o.source) == (s.rank, s.source) and o.kind == "duration"
                   and o.name != STEP_TIME and o.values and not same_as_step(self._raw, o)]
        usual = {o.name: statistics.median(o.values) for o in regions}
        at = {o.name: dict(zip(o.steps, o.values, strict=True)) for o in regions}
        out = []
        for r in sorted(rows, key=lambda r: -abs(r["value"] - med))[:10]:
            st, excess = r["step"], r["value"] - med
            gains = [(at[o.name].get(st, usual[o.name]) - usual[o.name], o.name) for o in regions]
            gain, name = max(gains, default=(0.0, ""))
            out.append({"step": st, "excess": excess, "name": name if excess > 0 and gain >= 0.5 * excess else None,
                        "region_excess": gain})
        return out

    def _waited(self, series: dict[Any, Series], s: Series, flagged: list[int], excess: float) -> dict[str, Any] | None:
        """Where rank ``s.rank`` waited at the ``flagged`` steps, and for whom, when its waits explain half the excess.

        The wait is the largest of its regions' (``_waits``) over those steps; the rank it waited for
        is the other rank whose region took the most above its median then (working time).
        """
        where: tuple[float, str] | None = None
        for other in series.values():
            if (other.rank, other.source) != (s.rank, s.source) or other.name == STEP_TIME:
                continue
            total = sum(self._waits.at((other.name, other.rank, other.source), st) for st in flagged)
            if total > 0 and (where is None or total > where[0]):
                where = (total, other.name)
        if where is None or where[0] < 0.5 * excess:
            return None
        cause: tuple[float, Series] | None = None
        for other in series.values():
            if other.source != s.source or other.rank in (s.rank, None) or other.kind != "duration" \
                    or other.name == STEP_TIME or same_as_step(self._raw, other) or not other.values:
                continue
            at = dict(zip(other.steps, other.values, strict=True))
            med = statistics.median(other.values)
            gain = sum(at.get(st, med) - med for st in flagged)
            if cause is None or gain > cause[0]:
                cause = (gain, other)
        if cause is None or cause[0] <= 0:
            return None
        return {"in": where[1], "ms": where[0], "steps": list(flagged), "for_rank": cause[1].rank,
                "cause": cause[1].name, "cause_ms": cause[0] / len(flagged)}

    def _rows(self, steps: list[int], values: list[float], stats: Summary | None = None) -> list[dict[str, Any]]:
        """The steps a threshold test flags (with unrounded scores in ``_z``/``_rz``), in step order.

        ``stats``: the :class:`Summary` of ``values`` when the caller has it (the shared one).
        """
        stats = summarize(values) if stats is None else stats
        mean, std, ordered, med = stats.mean, stats.std, stats.ordered, stats.median
        scale = MAD_TO_SIGMA * stats.mad
        sigma, mad_z, method = self.sigma, self.mad_z, self.method
        excess = self.min_excess * abs(med)

        def scores(v: float) -> tuple[float, float]:
            return (v - mean) / std if std > 0 else 0.0, (v - med) / scale if scale > 0 else 0.0

        # Both scores grow with the value, so the steps a test can flag are the ends of the sorted
        # values: find the cuts there and score only the steps beyond them (a few, not all).
        # Non-finite statistics (an inf in the series) keep the plain loop over every step.
        everything = not all(map(math.isfinite, (mean, std, med, scale)))
        hi_cut = lo_cut = None
        if not everything:
            for v in reversed(ordered):
                z, rz = scores(v)
                if not (z > sigma or rz > mad_z):
                    break
                hi_cut = v
            for v in ordered:
                z, rz = scores(v)
                if not (z < -sigma or rz < -mad_z):
                    break
                lo_cut = v
        rows: list[dict[str, Any]] = []
        if everything:
            candidates: Iterable[tuple[int, float]] = zip(steps, values, strict=True)
        elif hi_cut is None and lo_cut is None:
            return rows  # the usual series: nothing beyond either cut, no step to score
        else:  # the few steps beyond a cut, in step order (one C-speed pass, not a Python loop)
            hi = math.inf if hi_cut is None else hi_cut
            lo = -math.inf if lo_cut is None else lo_cut
            candidates = [(st, v) for st, v in zip(steps, values, strict=True) if v >= hi or v <= lo]
        for step, v in candidates:
            z, rz = scores(v)
            by_sigma = abs(z) > sigma
            by_mad = abs(rz) > mad_z
            if not (by_sigma or by_mad):  # the usual step: no test flags it, whatever the method
                continue
            by = [m for m, hit in (("sigma", by_sigma), ("mad", by_mad)) if hit]
            if method == "both" and len(by) < 2:
                by = []
            elif method in ("sigma", "mad"):
                by = [m for m in by if m == method]
            # a robust score over a near-constant series flags noise: require a visible excess too
            if by and abs(v - med) > excess:
                rows.append({"step": step, "value": v, "z": round(z, 3), "robust_z": round(rz, 3), "by": by,
                             "_z": z, "_rz": rz})
        return rows

    def _check(self, s: Series, steps: list[int], values: list[float],
               rows: list[dict[str, Any]] | None = None, stats: Summary | None = None) -> dict[str, Any] | None:
        """The finding of one series from its flagged ``rows`` (default: every threshold-flagged step, no FDR).

        ``stats``: the :class:`Summary` of ``values`` when the caller has it (the shared one).
        """
        name, rank, unit = s.name, s.rank, s.unit
        stats = summarize(values) if stats is None else stats
        if rows is None:
            rows = self._rows(steps, values, stats)
            for r in rows:
                del r["_z"], r["_rz"]
        mean, std, med, scale = stats.mean, stats.std, stats.median, MAD_TO_SIGMA * stats.mad
        if not rows:
            return None
        flagged = [r["step"] for r in rows]
        both = all(len(r["by"]) == 2 for r in rows)
        worst = max(rows, key=lambda r: abs(r["value"] - med))
        slow = worst["value"] > med
        return {
            "id": f"anomaly:{series_id(s)}",
            "category": "anomaly",
            "severity": "critical" if both and abs(worst["value"] - med) > abs(med) else "warning",
            "title": f"{name}: {len(rows)} outlying step(s) ({step_ranges(flagged)}) on {rank_label(rank)}",
            "detail": (f"step {worst['step']} took {worst['value']:.4g} {unit} against a median of {med:.4g} "
                       f"(mean {mean:.4g}, std {std:.4g}; {self.sigma:g}σ and robust z > {self.mad_z:g}); "
                       f"{'slower' if slow else 'faster'} than usual"),
            "evidence": {"names": [name], "ranks": [rank], "steps": flagged, "outliers": rows[:50],
                         "median": med, "mean": mean, "std": std, "mad_sigma": scale, "unit": unit,
                         "method": self.method, "steps_tested": len(values)},
            "suggestion": suggest("anomaly", name),
        }


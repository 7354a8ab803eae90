"""Trends: one metric over each comparable series, with its change points named by run and commit.

A :class:`Trend` is a :class:`~my_utils.profiling.history.store.Series` and its changes; each
:class:`Change` names the first run after it, that run's commit and time, whether the move is for
the worse (the metric's direction, ``metrics.higher_is_better``) and whether the config hash
changed there (then the change may be the config's, not the code's). Series are never merged:
runs on other hardware or at another world size are another trend (:data:`NOT_COMPARED`).

``overview`` gives the team page's rows: every series and key metric, the trends whose latest
change is for the worse first (largest move first), then the rest.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from my_utils.profiling.history.changepoints import (
    DEFAULT_ALPHA,
    MIN_CHANGE_PCT,
    MIN_SIZE,
    ChangePoint,
    change_points,
)
from my_utils.profiling.history.metrics import KEY_METRICS, higher_is_better

if TYPE_CHECKING:
    from my_utils.profiling.history.reads import StoreReads
    from my_utils.profiling.history.records import Series

NOT_COMPARED = ("Runs on different hardware (GPU model and count) or at a different world size are separate "
                "series: they are never compared with each other, and no change point spans two of them.")


@dataclass(frozen=True)
class DetectSettings:
    """The change-point settings (``history.changepoints``)."""

    alpha: float = DEFAULT_ALPHA
    min_size: int = MIN_SIZE
    min_change_pct: float = MIN_CHANGE_PCT


@dataclass(frozen=True)
class Change:
    """A change of level in a trend: the first run after it, its commit and time, and which way it went."""

    point: ChangePoint
    run_id: int
    commit: str | None
    branch: str | None
    time: float
    worse: bool
    config_changed: bool


@dataclass(frozen=True)
class Trend:
    """One metric over one comparable series, oldest run first, and its changes."""

    series: Series
    changes: tuple[Change, ...]

    @property
    def latest_change(self) -> Change | None:
        """The most recent change (the level the series is at now started there)."""
        return self.changes[-1] if self.changes else None

    @property
    def regressed(self) -> bool:
        """True when the latest change was for the worse (a regression still in force)."""
        return self.latest_change is not None and self.latest_change.worse

    def levels(self) -> list[float]:
        """Each run's level: the median of its segment between changes."""
        bounds = [0, *(c.point.index for c in self.changes), len(self.series)]
        out: list[float] = []
        for lo, hi in itertools.pairwise(bounds):
            seg = sorted(self.series.values[lo:hi])
            mid = len(seg) // 2
            level = seg[mid] if len(seg) % 2 else (seg[mid - 1] + seg[mid]) / 2.0
            out.extend([level] * (hi - lo))
        return out


def trend_of(series: Series, settings: DetectSettings | None = None) -> Trend:
    """``series`` with its change points (module docstring)."""
    s = settings or DetectSettings()
    found = change_points(series.values, s.alpha, s.min_size, s.min_change_pct) if len(series) else []
    up_is_worse = not higher_is_better(series.metric)
    changes = tuple(
        Change(cp, series.run_ids[cp.index], series.commits[cp.index], series.branches[cp.index],
               series.times[cp.index], (cp.change_pct > 0) == up_is_worse and cp.change_pct != 0,
               series.config_hashes[cp.index] != series.config_hashes[cp.index - 1])
        for cp in found)
    return Trend(series, changes)


def trends(store: StoreReads, metric: str, workload: str | None = None, hardware: str | None = None,
           world_size: int | None = None, last: int | None = None,
           settings: DetectSettings | None = None) -> list[Trend]:
    """``metric``'s trend in every comparable series matching the filters (each on its own)."""
    return [trend_of(s, settings) for s in store.series(metric, workload, hardware, world_size, last)]


def overview(store: StoreReads, metrics: Sequence[str] = KEY_METRICS, last: int | None = None,
             settings: DetectSettings | None = None) -> list[Trend]:
    """Every series' key metrics: regressions still in force first (largest move first), then the rest."""
    stored = store.metric_names()
    found: list[Trend] = []
    for metric in metrics:
        if metric in stored:
            found.extend(trends(store, metric, last=last, settings=settings))

    def order(t: Trend) -> tuple[int, float, str, str]:
        move = abs(t.latest_change.point.change_pct) if t.regressed and t.latest_change else 0.0
        return (0 if t.regressed else 1, -move, t.series.key.describe(), t.series.metric)

    return sorted(found, key=order)

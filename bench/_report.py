"""What every bench prints: interleaved samples, each figure beside its goal, and a JSON summary.

A reviewer reruns the benches on a machine that is rarely quiet, so one sample per tool says
little (one Kineto sample ranged 2.3–6.2x across runs). The helpers here therefore

* take several samples per tool *interleaved* (A B A B ...), so a noisy second hits every
  tool alike, and pair the samples of each round so a ratio to an anchor is computed per
  round before the median is taken;
* print each figure as median and min–max range, its ratio to the anchor measured in the
  same run, and one line per goal with ``met`` or ``MISSED`` (judged on the median);
* record what actually ran (interpreter, commands, versions) and why a figure was skipped;
* write the same content as JSON (``--json OUT``) for ``run_all.py`` and for tests.

Use::

    report = Report("bench_x", "what it measures", quick=args.quick)
    report.label("interpreter", interpreter_label())
    samples = interleave({"mine": run_mine, "anchor": run_anchor}, rounds=5)
    report.add("anchor", samples["anchor"], "ns")
    report.add("mine", samples["mine"], "ns", anchor="anchor",
               goals=[at_most(60), at_most_times(0.2, source="issue 4")])
    # also: at_least(limit), at_least_times(ratio), at_most_above(delta) (difference to the anchor)
    report.skip("other anchor", "pytorch-lightning not installed")
    report.finish(args.json)   # prints, writes the JSON if asked

Missed goals never change the exit status: the benches report, the reviewer judges.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, TypeVar

T = TypeVar("T")

GoalKind = Literal["max", "min", "times_max", "times_min", "above_max"]


@dataclass(frozen=True)
class Goal:
    """A bound the median of a figure must meet; build one with the functions below."""

    kind: GoalKind
    limit: float
    source: str = ""  # where the goal comes from, e.g. "issue 5"

    def describe(self, unit: str, anchor: str | None) -> str:
        """The goal as one would say it, e.g. ``<= 1.5 s`` or ``<= 0.6x HTA``."""
        where = f" ({self.source})" if self.source else ""
        unit = f" {unit}" if unit else ""
        if self.kind == "max":
            return f"<= {_num(self.limit)}{unit}{where}"
        if self.kind == "min":
            return f">= {_num(self.limit)}{unit}{where}"
        if self.kind == "times_max":
            return f"<= {_num(self.limit)}x {anchor}{where}"
        if self.kind == "times_min":
            return f">= {_num(self.limit)}x {anchor}{where}"
        return f"<= {_num(self.limit)}{unit} above {anchor}{where}"


def at_most(limit: float, source: str = "") -> Goal:
    """The figure's median is at most ``limit`` (in the figure's unit)."""
    return Goal("max", limit, source)


def at_least(limit: float, source: str = "") -> Goal:
    """The figure's median is at least ``limit`` (in the figure's unit)."""
    return Goal("min", limit, source)


def at_most_times(ratio: float, source: str = "") -> Goal:
    """The median of the per-round ratios figure/anchor is at most ``ratio``."""
    return Goal("times_max", ratio, source)


def at_least_times(ratio: float, source: str = "") -> Goal:
    """The median of the per-round ratios figure/anchor is at least ``ratio``."""
    return Goal("times_min", ratio, source)


def at_most_above(delta: float, source: str = "") -> Goal:
    """The median of the per-round differences figure - anchor is at most ``delta``."""
    return Goal("above_max", delta, source)


@dataclass
class Figure:
    """One measured quantity: its samples, the anchor it is compared with, and its goals."""

    name: str
    unit: str
    samples: list[float]
    anchor: str | None = None
    goals: list[Goal] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class Verdict:
    """A goal judged: ``met`` is None when it could not be judged (its anchor is missing)."""

    text: str
    value: float | None
    met: bool | None
    why: str = ""


def interleave(tools: Mapping[str, Callable[[], T]], rounds: int, warmup: int = 0) -> dict[str, list[T]]:
    """Call every tool once per round, in the same order (A B A B ...); return the samples per tool.

    ``warmup`` rounds run first and are dropped (file cache, lazy imports). Round ``i`` of
    every tool ran within the same stretch of time, which is what pairing in :class:`Report`
    relies on.
    """
    if rounds < 1:
        raise ValueError(f"interleave: rounds must be >= 1, got {rounds}")
    for _ in range(warmup):
        for call in tools.values():
            call()
    samples: dict[str, list[T]] = {name: [] for name in tools}
    for _ in range(rounds):
        for name, call in tools.items():
            samples[name].append(call())
    return samples


def _num(value: float) -> str:
    """A figure with three significant digits, without exponent noise for the usual ranges."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:  # counts: 2,160,578 rather than 2.16e+06
        return f"{int(value):,}"
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return f"{value:.3g}"


def _paired(values: list[float], anchor: list[float], op: Callable[[float, float], float]) -> list[float]:
    """Per-round op(value, anchor) when both have a sample per round, else op of the medians."""
    if len(values) == len(anchor):
        return [op(v, a) for v, a in zip(values, anchor, strict=True)]
    return [op(statistics.median(values), statistics.median(anchor))]


class Report:
    """The figures of one bench, printed beside their goals and written as JSON on request."""

    def __init__(self, bench: str, title: str, *, quick: bool = False) -> None:
        self.bench = bench
        self.title = title
        self.quick = quick
        self.labels: dict[str, str] = {}
        self.figures: dict[str, Figure] = {}
        self.skipped: list[tuple[str, str]] = []
        self.notes: list[str] = []

    # -- collecting ------------------------------------------------------------------------
    def label(self, key: str, value: str) -> None:
        """Record what actually ran (interpreter, command line, a version), printed in the header."""
        self.labels[key] = value

    def note(self, text: str) -> None:
        """A line printed after the figures (how to read them, what was left out)."""
        self.notes.append(text)

    def add(
        self,
        name: str,
        samples: Iterable[float],
        unit: str,
        *,
        anchor: str | None = None,
        goals: Iterable[Goal] = (),
        note: str = "",
    ) -> Figure:
        """Add a figure; ``anchor`` names a figure of this report measured in the same run."""
        values = [float(v) for v in samples]
        if not values:
            raise ValueError(f"{self.bench}: figure {name!r} has no samples; call skip() instead")
        if name in self.figures:
            raise ValueError(f"{self.bench}: figure {name!r} added twice; give each figure its own name")
        figure = Figure(name, unit, values, anchor, list(goals), note)
        self.figures[name] = figure
        return figure

    def skip(self, name: str, reason: str) -> None:
        """Record a figure that was not measured, and why (missing anchor, fixture, tool)."""
        self.skipped.append((name, reason))

    # -- judging ---------------------------------------------------------------------------
    def ratio(self, figure: Figure) -> list[float] | None:
        """Per-round ratios figure/anchor, or None without a measured anchor."""
        base = self.figures.get(figure.anchor) if figure.anchor else None
        if base is None:
            return None
        return _paired(figure.samples, base.samples, lambda v, a: v / a if a else float("inf"))

    def verdicts(self, figure: Figure) -> list[Verdict]:
        """Each goal of ``figure`` judged on the median (of the paired ratios or differences)."""
        out = []
        base = self.figures.get(figure.anchor) if figure.anchor else None
        for goal in figure.goals:
            text = goal.describe(figure.unit, figure.anchor)
            if goal.kind in ("max", "min"):
                value = statistics.median(figure.samples)
            elif base is None:
                why = f"anchor {figure.anchor!r} was not measured" if figure.anchor else "no anchor named"
                out.append(Verdict(text, None, None, why))
                continue
            elif goal.kind == "above_max":
                value = statistics.median(_paired(figure.samples, base.samples, lambda v, a: v - a))
            else:
                value = statistics.median(self.ratio(figure) or [float("nan")])
            met = value >= goal.limit if goal.kind in ("min", "times_min") else value <= goal.limit
            out.append(Verdict(text, value, met))
        return out

    # -- output ----------------------------------------------------------------------------
    def render(self) -> str:
        """The report as text: header, one block per figure, goals with met/missed, skips, notes."""
        lines = [f"== {self.bench}: {self.title}" + (" [QUICK smoke run: not the figures to quote]"
                                                      if self.quick else "")]
        lines += [f"   {key}: {value}" for key, value in self.labels.items()]
        width = max([len(name) for name in self.figures] + [20])
        for fig in self.figures.values():
            lo, med, hi = min(fig.samples), statistics.median(fig.samples), max(fig.samples)
            text = f"{fig.name:<{width}}  {_num(med):>8} {fig.unit:<3}"
            if len(fig.samples) > 1:
                text += f" (range {_num(lo)}–{_num(hi)}, n={len(fig.samples)})"
            ratios = self.ratio(fig)
            if ratios is not None:
                mid = statistics.median(ratios)
                text += f"  = {_num(mid)}x {fig.anchor}" + (f" (1/x = {_num(1 / mid)})" if 0 < mid < 1 else "")
                if len(ratios) > 1:
                    text += f" (range {_num(min(ratios))}–{_num(max(ratios))})"
            elif fig.anchor:
                text += f"  (anchor {fig.anchor!r} not measured)"
            if fig.note:
                text += f"  [{fig.note}]"
            lines.append(text)
            for v in self.verdicts(fig):
                if v.met is None:
                    lines.append(f"{'':<{width}}    goal {v.text}: not judged ({v.why})")
                else:
                    lines.append(f"{'':<{width}}    goal {v.text}: {'met' if v.met else 'MISSED'}"
                                 f" (median {_num(v.value or 0.0)})")
        for name, reason in self.skipped:
            lines.append(f"{name:<{width}}  skipped: {reason}")
        lines += [f"   note: {text}" for text in self.notes]
        met = sum(1 for f in self.figures.values() for v in self.verdicts(f) if v.met)
        missed = sum(1 for f in self.figures.values() for v in self.verdicts(f) if v.met is False)
        lines.append(f"   goals: {met} met, {missed} missed, {len(self.skipped)} figure(s) skipped")
        return "\n".join(line.rstrip() for line in lines)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (the ``--json`` file)."""
        figures = []
        for fig in self.figures.values():
            ratios = self.ratio(fig)
            figures.append({
                "name": fig.name, "unit": fig.unit, "samples": fig.samples,
                "median": statistics.median(fig.samples), "min": min(fig.samples), "max": max(fig.samples),
                "anchor": fig.anchor, "note": fig.note,
                "ratio_to_anchor": None if ratios is None else {
                    "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
                "goals": [{"goal": v.text, "value": v.value, "met": v.met, "why": v.why}
                          for v in self.verdicts(fig)],
            })
        return {"bench": self.bench, "title": self.title, "quick": self.quick, "labels": self.labels,
                "figures": figures, "skipped": [{"name": n, "reason": r} for n, r in self.skipped],
                "notes": self.notes}

    def finish(self, json_out: Path | None = None) -> None:
        """Print the report; write the JSON summary to ``json_out`` (atomically) when given."""
        print(self.render(), flush=True)
        if json_out is not None:
            write_json(json_out, self.to_json())


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` through a temporary sibling, so no half-written file is left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def common_args(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every bench takes: ``--quick``, ``--samples``, ``--json``."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smallest inputs and fewest samples: a smoke run in seconds, not figures to quote")
    parser.add_argument("--samples", type=int, default=None,
                        help="interleaved samples per tool (default: the bench's own, fewer with --quick)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write the figures, goals and verdicts as JSON to OUT")
    return parser


def interpreter_label() -> str:
    """The interpreter that runs the bench, and whether it is a virtual environment."""
    venv = "venv" if sys.prefix != sys.base_prefix else "no venv active"
    return f"{sys.executable} (python {sys.version.split()[0]}, {venv}, {os.cpu_count()} cpus)"


def version_of(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def versions_label(*distributions: str) -> str:
    """``name version`` for each distribution, ``name absent`` for those not installed."""
    return ", ".join(f"{d} {version_of(d) or 'absent'}" for d in distributions)


def require(module: str, bench: str) -> None:
    """Stop with one line and exit 2 when ``module`` (the my_utils part a bench measures) is not importable.

    The usual cause is running the bench with another interpreter than the project's venv.
    """
    try:
        found = find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        print(f"{bench}: {module} is not importable by {sys.executable}; run the bench with the project's "
              f"interpreter (e.g. .venv/bin/python bench/{bench}.py) or install the distributions "
              "(pip install -r requirements-dev.txt)", file=sys.stderr)
        raise SystemExit(2)

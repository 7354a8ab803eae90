"""Controlled runs (issue 33): real 2-rank gloo DDP trainings with one planted problem each, checked end to end.

Each run (``controlled_runs.py``) is instrumented as the READMEs say and analysed with the two
commands a user runs, ``myutils-profile analyze`` and ``myutils stragglers``. Each planted problem
must be named with its rank, region, steps and size; the clean control must get no warning; the
same holds for runs beside a busy loop per core (the host's scheduler then delays every region
now and then) and for a held-out set of plans drawn with other seeds, sizes, ranks and periods.
Sizes are checked against the planted delay and, to the ms, against the raw CSVs read here.
"""

from __future__ import annotations

import contextlib
import csv
import statistics
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import controlled_runs as cr  # this folder's helper (conftest puts it on sys.path)

pytestmark = pytest.mark.slow

#: Severity thresholds every finding of the time-series rules must respect (share of the median step).
RULE_CATEGORIES = ("bottleneck", "anomaly", "variability", "imbalance")


class Runs:
    """The runs of this module, each made the first time a test asks for it (``kind:case``)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.made: dict[str, Path] = {}

    def __getitem__(self, key: str) -> Path:
        found = self.made.get(key)
        if found is None:
            kind, _, which = key.partition(":")
            plan = HELD_OUT[int(which)] if kind == "heldout" else PLANS[which]
            found = self.factory.mktemp(key.replace(":", "_"))
            with cr.busy_load() if kind.startswith("load") else contextlib.nullcontext():
                cr.run(plan, found)
            self.made[key] = found
        return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The runs: the five cases quiet, two rounds beside a busy loop per core, the held-out plans."""
    return Runs(tmp_path_factory)


PLANS = {
    "clean": cr.Plan("clean", seed=1),
    "slow_rank": cr.Plan("slow_rank", seed=2, rank=1, region="forward"),
    "stall": cr.Plan("stall", seed=3, rank=1),
    "spike": cr.Plan("spike", seed=4, rank=1, region="forward"),
    "leak": cr.Plan("leak", seed=5, rank=1),
}
HELD_OUT = cr.held_out(5, seed=2033)


def _raw(run: Path, region: str) -> dict[int, dict[int, float]]:
    """{rank: {step: END duration of region}} read from the profile CSVs with the csv module."""
    out: dict[int, dict[int, float]] = {}
    for path in sorted((run / "logs").glob("profile_rank_*.csv")):
        rank = int(path.stem.rsplit("_", 1)[1])
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row["event_type"] == "END" and row["event_name"] == region:
                    out.setdefault(rank, {})[int(row["step"])] = float(row["duration_ms"])
    return out


#: Findings not judged here: the Kineto capture-health check of warm-up steps (``kineto/health.py``)
#: flags a first marked step over 1.5x the median of the later ones, which a busy host gives a 7-step
#: window now and then whatever the program does (reported to the lead; the backend leaves the profiler's
#: own start-up out of the marked steps).
NOT_JUDGED = ("capture:warmup_steps:",)


def _serious(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["severity"] in ("warning", "critical")
            and not f["id"].startswith(NOT_JUDGED)]


def _check_severities(report: dict[str, Any]) -> None:
    """No finding of the time-series rules is critical under 5 % of the step it states, or a warning under 1 %."""
    for f in report["findings"]:
        if f["category"] not in RULE_CATEGORIES or f["severity"] == "info":
            continue
        share = (f.get("impact") or {}).get("share_of_step")
        assert share is not None, f["title"]
        assert share >= (0.05 if f["severity"] == "critical" else 0.01), (f["severity"], share, f["title"])


def check_run(run: Path) -> None:
    """Everything the truth of ``run`` says must be named, and nothing else warned about."""
    truth = cr.truth(run)
    report = cr.analyze(run)
    straggle = cr.stragglers(run)
    _check_severities(report)
    case = truth["case"]
    serious = _serious(report)
    titles = [f["title"] for f in serious]
    if case == "clean":
        assert serious == [], titles
        assert straggle["stragglers"] == []
    elif case == "slow_rank":
        _check_slow_rank(run, truth, report, straggle)
    elif case == "stall":
        _check_stall(truth, report, straggle)
    elif case == "spike":
        _check_spike(truth, report, straggle)
    elif case == "leak":
        _check_leak(truth, report, straggle)


def _check_slow_rank(run: Path, truth: dict[str, Any], report: dict[str, Any], straggle: dict[str, Any]) -> None:
    (rank,), region, planted = truth["ranks"], truth["region"], truth["extra_ms"]
    slow = [f for f in _serious(report) if f["category"] == "imbalance"]
    assert [(f["evidence"]["names"], f["evidence"]["ranks"]) for f in slow] == [([region], [rank])], \
        [f["title"] for f in slow]
    (f,) = slow
    raw = _raw(run, region)
    other = 1 - rank
    independent = statistics.median(raw[rank][s] - raw[other][s] for s in raw[rank] if s in raw[other])
    assert f["evidence"]["excess_ms"] == pytest.approx(independent, rel=0.1, abs=1.0)
    assert planted * 0.8 <= f["evidence"]["excess_ms"] <= planted * 1.8 + 10  # a sleep overshoots on a busy host
    # the rank that waits is not blamed: no warning names another rank
    assert all(rank in g["evidence"].get("ranks", [rank]) for g in _serious(report)), [g["title"] for g in _serious(report)]
    assert _serious(report)[0]["id"] == f["id"]  # the first thing to fix
    assert straggle["stragglers"] == [{"rank": rank, "section": region}]


def _check_stall(truth: dict[str, Any], report: dict[str, Any], straggle: dict[str, Any]) -> None:
    steps, period, planted = truth["steps"], truth["period"], truth["extra_ms"]
    stalls = [f for f in _serious(report) if f["category"] == "anomaly" and f["evidence"].get("period") == period]
    assert stalls, [f["title"] for f in report["findings"] if f["category"] == "anomaly"]
    for f in stalls:
        ev = f["evidence"]
        assert ev["recurring_steps"] == steps
        assert "data" in (ev["names"] + [(ev.get("explained_by") or {}).get("name")])
        assert set(ev["ranks"]) <= set(truth["ranks"])
    assert {r for f in stalls for r in f["evidence"]["ranks"]} <= set(truth["ranks"])
    data = next(s for s in straggle["sections"] if s["section"] == "data")
    if len(truth["ranks"]) == 1:  # one rank stalls: an outlier of that rank at each stalled step
        (rank,) = truth["ranks"]
        assert data["period"] == period and data["recurring_steps"] == steps
        stalled = [o for o in data["outliers"] if o["rank"] == rank and o["step"] in steps]
        assert len(stalled) == len(steps) and all(o["ms"] - o["reference_ms"] >= 0.8 * planted for o in stalled)
    assert straggle["stragglers"] == []


def _check_spike(truth: dict[str, Any], report: dict[str, Any], straggle: dict[str, Any]) -> None:
    (rank,), region, (step,), planted = truth["ranks"], truth["region"], truth["steps"], truth["extra_ms"]
    named = [f for f in report["findings"] if f["category"] == "anomaly" and step in f["evidence"]["steps"]
             and f["evidence"]["ranks"] == [rank]]
    assert named, [f["title"] for f in report["findings"] if f["category"] == "anomaly"]
    # the region that took the spike's time at that step is named (other flagged steps may be the host's, and on a
    # loaded host another region of the same rank may also stand out at that step: one of them is the spike's)
    def names_region(ev: dict[str, Any]) -> bool:
        at_step = [c["name"] for c in ev.get("causes", []) if c["step"] == step]
        return region in ev["names"] or at_step == [region]

    assert any(names_region(f["evidence"]) for f in named), [(f["evidence"]["names"], f["evidence"].get("causes"))
                                                              for f in named]
    # the other rank's long step was a wait: folded in, not a finding of its own at that step
    assert not [f for f in report["findings"] if f["category"] == "anomaly" and f["evidence"]["ranks"] == [1 - rank]
                and f["evidence"]["names"] == ["step_time"] and step in f["evidence"]["steps"]]
    assert not [f for f in _serious(report) if f["category"] == "imbalance"]  # one step is no straggler
    assert straggle["stragglers"] == []
    spikes = [o for o in straggle["outliers"] if (o["section"], o["rank"], o["step"]) == (region, rank, step)]
    assert spikes and spikes[0]["ms"] - spikes[0]["reference_ms"] >= 0.8 * planted


def _check_leak(truth: dict[str, Any], report: dict[str, Any], straggle: dict[str, Any]) -> None:
    (rank,), per_step = truth["ranks"], truth["leak_bytes_per_step"]
    leaks = [f for f in report["findings"] if f["category"] == "memory"]
    assert [(f["evidence"]["names"], f["evidence"]["ranks"]) for f in leaks] == [(["monitor/host_rss_bytes"], [rank])]
    assert leaks[0]["evidence"]["slope_per_step"] == pytest.approx(per_step, rel=0.25)
    assert "MiB per step" in leaks[0]["title"]
    assert {s["rank"] for s in straggle["stragglers"]} <= {rank}


@pytest.mark.parametrize("case", list(PLANS))
def test_each_planted_problem_is_named_and_the_control_is_quiet(runs: Runs, case: str) -> None:
    check_run(runs[f"quiet:{case}"])


@pytest.mark.parametrize("round_", ["load1", "load2"])
@pytest.mark.parametrize("case", list(PLANS))
def test_the_results_hold_beside_a_busy_loop_per_core(runs: Runs, case: str, round_: str) -> None:
    check_run(runs[f"{round_}:{case}"])


@pytest.mark.parametrize("index", range(len(HELD_OUT)))
def test_held_out_plans(runs: Runs, index: int) -> None:
    check_run(runs[f"heldout:{index}"])


def test_the_held_out_plans_differ_from_the_tuned_ones() -> None:
    assert {p.case for p in HELD_OUT} == set(cr.CASES)
    tuned = {(p.seed, p.steps, p.width, p.rank, p.extra_ms) for p in PLANS.values()}
    assert not tuned & {(p.seed, p.steps, p.width, p.rank, p.extra_ms) for p in HELD_OUT}
